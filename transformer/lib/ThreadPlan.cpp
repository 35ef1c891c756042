// The plan's lookups (see ThreadPlan.h): plain data, no analysis.
#include "ThreadPlan.h"

#include "clang/AST/Decl.h"

namespace ppios {

std::string shadowName(const clang::VarDecl *VD) { return "ppios_pt_g_" + VD->getNameAsString(); }

const UnitPlan &ThreadPlan::unit(const Unit &U) const {
  static const UnitPlan None;
  auto It = Units.find(&U);
  return It == Units.end() ? None : It->second;
}

const IoCallPlan *ThreadPlan::call(const clang::CallExpr *Call) const {
  auto It = Calls.find(Call);
  return It == Calls.end() ? nullptr : &It->second;
}

bool ThreadPlan::isGlobalHandle(const clang::VarDecl *VD) const {
  return GlobalHandles.count(VD->getCanonicalDecl());
}

const HeapLocal *ThreadPlan::heapLocal(const clang::VarDecl *VD) const {
  for (const HeapLocal &H : HeapLocals)
    if (H.Var == VD)
      return &H;
  return nullptr;
}

} // namespace ppios
