// See PlanVerifier.h and docs/design/pt-confinement.md.
#include "PlanVerifier.h"
#include "PlannerSupport.h"

#include "clang/AST/Attr.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"
#include "clang/Basic/SourceManager.h"

using namespace clang;

namespace ppios {
using namespace slicing;

namespace {
// The rules, as the remarks name them.
const char *const StoreRule = " (the prefetch thread stores only to memory it owns)";
const char *const CallRule =
    " (the prefetch thread calls only the runtime, libc functions that leave the program's "
    "memory alone, and helpers that pass the same check)";
const char *const AsmRule = " (the prefetch thread runs no inline assembly)";
const char *const CleanupRule = " (the prefetch thread runs none of the program's cleanup functions)";
const char *const KindRule =
    " (the prefetch thread runs only expressions whose every store and call it checks)";

bool renamedToRuntime(llvm::StringRef Name) {
  return Name == "malloc" || Name == "calloc" || Name == "realloc" || Name == "free";
}
} // namespace

const char *const PlanVerifier::HeapRule =
    " (the prefetch thread keeps big locals in its own heap, within PPIOS_CACHE_MB)";

uint64_t PlanVerifier::stackBytes(const VarDecl *VD) {
  if (!VD->hasLocalStorage() || isa<ParmVarDecl>(VD))
    return 0;
  QualType T = VD->getType();
  if (T->isVariableArrayType())
    return Unbounded;
  if (T->isIncompleteType() || T->isVariablyModifiedType())
    return 0;
  return static_cast<uint64_t>(VD->getASTContext().getTypeSizeInChars(T).getQuantity());
}

std::string PlanVerifier::stackSize(const VarDecl *VD) {
  uint64_t Bytes = stackBytes(VD);
  return Bytes == Unbounded ? "sized only when it runs" : std::to_string(Bytes) + " bytes";
}

PlanVerifier::PlanVerifier(const ThreadPlan &Plan, const PrefetchPlanner &Planner)
    : Plan(Plan), Planner(Planner), Units(Planner.Units) {
  for (const auto &Entry : Plan.Units)
    for (const CloneCallPlan &C : Entry.second.CloneCalls)
      CloneCalls[C.Call] = &C;
}

bool PlanVerifier::strippableCleanup(const VarDecl *VD) {
  const auto *A = VD->getAttr<CleanupAttr>();
  if (!A)
    return true;
  const SourceManager &SM = VD->getASTContext().getSourceManager();
  SourceRange R = A->getRange();
  return R.getBegin().isFileID() && R.getEnd().isFileID() && SM.isWrittenInMainFile(R.getBegin()) &&
         SM.isWrittenInMainFile(R.getEnd());
}

std::vector<Violation> PlanVerifier::verify() {
  Found.clear();
  const FunctionDecl *FD = Units.function();
  // A clone is the program's function run by the PT: assembly anywhere in it may touch
  // anything, and which of its statements a later plan keeps is not worth the doubt.
  if (Plan.Clone) {
    bool Asm = false;
    forEachStmtIn(FD->getBody(), [&](const Stmt *S) { Asm |= isa<AsmStmt>(S); });
    if (Asm) {
      Found.push_back({Violation::Function, nullptr, nullptr, nullptr,
                       "it is in '" + FD->getNameAsString() + "', which has inline assembly" + AsmRule});
      return Found;
    }
  }
  for (const auto &Owned : Units.all())
    verifyUnit(*Owned);
  for (const auto &Owned : Units.all())
    verifyBounds(*Owned);
  verifyOwnDeclarations();
  return Found;
}

// What the plan makes of U, as the emitter renders it: a statement the PT runs as written
// is checked whole, one it cannot run only for the calls it keeps; what is only counted,
// declared as the PT's own (zeroed), taken from the MT or left out runs nothing.
void PlanVerifier::verifyUnit(const Unit &U) {
  const UnitPlan &P = Plan.unit(U);
  switch (P.Form) {
  case UnitPlan::Return: // a return keeps only the calls of its value
  case UnitPlan::KeptCalls:
    verifyKeptCalls(U);
    return;
  case UnitPlan::Header:
    // The header is emitted as written (a bad one never is in the slice, see
    // eligibleForSlice; checked all the same).
    for (const Stmt *Part : headerParts(U.S)) {
      std::string Why = checkRuns(Part, U, /*AsWritten=*/true);
      if (!Why.empty()) {
        Found.push_back({Violation::Statement, &U, nullptr, nullptr, Why});
        return;
      }
    }
    return;
  case UnitPlan::AsWritten:
    if (std::string Why = checkRuns(U.S, U, /*AsWritten=*/true); !Why.empty())
      Found.push_back({Violation::Statement, &U, nullptr, nullptr, Why});
    return;
  case UnitPlan::Outside:
  case UnitPlan::Dropped:
  case UnitPlan::Counted:
  case UnitPlan::TakesHandles:
  case UnitPlan::Block:
  case UnitPlan::Exit:
  case UnitPlan::Jump:
  case UnitPlan::CountOnly:
  case UnitPlan::Declares:
    return;
  }
}

// The variables the PT declares as its own (zeroed: its prologue, the declarations it does
// not run as written, the ones beside a handle it takes): a big one lives in its heap.
// (The plan puts every big one it can there, and makes the rest undeclarable.)
void PlanVerifier::verifyOwnDeclarations() {
  auto Check = [&](const VarDecl *VD, const Unit *At) {
    if (stackBytes(VD) <= StackLimit || Plan.heapLocal(VD))
      return;
    Found.push_back({At ? Violation::Statement : Violation::Function, At, nullptr, nullptr,
                     "declares " + quoted(VD) + ", " + stackSize(VD) +
                         ", on the prefetch thread's stack" + HeapRule});
  };
  for (const VarDecl *VD : Plan.PrologueDeclared)
    Check(VD, nullptr);
  for (const auto &Owned : Units.all()) {
    const UnitPlan &P = Plan.unit(*Owned);
    for (const VarDecl *VD : P.Declared)
      Check(VD, Owned.get());
    if (P.Form == UnitPlan::TakesHandles)
      if (const auto *DS = dyn_cast<DeclStmt>(Owned->S); DS && !DS->isSingleDecl())
        for (const Decl *D : DS->decls())
          if (const auto *VD = dyn_cast<VarDecl>(D))
            Check(VD, Owned.get());
  }
}

// The prefetched reads and active clone calls the PT keeps from a statement it cannot run:
// their operands (and the conditions of their arms) are all the PT evaluates of it.
void PlanVerifier::verifyKeptCalls(const Unit &U) {
  auto Guards = [&](const std::vector<ArmGuard> &Gs) {
    for (const ArmGuard &G : Gs) {
      std::string Why = checkRuns(G.Cond, U, /*AsWritten=*/false);
      if (!Why.empty())
        return Why;
    }
    return std::string();
  };
  for (const IoCallSite &Site : U.IoCalls) {
    const IoCallPlan *D = Plan.call(Site.Call);
    if (!D || !D->Prefetched)
      continue;
    std::string Why = Guards(D->Guards);
    if (Why.empty())
      Why = checkCall(Site.Call, U, /*AsWritten=*/false);
    if (!Why.empty())
      Found.push_back({Violation::KeptCall, &U, Site.Call, nullptr, "an operand " + Why});
  }
  for (const CloneCallPlan &C : Plan.unit(U).CloneCalls) {
    std::string Why = Guards(C.Guards);
    if (Why.empty())
      Why = checkCall(C.Call, U, /*AsWritten=*/false);
    if (!Why.empty())
      Found.push_back({Violation::KeptCall, &U, C.Call, nullptr, "an argument " + Why});
  }
}

// Every node is classified (nodeEffect): what stores is checked where it stores, a call
// by its callee, and a kind nobody listed is refused. What S evaluates is its children
// (not the operand of sizeof or _Alignof, unless its type is variably modified) and the
// sizes of the variably modified types it names (sizeExpressions), which the children
// do not show.
std::string PlanVerifier::checkRuns(const Stmt *S, const Unit &U, bool AsWritten) {
  if (!S)
    return "";
  switch (nodeEffect(S)) {
  case NodeEffect::Unknown:
    return "has " + describeNode(S, Units.function()->getASTContext().getSourceManager()) +
           ", an expression whose stores and calls the prefetch thread cannot check" + KindRule;
  case NodeEffect::Asm:
    return std::string("has inline assembly") + AsmRule;
  case NodeEffect::Calls:
    return checkCall(cast<CallExpr>(S), U, AsWritten);
  case NodeEffect::Stores: {
    NodeStores Stores = nodeStores(S);
    for (const Expr *LValue : Stores.LValues)
      if (std::string Why = checkStore(LValue); !Why.empty())
        return Why;
    for (const Expr *Pointer : Stores.Through)
      if (std::string Why = checkDestination(
              Pointer, describeNode(S, Units.function()->getASTContext().getSourceManager()));
          !Why.empty())
        return Why;
    break;
  }
  case NodeEffect::None:
    break;
  }
  llvm::SmallVector<const Expr *, 2> Sizes;
  sizeExpressions(S, Sizes);
  for (const Expr *Size : Sizes)
    if (std::string Why = checkRuns(Size, U, AsWritten); !Why.empty())
      return Why;
  if (!operandsEvaluated(S))
    return "";
  if (const auto *DS = dyn_cast<DeclStmt>(S))
    for (const Decl *D : DS->decls())
      if (const auto *VD = dyn_cast<VarDecl>(D)) {
        // A declaration the PT runs as written puts the variable on its stack (the plan
        // turns one of a big local into a declaration of its heap block, Declares).
        if (stackBytes(VD) > StackLimit)
          return "declares " + quoted(VD) + ", " + stackSize(VD) + ", on the prefetch thread's stack" +
                 HeapRule;
        if (const auto *A = VD->getAttr<CleanupAttr>())
          // The plan removes it from the PT's copy of a declaration statement it runs as
          // written (the PT's heap blocks are freed when the PT ends); anywhere else, or
          // from a macro (not strippable), it would stay.
          if (!(DS == U.S && AsWritten && llvm::is_contained(Plan.unit(U).StripCleanup, VD)))
            return "declares " + quoted(VD) + " with the program's cleanup function '" +
                   A->getFunctionDecl()->getNameAsString() + "'" + CleanupRule;
      }
  for (const Stmt *Child : S->children()) {
    std::string Why = checkRuns(Child, U, AsWritten);
    if (!Why.empty())
      return Why;
  }
  return "";
}

std::string PlanVerifier::checkCall(const CallExpr *Call, const Unit &U, bool AsWritten) {
  auto Args = [&](auto Skip) -> std::string {
    for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
      if (Skip(I))
        continue;
      std::string Why = checkRuns(Call->getArg(I), U, AsWritten);
      if (!Why.empty())
        return Why;
    }
    return "";
  };
  if (const IoCallInfo *Info = IoCallTable::lookup(Call)) {
    if (Info->Kind == IoKind::Write)
      return ""; // counted, never run
    const auto Index = [](unsigned I) { return static_cast<int>(I); };
    if (Info->Kind == IoKind::Read) {
      const IoCallPlan *D = Plan.call(Call);
      if (!D || !D->Prefetched)
        return ""; // counted, never run
      for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
        const Expr *Arg = Call->getArg(I);
        int K = Index(I);
        if (K == Info->DropArgs[0] || K == Info->DropArgs[1])
          continue;
        // The copy's destination is written by the runtime: memory the PT must own.
        // A buffer that is not the PT's is not copied into: the read stays, a plain
        // prefetch, and what needs its bytes is left alone.
        if (K == Info->BufferArg) {
          if (D->Copy) {
            std::string Why = checkDestination(Arg, "");
            if (!Why.empty()) {
              if (const VarDecl *B = bufferOf({Call, Info, nullptr})) {
                Found.push_back({Violation::CopyBuffer, &U, Call, B, Why});
                continue;
              }
              return Why;
            }
          }
          continue;
        }
        // The PT's own status and scalars stay (locals), any other is dropped.
        if (K == Info->StatusArg || (Info->Formatted && IoCallTable::isDataDestination(*Info, I)))
          continue;
        std::string Why = checkRuns(Arg, U, AsWritten);
        if (!Why.empty())
          return Why;
      }
      return "";
    }
    // Opens, seeks, closes and queries: the PT's own calls; what they return through a
    // pointer lands in memory the PT must own.
    for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
      int K = Index(I);
      std::string Why = K == Info->OutArg || K == Info->StatusArg ||
                                (Info->HandleIsOut && K == Info->HandleArg)
                            ? checkDestination(Call->getArg(I), Info->Name)
                            : checkRuns(Call->getArg(I), U, AsWritten);
      if (!Why.empty())
        return Why;
    }
    return "";
  }
  if (auto It = CloneCalls.find(Call); It != CloneCalls.end()) {
    // The clone passed this check on its plan; an argument it does not use is 0.
    const CloneCallPlan *C = It->second;
    return Args([&](unsigned I) { return llvm::is_contained(C->ZeroArgs, I); });
  }
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee)
    return std::string("calls through a function pointer") + CallRule;
  std::string Name = Callee->getNameAsString();
  if (Callee->getIdentifier() && renamedToRuntime(Callee->getName())) {
    // The emitter turns them into ppios_pt_* in the statements the PT runs as written,
    // where they are spelled in the file; the PT never frees the program's blocks.
    const Expr *Ref = Call->getCallee()->IgnoreParenImpCasts();
    if (!AsWritten || Ref->getBeginLoc().isMacroID())
      return "calls '" + Name + "' where the prefetch thread cannot use its own allocator" +
             CallRule;
    return Args([](unsigned) { return false; });
  }
  CalleeEffect E = Units.oracle().classify(Callee);
  if (E.Effect == CalleeEffect::Unsafe)
    return E.Why + CallRule;
  // A formatted call whose format may have %n stores through its pointer arguments too.
  CallStores Stores = callStores(Call, E);
  if (!Stores.Known)
    return Stores.Why + StoreRule;
  for (unsigned I = 0; I < Call->getNumArgs() && I < 32; ++I)
    if (Stores.Args & (1u << I)) {
      std::string Why = checkDestination(Call->getArg(I), Name);
      if (!Why.empty())
        return Why;
    }
  return Args([](unsigned) { return false; });
}

// Memory a callee (or, Callee empty, the runtime's copy of a read) stores into through Arg.
std::string PlanVerifier::checkDestination(const Expr *Arg, const std::string &Callee) {
  const Expr *E = Arg->IgnoreParenCasts();
  if (isNullPointer(E))
    return "";
  std::string Why;
  if (const auto *UO = dyn_cast<UnaryOperator>(E); UO && UO->getOpcode() == UO_AddrOf)
    Why = checkStore(UO->getSubExpr());
  else if (const auto *DRE = dyn_cast<DeclRefExpr>(E);
           DRE && isa<VarDecl>(DRE->getDecl()) && DRE->getType()->isArrayType())
    Why = checkStore(DRE);
  else
    Why = checkPointer(E);
  if (Why.empty() || Callee.empty())
    return Why;
  return "passes memory to '" + Callee + "', which " + Why;
}

std::string PlanVerifier::checkStore(const Expr *LValue) {
  StoreTarget T = classifyStore(LValue);
  switch (T.Target) {
  case StoreTarget::Variable:
    if (ownedVariable(T.Var))
      return "";
    return std::string("stores to ") +
           (T.Var->isStaticLocal() ? "the program's static local " : "global ") + quoted(T.Var) +
           StoreRule;
  case StoreTarget::ThroughPointer:
    return checkPointer(T.Pointer);
  case StoreTarget::Unknown:
    break;
  }
  return std::string("stores to memory the prefetch thread cannot name") + StoreRule;
}

// A pointer the PT stores through: to a block it allocated (a pointer of its region set
// only from malloc/calloc, which it allocates with ppios_pt_malloc), to a variable it owns,
// or, in a clone, a pointer parameter its callers pass only such memory for (ParamRole::
// Deref; a string parameter is a value, its callers may pass anything).
std::string PlanVerifier::checkPointer(const Expr *Pointer) {
  const Expr *E = Pointer->IgnoreParenCasts();
  while (const auto *BO = dyn_cast<BinaryOperator>(E)) {
    if (BO->getOpcode() != BO_Add && BO->getOpcode() != BO_Sub)
      break;
    E = (BO->getLHS()->getType()->isPointerType() ? BO->getLHS() : BO->getRHS())->IgnoreParenCasts();
  }
  if (const auto *UO = dyn_cast<UnaryOperator>(E); UO && UO->getOpcode() == UO_AddrOf)
    return checkStore(UO->getSubExpr());
  if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
    if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
      if (VD->getType()->isArrayType())
        return checkStore(DRE);
      if (Planner.heapOwned(VD)) {
        std::string Why = unallocated(VD);
        if (Why.empty())
          return "";
        return "stores through " + quoted(VD) + ", which " + Why;
      }
      if (Plan.Clone && isa<ParmVarDecl>(VD) && !isStringPointer(VD->getType()) &&
          Planner.plainPointee(VD))
        return "";
      return "stores through " + quoted(VD) + ", memory the prefetch thread did not allocate" +
             StoreRule;
    }
  return std::string("stores through a pointer the prefetch thread did not allocate") + StoreRule;
}

// Every statement that sets a heap-owned pointer (to a fresh block) must be one the PT
// runs: a declaration it only declares leaves the pointer null. Empty if they all are.
std::string PlanVerifier::unallocated(const VarDecl *VD) const {
  for (const auto &Owned : Units.all()) {
    const Unit &U = *Owned;
    if (U.TopIndex < Plan.Start || !U.Defs.count(VD) ||
        (U.InSlice && !U.Bad && Planner.ancestorsGood(U)))
      continue;
    std::string Line = std::to_string(
        VD->getASTContext().getSourceManager().getPresumedLineNumber(U.S->getBeginLoc()));
    return "the prefetch thread does not allocate: line " + Line + " sets it" +
           (U.Bad ? ", which " + U.BadWhy : std::string(", a statement it does not run"));
  }
  return "";
}

// Variables the PT's text names are its own: locals and parameters (its copies, its own
// declarations), main()'s captured values (copies in its prologue, globals included), the
// shadows of global handles, and the function's statics, which the PT declares as statics
// of its own (its prologue, or its copy of their declaration, see
// PrefetchThreadEmitter::ownDeclaration). A global is the program's.
bool PlanVerifier::ownedVariable(const VarDecl *VD) const {
  if (VD->hasLocalStorage())
    return true;
  if (Plan.isGlobalHandle(VD))
    return true;
  if (VD->isStaticLocal()) {
    if (VD->getParentFunctionOrMethod() != Units.function())
      return false;
    const Unit *D = Units.declaringUnit(VD);
    if (!D)
      return false;
    if (D->TopIndex < Plan.Start && !Plan.Clone)
      return true;
    return D->InSlice;
  }
  return !Plan.Clone && llvm::is_contained(Plan.Captured, VD);
}

} // namespace ppios
