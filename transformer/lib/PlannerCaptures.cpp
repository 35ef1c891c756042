// The planner's capture analysis: the values the MT copies into the PT's context at the
// start point, and the handles it reopens there (see PrefetchPlanner.h).
#include "PlannerSupport.h"
#include "SourceText.h"

#include "clang/Basic/SourceManager.h"

#include <algorithm>

using namespace clang;

namespace ppios {
using namespace slicing;

void PrefetchPlanner::collectCaptures() {
  llvm::DenseSet<const VarDecl *> Seen;
  auto DeclaredBeforeStart = [&](const VarDecl *VD) {
    const Unit *D = Units.declaringUnit(VD);
    if (D)
      return D->TopIndex < Start;
    // Parameters and globals; loop-header variables are not captured.
    return isa<ParmVarDecl>(VD) || VD->hasGlobalStorage();
  };
  auto Capture = [&](const VarDecl *VD) {
    if (!Seen.insert(VD).second || !DeclaredBeforeStart(VD) || unsetAtStart(VD))
      return;
    if (HandleInterface.count(VD))
      return; // reopened, not copied
    if (VD->getType()->isFunctionType())
      return;
    // Library objects (MPI_BYTE is &ompi_mpi_byte) are used in place, never copied.
    const SourceManager &SM = VD->getASTContext().getSourceManager();
    if (VD->hasGlobalStorage() && !SM.isWrittenInMainFile(SM.getExpansionLoc(VD->getLocation())))
      return;
    Captured.push_back(VD);
  };
  for (const auto &Owned : Units.all()) {
    const Unit &U = *Owned;
    if (!U.InSlice || U.TopIndex < Start || U.UnitKind == Unit::Block || handoffAt(U))
      continue;
    bool OnlyCounted = !U.IoCalls.empty() && countTransfers(U) == U.IoCalls.size();
    if (OnlyCounted && U.UnitKind == Unit::Simple) {
      bool AnyPrefetched = false;
      for (const IoCallSite &Site : U.IoCalls)
        if (const ReadDecision *D = decisionFor(Site.Call))
          AnyPrefetched |= D->Prefetched;
      if (!AnyPrefetched)
        continue;
    }
    if (U.Bad) {
      VarSet Operands;
      activeOperands(U, Operands);
      for (const VarDecl *VD : Operands)
        Capture(VD);
      bool HasClone = false;
      for (const CloneCallDecision &C : CloneCalls)
        HasClone |= C.Owner == &U;
      // (A declaration kept only for its names declares them as the PT's own.)
      if (HasClone || U.UnitKind == Unit::Jump || (declaresOnly(U) && !hasActiveCall(U)))
        continue;
    } else {
      // Names only in sizeof need a declaration, not the MT's bytes (often not set yet).
      for (const VarDecl *VD : U.Uses)
        Capture(VD);
    }
    for (const VarDecl *VD : U.Defs)
      Capture(VD);
  }
  // Declaration order, so that the output does not depend on pointer values.
  std::sort(Captured.begin(), Captured.end(), [](const VarDecl *A, const VarDecl *B) {
    const SourceManager &SM = A->getASTContext().getSourceManager();
    return SM.isBeforeInTranslationUnit(A->getLocation(), B->getLocation());
  });
  // Handles the PT reads through that the MT may have set before the start point: copied
  // and reopened by the MT's start block (see ReopenedHandle).
  llvm::DenseSet<const VarDecl *> Used;
  for (const auto &Owned : Units.all())
    if (Owned->InSlice && Owned->TopIndex >= Start)
      for (const IoCallSite &Site : Owned->IoCalls)
        if (Site.Handle && !Site.HandleField)
          Used.insert(Site.Handle);
  for (const CloneCallDecision &C : CloneCalls) {
    if (!C.Active)
      continue;
    for (auto [Index, VD] : cloneHandleArgs(C.Call, *summaryOf(C.Callee)))
      Used.insert(VD);
  }
  for (const CloneCallDecision &C : CloneCalls)
    if (C.Active)
      for (const VarDecl *G : summaryOf(C.Callee)->GlobalHandles)
        Used.insert(G);
  if (AsClone)
    return;
  for (const VarDecl *H : Used) {
    auto Iface = HandleInterface.find(H);
    if (Iface == HandleInterface.end() || !DeclaredBeforeStart(H))
      continue;
    // A global handle is reopened only if a statement before the start sets it (else the
    // shadow keeps its invalid initial value).
    bool SetBefore =
        isa<ParmVarDecl>(H) || (H->hasGlobalStorage() && !(Facts && Facts->isGlobalHandle(H)));
    for (const auto &Owned : Units.all())
      SetBefore |= Owned->TopIndex < Start && Owned->Defs.count(H) &&
                   !(Units.declaringUnit(H) == Owned.get() && !H->getInit());
    if (!SetBefore)
      continue;
    Reopened.push_back({H, nullptr, Iface->second});
    Captured.push_back(H);
  }
  // Captured structs: each descriptor field is reopened.
  for (const VarDecl *VD : Captured) {
    const RecordDecl *RD = VD->getType()->getAsRecordDecl();
    if (!Facts || !RD || !RD->getDefinition())
      continue;
    for (const FieldDecl *F : RD->getDefinition()->fields()) {
      auto It = Facts->HandleFields.find(F);
      if (It != Facts->HandleFields.end())
        Reopened.push_back({VD, F, It->second});
    }
  }
  // Declaration order, so that the output does not depend on pointer values.
  auto Before = [](const VarDecl *A, const VarDecl *B) {
    const SourceManager &SM = A->getASTContext().getSourceManager();
    return SM.isBeforeInTranslationUnit(A->getLocation(), B->getLocation());
  };
  std::sort(Captured.begin(), Captured.end(), Before);
  std::stable_sort(Reopened.begin(), Reopened.end(),
                   [&](const ReopenedHandle &A, const ReopenedHandle &B) {
                     return A.Var != B.Var && Before(A.Var, B.Var);
                   });
}

} // namespace ppios
