// The planner's last step: the finished slice turned into the ThreadPlan (ThreadPlan.h)
// that the verifier checks and the emitter renders. Every question about the slice that
// writing the PT's text raises is answered here, once, so that the emitter never comes
// back to the planner and the verifier checks exactly what will be written.
#include "PlanVerifier.h"
#include "PlannerSupport.h"
#include "SourceText.h"

#include "clang/AST/Attr.h"

#include <algorithm>
#include <set>

using namespace clang;

namespace ppios {
using namespace slicing;

namespace {
// A variable of the function the PT's text of S names (main()'s parameters too: the PT's
// only when captured or declared).
void localsNamedIn(const Stmt *S, bool Clone, std::set<const VarDecl *> &Out) {
  forEachStmtIn(S, [&](const Stmt *St) {
    if (const auto *DRE = dyn_cast<DeclRefExpr>(St))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
        if (VD->isLocalVarDecl() || (isa<ParmVarDecl>(VD) && !Clone))
          Out.insert(VD);
  });
}
} // namespace

// Some other statement of the slice uses VD (a declaration's own statement aside).
bool PrefetchPlanner::usedElsewhere(const VarDecl *VD, const Unit &Self) const {
  for (const auto &Owned : Units.all())
    if (Owned.get() != &Self && Owned->InSlice && Owned->UnitKind != Unit::Block &&
        Owned->Uses.count(VD))
      return true;
  return false;
}

// E names only variables the MT has when it starts the PT, with the values they keep
// after: it can be evaluated in the start block. (Not a variable declared after the
// start, in a `for` header say, which is out of scope there.)
bool PrefetchPlanner::capturedOnly(const Expr *E) const {
  llvm::SmallVector<const Stmt *, 8> Work{E};
  while (!Work.empty()) {
    const Stmt *S = Work.pop_back_val();
    if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
        const Unit *D = Units.declaringUnit(VD);
        if (VD->isLocalVarDecl() && (!D || D->TopIndex >= Start))
          return false;
        for (const auto &Owned : Units.all())
          if (Owned->TopIndex >= Start &&
              (Owned->Defs.count(VD) || Owned->PointerStores.count(VD)))
            return false;
      }
    if (isa<CallExpr>(S))
      return false;
    for (const Stmt *Child : S->children())
      if (Child)
        Work.push_back(Child);
  }
  return true;
}

// The PT gets file names as copies taken when it starts, never pointers into MT memory;
// a clone has no context (it opens the path its caller passed), and a local array is the
// PT's own memory (its copy, or its own when it had no value at the start): it opens the
// name it holds then, which its own statements may have built (`snprintf(name, ...)` in
// its loop), never a copy taken at the start.
bool PrefetchPlanner::pathCaptured(const IoCallSite &Site) const {
  if (AsClone || Site.Info->Action != PtAction::RenamePt || Site.Info->PathArg < 0)
    return false;
  const Expr *Path = Site.Call->getArg(Site.Info->PathArg);
  if (!capturedOnly(Path))
    return false;
  if (const auto *DRE = dyn_cast<DeclRefExpr>(Path->IgnoreParenImpCasts()))
    if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
      if (VD->hasLocalStorage() && VD->getType()->isConstantArrayType())
        return false;
  return true;
}

std::vector<CloneCallPlan> PrefetchPlanner::activeCloneCalls(const Unit &U) const {
  std::vector<CloneCallPlan> Out;
  for (const CloneCallDecision &C : CloneCalls) {
    if (C.Owner != &U || !C.Active)
      continue;
    const CloneSummary *S = summaryOf(C.Callee);
    CloneCallPlan P;
    P.Call = C.Call;
    P.Name = S->Name;
    P.Guards = C.Guards;
    for (unsigned I = 0; I < C.Call->getNumArgs() && I < S->Params.size(); ++I)
      if (S->Params[I] == ParamRole::Unused && C.Callee->getParamDecl(I)->getType()->isScalarType())
        P.ZeroArgs.push_back(I);
    Out.push_back(std::move(P));
  }
  return Out;
}

// Why the thread cannot be written, checked in the order the thread is written: the
// captured values (the context struct), then a clone's parameters or main()'s prologue.
std::string PrefetchPlanner::unbuildable(const ThreadPlan &P) const {
  std::string Fn = Units.function()->getNameAsString();
  std::set<std::string> Names;
  for (const VarDecl *VD : P.Captured) {
    if (!nameableAtFileScope(VD->getASTContext(), VD->getType()))
      return "the type of '" + VD->getNameAsString() + "' cannot be named outside " + Fn + "()";
    if (!Names.insert(VD->getNameAsString()).second)
      return "two variables named '" + VD->getNameAsString() + "' are needed";
    if (VD->getType()->isIncompleteType() ||
        VD->getASTContext().getTypeSizeInChars(VD->getType()).getQuantity() > (1 << 16))
      return "'" + VD->getNameAsString() + "' is too large to copy for the prefetch thread";
  }
  if (AsClone) {
    for (const ParmVarDecl *Param : Units.function()->parameters())
      if (!nameableAtFileScope(Param->getASTContext(), Param->getType()))
        return "the type of parameter '" + Param->getNameAsString() + "' cannot be named";
    return "";
  }
  for (const VarDecl *VD : P.PrologueDeclared)
    if (!nameableAtFileScope(VD->getASTContext(), VD->getType()) || VD->getType()->isIncompleteType())
      return "the type of '" + VD->getNameAsString() + "' cannot be named outside " + Fn + "()";
  for (const FunctionDecl *FD : P.BlockFunctions)
    if (!nameableAtFileScope(FD->getASTContext(), FD->getType()))
      return "the type of function '" + FD->getNameAsString() + "', which " + Fn +
             "() declares in a block, cannot be named outside " + Fn + "()";
  return "";
}

// The functions main()'s PT calls that are declared only in main()'s blocks before
// main() ends: the PT's function precedes main(), so it declares them itself.
std::vector<const FunctionDecl *> PrefetchPlanner::blockFunctions() const {
  const FunctionDecl *Fn = Units.function();
  const SourceManager &SM = Fn->getASTContext().getSourceManager();
  std::vector<const FunctionDecl *> Out;
  const auto &Top = Units.topLevel();
  for (int I = Start; I < static_cast<int>(Top.size()); ++I) {
    if (!Top[I]->InSlice)
      continue;
    forEachStmtIn(Top[I]->S, [&](const Stmt *S) {
      const auto *DRE = dyn_cast<DeclRefExpr>(S);
      const auto *FD = DRE ? dyn_cast<FunctionDecl>(DRE->getDecl()) : nullptr;
      if (!FD || FD->isImplicit() || !FD->getLexicalDeclContext()->isFunctionOrMethod() ||
          llvm::is_contained(Out, FD))
        return;
      for (const FunctionDecl *R : FD->redecls())
        if (!R->getLexicalDeclContext()->isFunctionOrMethod() &&
            SM.isBeforeInTranslationUnit(R->getLocation(), Fn->getBeginLoc()))
          return; // declared at file scope before main()
      Out.push_back(FD);
    });
  }
  std::sort(Out.begin(), Out.end(), [&](const FunctionDecl *A, const FunctionDecl *B) {
    return SM.isBeforeInTranslationUnit(A->getLocation(), B->getLocation());
  });
  return Out;
}

// What the PT makes of U (see UnitPlan::Form), with what goes with it.
UnitPlan PrefetchPlanner::unitPlan(const Unit &U) const {
  UnitPlan P;
  if (U.TopIndex < Start)
    return P;
  if (U.UnitKind == Unit::Loop && U.InSlice)
    P.LoopPoll = speculates(U) ? UnitPlan::Speculate : UnitPlan::Poll;
  P.Guarded = U.InSlice && !U.Bad;
  if (!U.InSlice) {
    unsigned N = countTransfers(U);
    P.Form = isCountBlock(U) && N ? UnitPlan::Counted : UnitPlan::Dropped;
    if (P.Form == UnitPlan::Counted)
      P.Count = N;
    return P;
  }
  if (std::vector<const HandoffPoint *> Handoffs = handoffsAt(U); !Handoffs.empty()) {
    P.Form = UnitPlan::TakesHandles;
    for (const HandoffPoint *H : Handoffs)
      P.Takes.push_back({H->Var, H->Interface, H->Slot, Facts && Facts->isGlobalHandle(H->Var)});
    return P;
  }
  // The transfers of U the PT does not pre-execute: counted.
  auto CountOthers = [&] {
    for (const IoCallSite &Site : U.IoCalls)
      if (IoCallTable::isTransfer(*Site.Info)) {
        const ReadDecision *D = decisionFor(Site.Call);
        if (!D || !D->Prefetched) {
          ++P.Count;
          P.CountNames += (P.CountNames.empty() ? "" : ", ") + std::string(Site.Info->Name);
        }
      }
  };
  switch (U.UnitKind) {
  case Unit::Block:
    P.Form = UnitPlan::Block;
    return P;
  case Unit::If:
  case Unit::Switch:
  case Unit::Loop:
    P.Form = UnitPlan::Header;
    if (const Speculation *Sp = speculationFor(U)) {
      P.Speculated.assign(Sp->Conjuncts.begin(), Sp->Conjuncts.end());
      P.SpeculatedWhy = Sp->Why;
    }
    return P;
  case Unit::Jump: {
    const auto *RS = dyn_cast<ReturnStmt>(U.S);
    if (U.StopsPt)
      P.Form = UnitPlan::Exit;
    else if (!RS || !RS->getRetValue())
      P.Form = UnitPlan::Jump;
    else {
      // The PT returns nothing; what a returned expression pre-executes runs first.
      P.Form = UnitPlan::Return;
      P.KeepsCalls = hasActiveCall(U);
      if (P.KeepsCalls)
        P.CloneCalls = activeCloneCalls(U);
      CountOthers();
    }
    return P;
  }
  case Unit::Simple:
    break;
  }
  CountOthers();
  // A declaration the PT does not run as written still declares what it names.
  if (declaresOnly(U))
    for (const Decl *Dc : cast<DeclStmt>(U.S)->decls())
      if (const auto *VD = dyn_cast<VarDecl>(Dc); VD && named(VD))
        P.Declared.push_back(VD);
  bool Active = hasActiveCall(U);
  if (!Active && P.Count) {
    P.Form = UnitPlan::CountOnly;
    return P;
  }
  P.CloneCalls = activeCloneCalls(U);
  if (U.Bad) {
    P.Form = UnitPlan::KeptCalls;
    return P;
  }
  P.Form = UnitPlan::AsWritten;
  const auto *DS = dyn_cast<DeclStmt>(U.S);
  if (!DS)
    return P;
  for (const Decl *D : DS->decls())
    if (const auto *VD = dyn_cast<VarDecl>(D)) {
      // The program's cleanup function is not the PT's to run (it would free a block of
      // ppios_pt_malloc's with libc's free, say): the PT's copy of the declaration has
      // none (the runtime frees the PT's blocks when it ends). The verifier refuses the
      // ones that cannot be removed (from a macro).
      if (VD->hasAttr<CleanupAttr>() && PlanVerifier::strippableCleanup(VD))
        P.StripCleanup.push_back(VD);
      // A result the PT keeps only because the statement holds a read, or a handle none
      // of whose reads is prefetched (their calls vanish from the PT): unused.
      bool ReadThrough = llvm::any_of(Decisions, [&](const ReadDecision &R) {
        return R.Prefetched && R.Site.Handle == VD;
      });
      if (!usedElsewhere(VD, U) || hasPrefetchedRead(U) || (isHandle(VD) && !ReadThrough))
        P.Unused.push_back(VD);
    }
  return P;
}

// A variable-length array's block is declared where the array is, through a typedef of
// its type printed from the AST (HeapLocal::Sized). So its sizes must print as the PT's
// text spells them: free of side effects (the typedef evaluates them once, as the
// program's declaration does), naming only variables the PT declares under their own
// names (no global handle, which the PT names by its shadow, and no other heap block), and
// only types of file scope.
static std::string unprintableSizes(const VarDecl *VD, const TranslationUnitFacts *Facts) {
  ASTContext &Ctx = VD->getASTContext();
  QualType T = VD->getType();
  while (const ArrayType *AT = Ctx.getAsArrayType(T)) {
    if (const auto *VAT = dyn_cast<VariableArrayType>(AT)) {
      const Expr *Size = VAT->getSizeExpr();
      if (!Size || Size->HasSideEffects(Ctx))
        return "its size has a side effect";
      std::string Why;
      forEachStmtIn(Size, [&](const Stmt *S) {
        if (!Why.empty())
          return;
        QualType Named;
        if (const auto *Cast = dyn_cast<ExplicitCastExpr>(S))
          Named = Cast->getTypeAsWritten();
        else if (const auto *Trait = dyn_cast<UnaryExprOrTypeTraitExpr>(S); Trait && Trait->isArgumentType())
          Named = Trait->getArgumentType();
        if (!Named.isNull() && !nameableAsWritten(Named))
          Why = "its size names a type of the function's own";
        const auto *DRE = dyn_cast<DeclRefExpr>(S);
        const auto *Var = DRE ? dyn_cast<VarDecl>(DRE->getDecl()) : nullptr;
        if (Var && ((Facts && Facts->isGlobalHandle(Var)) ||
                    PlanVerifier::stackBytes(Var) > PlanVerifier::StackLimit))
          Why = "its size names " + quoted(Var) + ", which the prefetch thread names otherwise";
      });
      if (!Why.empty())
        return Why;
    }
    T = AT->getElementType();
  }
  if (!nameableAsWritten(T))
    return "its element type cannot be named outside the function";
  return "";
}

std::string PrefetchPlanner::heapUnplaceable(const VarDecl *VD) const {
  if (VD->getType()->isVariableArrayType()) {
    if (std::string Why = unprintableSizes(VD, Facts); !Why.empty())
      return Why;
  } else if (!nameableAtFileScope(VD->getASTContext(), VD->getType()))
    return "its type cannot be named outside " + Units.function()->getNameAsString() + "()";
  const SourceManager &SM = VD->getASTContext().getSourceManager();
  std::string Why;
  forEachStmtIn(Units.function()->getBody(), [&](const Stmt *S) {
    if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
      if (DRE->getDecl() == VD && Why.empty() && !spelledInMainFile(SM, DRE->getLocation()))
        Why = "a macro names it at line " +
              std::to_string(SM.getPresumedLineNumber(SM.getExpansionLoc(DRE->getLocation()))) +
              ", so the prefetch thread cannot keep it in its heap";
  });
  return Why;
}

// Locals bigger than the PT's stack allows live in heap blocks of its own (HeapLocal):
// the ones it declares as its own (zeroed), and a declaration without initializers of
// one, which it then declares as its own too (Declares) rather than as written. A big
// local the PT cannot place is undeclarable (undeclaredName); one with an initializer
// stays as written, the verifier refuses it, and it is declared as the PT's own after.
void PrefetchPlanner::placeBigLocals(ThreadPlan &P) const {
  auto Big = [](const VarDecl *VD) { return PlanVerifier::stackBytes(VD) > PlanVerifier::StackLimit; };
  for (auto &Entry : P.Units) {
    UnitPlan &UP = Entry.second;
    const auto *DS = UP.Form == UnitPlan::AsWritten ? dyn_cast<DeclStmt>(Entry.first->S) : nullptr;
    if (!DS)
      continue;
    bool AnyBig = false, Placeable = true;
    std::vector<const VarDecl *> Vars;
    for (const Decl *D : DS->decls()) {
      const auto *VD = dyn_cast<VarDecl>(D);
      if (!VD || VD->hasInit()) {
        Placeable = false;
        break;
      }
      Vars.push_back(VD);
      if (Big(VD)) {
        AnyBig = true;
        Placeable &= heapUnplaceable(VD).empty();
      }
    }
    if (!AnyBig || !Placeable)
      continue;
    UP.Form = UnitPlan::Declares;
    UP.Declared = Vars;
    UP.StripCleanup.clear();
    UP.Unused.clear();
  }
  std::vector<const VarDecl *> Heap;
  auto Consider = [&](const VarDecl *VD) {
    if (Big(VD) && heapUnplaceable(VD).empty() && !llvm::is_contained(Heap, VD))
      Heap.push_back(VD);
  };
  for (const VarDecl *VD : P.PrologueDeclared)
    Consider(VD);
  for (const auto &Entry : P.Units) {
    for (const VarDecl *VD : Entry.second.Declared)
      Consider(VD);
    if (Entry.second.Form == UnitPlan::TakesHandles)
      if (const auto *DS = dyn_cast<DeclStmt>(Entry.first->S); DS && !DS->isSingleDecl())
        for (const Decl *D : DS->decls())
          if (const auto *VD = dyn_cast<VarDecl>(D))
            Consider(VD);
  }
  std::sort(Heap.begin(), Heap.end(),
            [](const VarDecl *A, const VarDecl *B) { return A->getLocation() < B->getLocation(); });
  for (const VarDecl *VD : Heap)
    P.HeapLocals.push_back({VD, "ppios_pt_h" + std::to_string(P.HeapLocals.size()) + "_" + VD->getNameAsString(),
                            PlanVerifier::stackBytes(VD) == PlanVerifier::Unbounded});
}

void PrefetchPlanner::buildThreadPlan() {
  ThreadPlan P;
  P.Clone = AsClone;
  P.Start = Start;
  P.Captured = Captured;
  P.Reopened = Reopened;
  if (Facts)
    for (const auto &G : Facts->GlobalHandles)
      P.GlobalHandles.insert(G.first);
  for (const ReadDecision &D : Decisions) {
    auto [It, New] = P.Calls.try_emplace(D.Site.Call);
    if (!New)
      continue;
    IoCallPlan &C = It->second;
    C.Prefetched = D.Prefetched;
    C.Copy = D.Copy;
    C.Flags = D.Flags;
    C.Guards = D.Guards;
    if (!D.Prefetched)
      continue;
    const IoCallInfo &Info = *D.Site.Info;
    const CallExpr *Call = D.Site.Call;
    // A formatted read's destinations: the PT's own local scalars that the rest of its
    // slice uses stay; for any other (the program's memory, or a value nothing needs) the
    // PT's call suppresses that conversion.
    if (Info.Formatted)
      for (unsigned I = Info.HandleArg + 2; I < Call->getNumArgs(); ++I)
        if (const VarDecl *Own = ptOwnScalar(Call->getArg(I)); !Own || !usedElsewhere(Own, *D.Owner))
          C.NullDestinations.push_back(I);
    // An MPI read's status: the PT's own copy gets the predicted outcome; the MT's
    // memory is never written.
    C.IgnoreStatus = Info.StatusArg >= 0 && Info.StatusArg < static_cast<int>(Call->getNumArgs()) &&
                     !ptOwnStatus(Call->getArg(Info.StatusArg));
  }
  for (const auto &Owned : Units.all()) {
    const Unit &U = *Owned;
    P.Units[&U] = unitPlan(U);
    if (U.TopIndex >= Start)
      for (const IoCallSite &Site : U.IoCalls)
        if (pathCaptured(Site))
          P.Calls[Site.Call].CapturePath = true;
  }
  if (!AsClone) {
    // Locals declared before the start whose values the PT does not need but which its
    // statements name (C89 style: `int i, fd;` at the top, set after the start).
    const auto &Top = Units.topLevel();
    std::set<const VarDecl *> Named;
    for (int I = Start; I < static_cast<int>(Top.size()); ++I)
      if (Top[I]->InSlice)
        localsNamedIn(Top[I]->S, AsClone, Named);
    std::set<const VarDecl *> CapturedSet(Captured.begin(), Captured.end());
    for (const VarDecl *VD : Named) {
      const Unit *D = Units.declaringUnit(VD);
      if (((D && D->TopIndex < Start) || isa<ParmVarDecl>(VD)) && !CapturedSet.count(VD))
        P.PrologueDeclared.push_back(VD);
    }
    std::sort(P.PrologueDeclared.begin(), P.PrologueDeclared.end(),
              [](const VarDecl *A, const VarDecl *B) { return A->getLocation() < B->getLocation(); });
    P.BlockFunctions = blockFunctions();
  }
  placeBigLocals(P);
  planBounds(P);
  P.Unbuildable = unbuildable(P);
  Finished = std::move(P);
}

} // namespace ppios
