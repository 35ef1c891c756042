// The planner's clone analysis: which calls of the slice enter a clone of their callee,
// with which arguments, and the summary a clone gives its callers (see
// PrefetchPlanner.h).
#include "PlannerSupport.h"
#include "SourceText.h"

#include "clang/Basic/SourceManager.h"

#include <algorithm>

using namespace clang;

namespace ppios {
using namespace slicing;

const CloneCallDecision *PrefetchPlanner::cloneCallFor(const CallExpr *Call) const {
  for (const CloneCallDecision &C : CloneCalls)
    if (C.Call == Call)
      return &C;
  return nullptr;
}

const CloneSummary *PrefetchPlanner::summaryOf(const FunctionDecl *Callee) const {
  if (!Facts || !Callee)
    return nullptr;
  auto It = Facts->Clones.find(Callee->getCanonicalDecl());
  return It == Facts->Clones.end() ? nullptr : &It->second;
}

std::string PrefetchPlanner::checkCloneArgument(const Expr *Arg, ParamRole Role,
                                                IoInterface Iface, const Unit *At) {
  const Expr *E = Arg->IgnoreParenImpCasts();
  auto IsBad = [&](const VarDecl *VD) -> std::string {
    const std::string *Bad = badReason(VD, At);
    if (Bad && !HandleInterface.count(VD))
      return "depends on " + quoted(VD) + ", which " + *Bad;
    if (BufferVars.count(VD) && !CopyBuffers.count(VD))
      return "depends on " + dataReadInto(VD);
    auto U = Undeclarable.find(VD);
    if (U != Undeclarable.end())
      return "names " + quoted(VD) + ", which " + U->second;
    return "";
  };
  // A variable of the PT's own: declared in its region, or copied when it starts.
  auto PtVariable = [&](const VarDecl *VD) {
    if (VD->hasGlobalStorage())
      return false;
    if (AsClone)
      return !isa<ParmVarDecl>(VD);
    return true; // main: declared in the region, or captured by value at the start
  };
  switch (Role) {
  case ParamRole::Unused:
    return "";
  case ParamRole::Handle: {
    if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
        auto It = HandleInterface.find(VD);
        if (It != HandleInterface.end() && It->second == Iface) {
          auto Unsafe = UnsafeHandles.find(VD);
          return Unsafe == UnsafeHandles.end() ? "" : Unsafe->second;
        }
      }
    if (const auto *ME = dyn_cast<MemberExpr>(E)) {
      const auto *F = dyn_cast<FieldDecl>(ME->getMemberDecl());
      bool HandleField = false;
      if (F && Facts) {
        auto It = Facts->HandleFields.find(F);
        HandleField = It != Facts->HandleFields.end() && It->second == Iface;
      }
      if (HandleField)
        if (const auto *DRE = dyn_cast<DeclRefExpr>(ME->getBase()->IgnoreParenImpCasts()))
          if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
            if (!ME->isArrow() && PtVariable(VD))
              return IsBad(VD);
            if (ME->isArrow() && ptOwnedPointer(VD)) {
              if (isa<ParmVarDecl>(VD))
                DerefParams.insert(VD);
              return IsBad(VD);
            }
          }
    }
    return "its descriptor is not one the prefetch thread has";
  }
  case ParamRole::Deref: {
    const VarDecl *VD = nullptr;
    bool Addressed = false;
    if (const auto *UO = dyn_cast<UnaryOperator>(E))
      if (UO->getOpcode() == UO_AddrOf)
        if (const auto *DRE = dyn_cast<DeclRefExpr>(UO->getSubExpr()->IgnoreParens())) {
          VD = dyn_cast<VarDecl>(DRE->getDecl());
          Addressed = true;
        }
    if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
      VD = dyn_cast<VarDecl>(DRE->getDecl());
    if (!VD)
      return "it passes memory the prefetch thread does not own";
    if (Addressed || VD->getType()->isArrayType()) {
      if (!PtVariable(VD))
        return "it passes memory the prefetch thread does not own";
      return IsBad(VD);
    }
    if (!ptOwnedPointer(VD))
      return "it passes " + quoted(VD) + ", memory the prefetch thread does not own";
    if (isa<ParmVarDecl>(VD) && !isStringPointer(VD->getType()))
      DerefParams.insert(VD);
    return IsBad(VD);
  }
  case ParamRole::Value:
    break;
  }
  llvm::SmallVector<const Stmt *, 8> Work{E};
  while (!Work.empty()) {
    const Stmt *S = Work.pop_back_val();
    if (isa<CallExpr>(S))
      return "an argument calls a function";
    if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
        std::string Why = IsBad(VD);
        if (!Why.empty())
          return Why;
        if (AsClone) {
          std::string Why = cloneGlobalProblem(VD, /*Store=*/false);
          if (!Why.empty())
            return "an argument " + Why;
        }
      }
    const Expr *Pointer = nullptr;
    if (const auto *ME = dyn_cast<MemberExpr>(S)) {
      if (ME->isArrow())
        Pointer = ME->getBase();
    } else if (const auto *UO = dyn_cast<UnaryOperator>(S)) {
      if (UO->getOpcode() == UO_Deref)
        Pointer = UO->getSubExpr();
    } else if (const auto *ASE = dyn_cast<ArraySubscriptExpr>(S)) {
      if (ASE->getBase()->IgnoreParenImpCasts()->getType()->isPointerType() &&
          !isa<ImplicitCastExpr>(ASE->getBase()->IgnoreParens()))
        Pointer = ASE->getBase();
      else if (const auto *ICE = dyn_cast<ImplicitCastExpr>(ASE->getBase()->IgnoreParens()))
        if (ICE->getCastKind() != CK_ArrayToPointerDecay)
          Pointer = ASE->getBase();
    }
    if (Pointer) {
      const auto *DRE = dyn_cast<DeclRefExpr>(Pointer->IgnoreParenImpCasts());
      const auto *VD = DRE ? dyn_cast<VarDecl>(DRE->getDecl()) : nullptr;
      if (!VD || !ptOwnedPointer(VD))
        return "an argument reads memory of the main thread";
      if (isa<ParmVarDecl>(VD) && !isStringPointer(VD->getType()))
        DerefParams.insert(VD);
    }
    if (isa<UnaryExprOrTypeTraitExpr>(S))
      continue;
    for (const Stmt *Child : S->children())
      if (Child)
        Work.push_back(Child);
  }
  return "";
}

// A call the PT can write: spelled in the file, possibly as a macro argument
// (`CHECK(pread(...))`), not in a macro's definition.
bool PrefetchPlanner::spelledInFile(const CallExpr *Call) const {
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  return spelledInMainFile(SM, Call->getBeginLoc()) && spelledInMainFile(SM, Call->getEndLoc());
}

void PrefetchPlanner::decideCloneCalls() {
  for (CloneCallDecision &C : CloneCalls) {
    const Unit &U = *C.Owner;
    C.Active = false;
    const CloneSummary *S = summaryOf(C.Callee);
    std::string Why;
    if (!spelledInFile(C.Call))
      Why = "the call is inside a macro definition";
    else if (U.TopIndex < Start)
      Why = "the call runs before the prefetch thread can start";
    else if (U.isControl())
      Why = "the call is in a loop or condition header";
    else if (C.Call->getNumArgs() != S->Params.size())
      Why = "the call has a variable number of arguments";
    else if (U.Bad && belowSwitch(U.S, C.Call))
      Why = "the call is in a switch with labels inside inner statements, which the prefetch "
            "thread does not follow";
    for (const Unit *P = U.Parent; P && Why.empty(); P = P->Parent)
      if (P->Bad)
        Why = "the call runs under a condition that " + P->BadWhy;
    for (unsigned I = 0; I < C.Call->getNumArgs() && Why.empty(); ++I) {
      ParamRole Role = S->Params[I];
      const ParmVarDecl *PVD = C.Callee->getParamDecl(I);
      if (Role == ParamRole::Unused && !PVD->getType()->isScalarType())
        Role = ParamRole::Value;
      std::string ArgWhy =
          checkCloneArgument(C.Call->getArg(I), Role, S->HandleInterfaces[I], C.Owner);
      const Decl *Which = nullptr;
      if (const std::string *Problem = ArgWhy.empty() && Role != ParamRole::Unused
                                           ? undeclarable(C.Call->getArg(I), &Which)
                                           : nullptr)
        ArgWhy = "it names " + describe(Which) + ", which " + *Problem;
      if (!ArgWhy.empty())
        Why = "argument " + std::to_string(I + 1) + " of '" + C.Callee->getNameAsString() +
              "': " + ArgWhy;
    }
    // The shadows of the global handles it reads through must be current here.
    for (const VarDecl *G : S->GlobalHandles)
      if (Why.empty() && UnsafeHandles.count(G))
        Why = "'" + C.Callee->getNameAsString() + "' reads through global " + quoted(G) +
              ", which" +
              UnsafeHandles.find(G)->second.substr(UnsafeHandles.find(G)->second.find(" is set"));
    // Globals the clone reads in place must keep their value once the PT started.
    if (!AsClone)
      for (const VarDecl *G : S->Globals)
        for (const auto &Owned : Units.all())
          if (Why.empty() && Owned->TopIndex >= Start &&
              (Owned->Defs.count(G) || Owned->PointerStores.count(G)))
            Why = "main() changes global " + quoted(G) + " after the prefetch thread starts";
    if (Why.empty())
      if (auto It = RefusedCalls.find(C.Call); It != RefusedCalls.end())
        Why = It->second;
    C.Reason = Why;
    C.Active = Why.empty();
    C.Guards = C.Active ? armGuards(C.Call, U) : std::vector<ArmGuard>();
  }
}

// A clone starts at the first statement of its function, with its parameters.
bool PrefetchPlanner::planClone() {
  analyze(0);
  if (score() == 0)
    return false;
  return finishPlan();
}

int PrefetchPlanner::score() const {
  int Score = 0;
  auto InLoop = [](const Unit *U) {
    for (const Unit *P = U; P; P = P->Parent)
      if (P->UnitKind == Unit::Loop)
        return true;
    return false;
  };
  for (const ReadDecision &D : Decisions)
    if (D.Prefetched)
      Score += InLoop(D.Owner) ? 10 : 1;
  for (const CloneCallDecision &C : CloneCalls)
    if (C.Active)
      Score += summaryOf(C.Callee)->Score * (InLoop(C.Owner) ? 10 : 1);
  return Score;
}

CloneSummary PrefetchPlanner::summarize() const {
  CloneSummary S;
  const FunctionDecl *FD = Units.function();
  S.Name = "ppios_pt_" + FD->getNameAsString();
  S.Score = score();
  llvm::DenseSet<const VarDecl *> Captures(Captured.begin(), Captured.end());
  llvm::DenseSet<const VarDecl *> HandlesUsed, Dereferenced(DerefParams.begin(), DerefParams.end());
  for (const auto &Owned : Units.all()) {
    if (!Owned->InSlice || Owned->UnitKind == Unit::Block)
      continue;
    for (const IoCallSite &Site : Owned->IoCalls)
      if (Site.Handle)
        HandlesUsed.insert(Site.Handle);
    if (!Owned->Bad)
      Dereferenced.insert(Owned->DereferencedPointers.begin(), Owned->DereferencedPointers.end());
  }
  for (const CloneCallDecision &C : CloneCalls) {
    if (!C.Active)
      continue;
    const CloneSummary *Callee = summaryOf(C.Callee);
    for (auto [Index, VD] : cloneHandleArgs(C.Call, *Callee))
      HandlesUsed.insert(VD);
    for (const VarDecl *G : Callee->Globals)
      if (std::find(S.Globals.begin(), S.Globals.end(), G) == S.Globals.end())
        S.Globals.push_back(G);
    for (const VarDecl *G : Callee->GlobalHandles)
      if (std::find(S.GlobalHandles.begin(), S.GlobalHandles.end(), G) == S.GlobalHandles.end())
        S.GlobalHandles.push_back(G);
  }
  if (Facts)
    for (const auto &Owned : Units.all())
      if (Owned->InSlice && Owned->UnitKind != Unit::Block)
        for (const VarDecl *VD : Owned->Uses)
          if (Facts->isGlobalHandle(VD) &&
              std::find(S.GlobalHandles.begin(), S.GlobalHandles.end(), VD) ==
                  S.GlobalHandles.end())
            S.GlobalHandles.push_back(VD);
  for (const ParmVarDecl *P : FD->parameters()) {
    ParamRole Role = ParamRole::Unused;
    IoInterface Iface = IoInterface::Posix;
    auto H = HandleInterface.find(P);
    if (H != HandleInterface.end() && HandlesUsed.count(P)) {
      Role = ParamRole::Handle;
      Iface = H->second;
    } else if (Captures.count(P) || HandlesUsed.count(P)) {
      // A pointer the clone keeps is read through somewhere: the caller must pass memory
      // the PT owns (strings excepted, as everywhere in the PT).
      Role = P->getType()->isPointerType() && !isStringPointer(P->getType()) &&
                     !isMpiValueHandle(P->getType())
                 ? ParamRole::Deref
                 : ParamRole::Value;
      (void)Dereferenced;
    }
    S.Params.push_back(Role);
    S.HandleInterfaces.push_back(Iface);
  }
  for (const VarDecl *VD : Captured)
    if (VD->hasGlobalStorage() && !VD->getType().isConstQualified() &&
        std::find(S.Globals.begin(), S.Globals.end(), VD) == S.Globals.end())
      S.Globals.push_back(VD);
  return S;
}

} // namespace ppios
