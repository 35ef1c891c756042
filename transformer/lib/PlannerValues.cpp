// The planner's value analysis: which statements the PT cannot run and which variables
// it cannot compute ("bad"), what memory it owns, the loop conditions it speculates past
// and the arm conditions it keeps (see PrefetchPlanner.h).
#include "PlannerSupport.h"
#include "SourceText.h"

#include "clang/Basic/SourceManager.h"

#include <algorithm>

using namespace clang;

namespace ppios {
using namespace slicing;

bool PrefetchPlanner::ancestorsGood(const Unit &U) const {
  for (const Unit *P = U.Parent; P; P = P->Parent)
    if (P->Bad)
      return false;
  return true;
}

bool PrefetchPlanner::canExecuteInPt(const Unit &U) const {
  return !U.Bad && ancestorsGood(U);
}

// A local declared before the start without a value (C89: `int *idx;` or `char
// name[256];` at the top of main) that no statement before the start sets or takes the
// address of: its value there is indeterminate, so the PT owns it like a local of its
// region, never copied from the MT (a copy would read uninitialized memory).
bool PrefetchPlanner::unsetAtStart(const VarDecl *VD) const {
  const Unit *D = Units.declaringUnit(VD);
  if (!D || D->TopIndex >= Start || VD->hasInit() || !VD->hasLocalStorage() ||
      isa<ParmVarDecl>(VD) ||
      !(VD->getType()->isScalarType() || VD->getType()->isConstantArrayType()))
    return false;
  for (int I = D->TopIndex + 1; I < Start; ++I)
    if (mentions(Units.topLevel()[I]->S, VD))
      return false;
  return true;
}

bool PrefetchPlanner::declaredInRegion(const VarDecl *VD) const {
  const Unit *D = Units.declaringUnit(VD);
  if (D && D->TopIndex >= Start)
    return true;
  if (unsetAtStart(VD))
    return true;
  // Loop variables declared in a for header belong to the loop.
  for (const auto &Owned : Units.all())
    if (Owned->TopIndex >= Start && Owned->UnitKind == Unit::Loop && Owned->Defs.count(VD))
      if (const auto *FS = dyn_cast<ForStmt>(Owned->S))
        if (FS->getInit() && isa<DeclStmt>(FS->getInit()))
          return true;
  return false;
}

// A pointer the PT owns: declared after the start point and only ever set to fresh
// malloc/calloc memory there, so stores through it never reach the MT's memory.
bool PrefetchPlanner::heapOwned(const VarDecl *VD) const {
  if (!VD->getType()->isPointerType() || !declaredInRegion(VD))
    return false;
  for (const auto &Owned : Units.all())
    if (Owned->TopIndex >= Start && Owned->Defs.count(VD) && !Owned->Allocations.count(VD))
      return false;
  return true;
}

// A struct the PT may read through a pointer: no pointers inside but descriptors and
// strings (a pointer field would lead back into the main thread's memory).
bool PrefetchPlanner::plainPointee(const VarDecl *VD) const {
  QualType T = VD->getType();
  if (!T->isPointerType())
    return false;
  T = T->getPointeeType();
  llvm::SmallVector<QualType, 4> Work{T};
  while (!Work.empty()) {
    QualType Q = Work.pop_back_val();
    while (Q->isArrayType())
      Q = QualType(Q->getPointeeOrArrayElementType(), 0);
    if (Q->isVoidType() || Q->isIncompleteType() || Q->isUnionType())
      return false;
    if (Q->isPointerType() && !isStringPointer(Q))
      return false;
    if (const RecordDecl *RD = Q->getAsRecordDecl()) {
      const RecordDecl *Def = RD->getDefinition();
      if (!Def)
        return false;
      for (const FieldDecl *F : Def->fields()) {
        if (Facts && Facts->HandleFields.count(F))
          continue;
        Work.push_back(F->getType());
      }
    }
  }
  return true;
}

// Memory the PT may read through VD: its own heap blocks, strings, and in a clone the
// structs its caller passed (which the caller made sure the PT owns).
bool PrefetchPlanner::ptOwnedPointer(const VarDecl *VD) const {
  if (isStringPointer(VD->getType()) || heapOwned(VD))
    return true;
  return AsClone && isa<ParmVarDecl>(VD) && plainPointee(VD);
}

// A function the PT calls as it is (it has no clone) reads the globals it names in place:
// never memory the MT may free or change through a global pointer, and other globals only
// as a clone may (cloneGlobalProblem). Empty if the call is fine.
std::string PrefetchPlanner::calleeGlobalProblem(const CallExpr *Call) const {
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee || (Facts && Facts->Clones.count(Callee->getCanonicalDecl())))
    return "";
  CalleeEffect E = Units.oracle().classify(Callee);
  if (E.Effect == CalleeEffect::Unsafe)
    return "";
  if (!E.ReadsGlobalPointer.empty())
    return "calls '" + Callee->getNameAsString() +
           "', which reads memory of the main thread through global '" + E.ReadsGlobalPointer +
           "'";
  for (const VarDecl *G : E.GlobalsRead) {
    if (Facts && Facts->isGlobalHandle(G))
      return "calls '" + Callee->getNameAsString() + "', which uses the main thread's descriptor " +
             quoted(G);
    std::string Why = G->getType()->isPointerType()
                          ? "reads memory of the main thread through global " + quoted(G)
                          : cloneGlobalProblem(G, false);
    if (!Why.empty())
      return "calls '" + Callee->getNameAsString() + "', which " + Why;
  }
  return "";
}

// A clone reads globals in place: only those of this file that only main() changes
// (checked against the start point by the caller); it never stores to one.
std::string PrefetchPlanner::cloneGlobalProblem(const VarDecl *VD, bool Store) const {
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  if (!VD->hasGlobalStorage() || VD->isStaticLocal() ||
      !SM.isWrittenInMainFile(SM.getExpansionLoc(VD->getLocation())))
    return "";
  if (Store)
    return "stores to global " + quoted(VD);
  if (Facts && Facts->isGlobalHandle(VD))
    return ""; // the PT's shadow
  if (VD->getType().isVolatileQualified())
    return "reads volatile global " + quoted(VD);
  if (VD->getType().isConstQualified())
    return "";
  if (VD->hasExternalFormalLinkage())
    return "reads global " + quoted(VD) + ", which other files may change";
  if (Facts && Facts->GlobalsWrittenOutsideMain.count(VD))
    return "reads global " + quoted(VD) + ", which functions other than main() change";
  return "";
}

void PrefetchPlanner::markBad() {
  auto MarkBad = [&](Unit &U, const std::string &Why) {
    if (U.Bad)
      return false;
    U.Bad = true;
    U.BadWhy = Why;
    return true;
  };
  for (const auto &Owned : Units.all()) {
    Unit &U = *Owned;
    if (U.TopIndex < Start || U.UnitKind == Unit::Block)
      continue;
    if (U.Unsafe)
      MarkBad(U, U.UnsafeWhy);
    // A statement the verifier refused (PlanVerifier.h): the PT does not run it as written.
    if (auto It = RefusedUnits.find(&U); It != RefusedUnits.end())
      MarkBad(U, It->second);
    // A variable the PT cannot declare (PrefetchPlanner::finishPlan): a statement naming
    // it, even only in sizeof, is one the PT does not run.
    if (!Undeclarable.empty())
      for (const VarSet *Set : {&U.Uses, &U.TypeUses, &U.Defs})
        for (const VarDecl *VD : *Set) {
          auto It = Undeclarable.find(VD);
          if (It != Undeclarable.end())
            MarkBad(U, "names " + quoted(VD) + ", which " + It->second);
        }
    if (UndeclarableTypes && U.UnitKind != Unit::Jump) {
      DeclSet Types;
      for (const Stmt *Part : U.isControl() ? headerParts(U.S) : std::vector<const Stmt *>{U.S})
        localTypesIn(Part, Types);
      for (const Decl *T : Types) {
        auto It = Undeclarable.find(T);
        if (It != Undeclarable.end())
          MarkBad(U, "names " + describe(T) + ", which " + It->second);
      }
    }
    for (const VarDecl *VD : U.Uses)
      if (BufferVars.count(VD) && !CopyBuffers.count(VD) && MarkBad(U, "uses the " + dataReadInto(VD)))
        U.TaintSource = VD;
    for (const VarDecl *VD : U.PointerStores)
      if (!heapOwned(VD))
        MarkBad(U, "stores through pointer " + quoted(VD) + " into memory of the main thread");
    for (const VarDecl *VD : U.DereferencedPointers)
      if (!declaredInRegion(VD) && !isStringPointer(VD->getType()) && !HandleInterface.count(VD) &&
          !(AsClone && isa<ParmVarDecl>(VD) && plainPointee(VD)))
        MarkBad(U, "reads memory of the main thread through " + quoted(VD));
    // A function the PT calls as it is (no clone) reads globals in place: never memory the
    // MT may free or change through a global pointer, and other globals only as a clone
    // may (cloneGlobalProblem).
    for (const CallExpr *Call : U.Calls) {
      std::string Why = calleeGlobalProblem(Call);
      if (!Why.empty() && MarkBad(U, Why))
        break;
    }
    if (AsClone)
      for (const VarSet *Set : {&U.Uses, &U.Defs, &U.PointerStores})
        for (const VarDecl *VD : *Set) {
          std::string Why = cloneGlobalProblem(VD, Set != &U.Uses);
          if (!Why.empty())
            MarkBad(U, Why);
        }
    const ASTContext &Ctx = Units.function()->getASTContext();
    for (const IoCallSite &Site : U.IoCalls)
      if (Site.Info->Kind == IoKind::Open && !Site.HandleField &&
          openMayCreate(Site.Call, *Site.Info, Ctx))
        MarkBad(U, "may create or truncate the file it opens");
    for (const IoCallSite &Site : U.IoCalls)
      if (Site.Info->Kind == IoKind::Open && Site.Info->PathArg >= 0) {
        std::string Why = pathWrittenAfterStart(Site);
        if (!Why.empty())
          MarkBad(U, Why);
      }
    bool HasWrite = false, HasRead = false;
    for (const IoCallSite &Site : U.IoCalls) {
      HasWrite |= Site.Info->Kind == IoKind::Write;
      HasRead |= Site.Info->Kind == IoKind::Read;
    }
    if (HasWrite && (!U.Defs.empty() || U.isControl()))
      MarkBad(U, "depends on the result of a write");
    if (U.UnitKind == Unit::Simple && !isa<Expr>(U.S) && !isa<DeclStmt>(U.S) &&
        !isa<NullStmt>(U.S) && (HasRead || HasWrite || countTransfers(U)))
      MarkBad(U, "I/O inside a statement the slicer does not handle (switch, label, goto)");
    if (U.UnitKind == Unit::Simple && !isa<Expr>(U.S) && !isa<DeclStmt>(U.S) && !isa<NullStmt>(U.S))
      MarkBad(U, "statement kind the slicer does not handle");
  }
  bool Changed = true;
  while (Changed) {
    Changed = false;
    for (const auto &Owned : Units.all()) {
      Unit &U = *Owned;
      if (U.TopIndex < Start || U.UnitKind == Unit::Block)
        continue;
      if (U.Bad || !ancestorsGood(U)) {
        std::string Why = U.Bad ? U.BadWhy : "";
        if (!U.Bad)
          for (const Unit *P = U.Parent; P; P = P->Parent)
            if (P->Bad) {
              Why = "runs under a condition that " + P->BadWhy;
              break;
            }
        const VarDecl *Taint = U.TaintSource;
        for (const Unit *P = U.Parent; P && !Taint; P = P->Parent)
          Taint = P->TaintSource;
        for (const VarSet *Set : {&U.Defs, &U.PointerStores})
          for (const VarDecl *VD : *Set) {
            std::vector<BadDef> &Defs = BadVars[VD];
            if (std::none_of(Defs.begin(), Defs.end(), [&](const BadDef &D) { return D.At == &U; })) {
              Defs.push_back({&U, Why});
              if (Taint && !TaintOf.count(VD))
                TaintOf[VD] = Taint;
              Changed = true;
            }
          }
        continue;
      }
      for (const VarDecl *VD : U.Uses) {
        const std::string *Bad = badReason(VD, &U);
        if (Bad && !HandleInterface.count(VD)) {
          if ((Speculations.count(&U) && Speculations[&U].Vars.count(VD)) ||
              speculate(U, VD, *Bad))
            continue;
          if (MarkBad(U, "depends on " + quoted(VD) + ", which " + *Bad)) {
            Changed = true;
            auto T = TaintOf.find(VD);
            if (T != TaintOf.end())
              U.TaintSource = T->second;
          }
          break;
        }
      }
    }
  }
}

// The PT's file names are copies taken at its start (the emitter's path capture). A name
// behind a pointer (`char *name = malloc(n)`) that a statement after the start fills
// (`snprintf(name, ...)`, `name[i] = ...`) holds nothing yet there: copying it would read
// uninitialized memory, and open a wrong file. Such an open is one the PT does not run (a
// top-level one is handed over by the MT). Empty if the name is fine.
std::string PrefetchPlanner::pathWrittenAfterStart(const IoCallSite &Open) const {
  if (Open.Info->PathArg >= static_cast<int>(Open.Call->getNumArgs()))
    return "";
  const auto *DRE = dyn_cast<DeclRefExpr>(Open.Call->getArg(Open.Info->PathArg)->IgnoreParenImpCasts());
  const auto *VD = DRE ? dyn_cast<VarDecl>(DRE->getDecl()) : nullptr;
  if (!VD || !VD->getType()->isPointerType())
    return "";
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  for (const auto &Owned : Units.all()) {
    const Unit &W = *Owned;
    if (W.TopIndex < Start || W.UnitKind == Unit::Block)
      continue;
    bool Writes = W.PointerStores.count(VD) > 0;
    for (const CallExpr *Call : W.Calls) {
      if (Call == Open.Call || Writes)
        continue;
      CalleeEffect E = Units.oracle().classify(Call->getDirectCallee());
      for (unsigned I = 0; I < Call->getNumArgs() && !Writes; ++I)
        Writes = mentions(Call->getArg(I), VD) &&
                 ((E.Effect == CalleeEffect::Unsafe && !E.StoresKnown) ||
                  (I < 32 && (E.StoredArgs & (1u << I))));
    }
    if (Writes)
      return "opens the file named by " + quoted(VD) + ", which line " +
             std::to_string(SM.getPresumedLineNumber(W.S->getBeginLoc())) +
             " writes after the prefetch thread starts";
  }
  return "";
}

bool PrefetchPlanner::reaches(const Unit *Def, const Unit *Use) const {
  if (HasGoto || !Use)
    return true;
  for (const Unit *P = Def; P; P = P->Parent)
    if (P->UnitKind == Unit::Loop && Use->isWithin(P))
      return true;
  if (Def == Use)
    return false;
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  return SM.isBeforeInTranslationUnit(Def->S->getBeginLoc(), Use->S->getBeginLoc());
}

const std::string *PrefetchPlanner::badReason(const VarDecl *VD, const Unit *Use) const {
  auto It = BadVars.find(VD);
  if (It == BadVars.end())
    return nullptr;
  for (const BadDef &D : It->second)
    if (reaches(D.At, Use))
      return &D.Why;
  return nullptr;
}

// An expression the PT can evaluate at U: no calls, only variables it computes.
bool PrefetchPlanner::computable(const Expr *E, const Unit &U) const {
  if (UndeclarableTypes && undeclarable(E, nullptr))
    return false;
  llvm::SmallVector<const Stmt *, 8> Work{E};
  while (!Work.empty()) {
    const Stmt *S = Work.pop_back_val();
    if (isa<CallExpr>(S) || isa<StmtExpr>(S))
      return false;
    if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
        if (badReason(VD, &U) || (BufferVars.count(VD) && !CopyBuffers.count(VD)) ||
            Undeclarable.count(VD))
          return false;
    for (const Stmt *Child : S->children())
      if (Child)
        Work.push_back(Child);
  }
  return true;
}

// The conditions of Call's arm in U's statement that the PT can evaluate. One it cannot
// is left out: the PT then prefetches for both arms (a wasted prefetch, never a wrong one).
std::vector<ArmGuard> PrefetchPlanner::armGuards(const CallExpr *Call, const Unit &U) const {
  std::vector<ArmGuard> All, Kept;
  findArm(U.S, Call, All);
  for (auto It = All.rbegin(); It != All.rend(); ++It)
    if (computable(It->Cond, U))
      Kept.push_back(*It);
  return Kept;
}

// A loop's condition depends on VD, which the PT cannot compute: if VD appears only in
// side-effect-free conjuncts of the condition, and a conjunct stays to end the loop, the
// PT leaves those out (Speculation) instead of giving the loop up.
bool PrefetchPlanner::speculate(const Unit &U, const VarDecl *VD, const std::string &Why) {
  if (U.UnitKind != Unit::Loop)
    return false;
  const Expr *Cond = nullptr;
  if (const auto *FS = dyn_cast<ForStmt>(U.S)) {
    if (mentions(FS->getInit(), VD) || mentions(FS->getInc(), VD) || FS->getConditionVariable())
      return false;
    Cond = FS->getCond();
  } else if (const auto *WS = dyn_cast<WhileStmt>(U.S)) {
    if (WS->getConditionVariable())
      return false;
    Cond = WS->getCond();
  } else if (const auto *DS = dyn_cast<DoStmt>(U.S)) {
    Cond = DS->getCond();
  }
  if (!Cond)
    return false;
  llvm::SmallVector<const Expr *, 4> All;
  conjunctsOf(Cond, All);
  Speculation &S = Speculations[&U];
  llvm::SmallVector<const Expr *, 2> Mine;
  for (const Expr *C : All)
    if (mentions(C, VD)) {
      if (!sideEffectFree(C))
        return false;
      Mine.push_back(C);
    }
  unsigned Left = 0;
  for (const Expr *C : All)
    Left += !mentions(C, VD) && !llvm::is_contained(S.Conjuncts, C);
  if (Mine.empty() || Left == 0)
    return false;
  for (const Expr *C : Mine)
    if (!llvm::is_contained(S.Conjuncts, C))
      S.Conjuncts.push_back(C);
  S.Vars.insert(VD);
  if (S.Why.empty())
    S.Why = "'" + VD->getNameAsString() + "', which " + Why;
  return true;
}

const Speculation *PrefetchPlanner::speculationFor(const Unit &U) const {
  auto It = Speculations.find(&U);
  return It == Speculations.end() || It->second.Conjuncts.empty() ? nullptr : &It->second;
}

// The PT runs past exits of the program's in two ways that hold it within a window of
// the MT: conjuncts left out of the loop's own condition, and exits under statements it
// drops (see droppedExitHolds).
bool PrefetchPlanner::speculates(const Unit &Loop) const {
  if (Loop.UnitKind != Unit::Loop)
    return false;
  return speculationFor(Loop) != nullptr || droppedExitHolds(Loop);
}

// An exit of the loop (break, return, program exit) under a statement the PT drops is
// held when it depends on the bytes read (`if (tag == SENTINEL) break;`: where the
// program stops, only the data knows), or when the PT has no way left out of the loop
// (`for (;;)` whose every exit is dropped: without the window it would spin at the end
// of the file until the program ends). Other dropped exits are not held: a break on a
// read's result after a statement the PT cannot run (`if (n <= 0) break;` in a loop over
// the blocks) is most often the end of the file, which the loop's own condition finds,
// and holding the PT near the MT there costs its lead (the corpus's hit ratios fell from
// 0.96 to 0.75 when such loops were held too).
bool PrefetchPlanner::droppedExitHolds(const Unit &Loop) const {
  bool Dropped = false, Kept = false;
  for (const auto &Owned : Units.all()) {
    const Unit &J = *Owned;
    if (J.UnitKind != Unit::Jump || isa<ContinueStmt>(J.S) || &J == &Loop || !J.isWithin(&Loop))
      continue;
    // A break that ends an inner loop or a switch does not leave this loop.
    bool ExitsLoop = !isa<BreakStmt>(J.S) || J.jumpTarget() == &Loop;
    bool OnData = false, Runs = J.InSlice;
    for (const Unit *P = &J; P != &Loop; P = P->Parent) {
      OnData |= P->Bad && P->TaintSource != nullptr;
      Runs &= !P->Bad || P == &J;
    }
    if (!ExitsLoop)
      continue;
    if (OnData)
      return true;
    (Runs ? Kept : Dropped) = true;
  }
  return Dropped && !Kept && !endsByCondition(Loop);
}

bool PrefetchPlanner::endsByCondition(const Unit &Loop) const {
  const Expr *Cond = nullptr;
  if (const auto *FS = dyn_cast<ForStmt>(Loop.S))
    Cond = FS->getCond();
  else if (const auto *WS = dyn_cast<WhileStmt>(Loop.S))
    Cond = WS->getCond();
  else if (const auto *DS = dyn_cast<DoStmt>(Loop.S))
    Cond = DS->getCond();
  if (!Cond)
    return false;
  bool Always = false;
  return !(Cond->EvaluateAsBooleanCondition(Always, Units.function()->getASTContext()) && Always);
}

} // namespace ppios
