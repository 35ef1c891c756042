#include "StatementUnits.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/AST/Stmt.h"
#include "clang/Basic/SourceManager.h"

using namespace clang;

namespace ppios {

bool Unit::isWithin(const Unit *Ancestor) const {
  for (const Unit *U = this; U; U = U->Parent)
    if (U == Ancestor)
      return true;
  return false;
}

const Unit *Unit::jumpTarget() const {
  bool Break = isa<BreakStmt>(S);
  if (!Break && !isa<ContinueStmt>(S))
    return nullptr;
  for (const Unit *P = Parent; P; P = P->Parent)
    if (P->UnitKind == Loop || (Break && P->UnitKind == Switch))
      return P;
  return nullptr;
}

namespace {

// The handle of an I/O call: a variable (`fd`, `&fh`), or a field of a struct variable or
// of a struct a pointer variable points to (`g.fd`, `r->fp`, `&r->fh`).
IoCallSite handleSite(const CallExpr *Call, const IoCallInfo &Info) {
  IoCallSite Site{Call, &Info, nullptr};
  if (Info.HandleArg < 0 || Info.HandleArg >= static_cast<int>(Call->getNumArgs()))
    return Site;
  const Expr *Arg = Call->getArg(Info.HandleArg)->IgnoreParenImpCasts();
  if (Info.HandleIsOut) {
    const auto *UO = dyn_cast<UnaryOperator>(Arg);
    if (!UO || UO->getOpcode() != UO_AddrOf)
      return Site;
    Arg = UO->getSubExpr()->IgnoreParenImpCasts();
  }
  if (const auto *ME = dyn_cast<MemberExpr>(Arg)) {
    const auto *Field = dyn_cast<FieldDecl>(ME->getMemberDecl());
    const auto *Base = dyn_cast<DeclRefExpr>(ME->getBase()->IgnoreParenImpCasts());
    if (!Field || !Base)
      return Site;
    Site.HandleField = Field;
    Arg = Base;
  }
  if (const auto *DRE = dyn_cast<DeclRefExpr>(Arg))
    Site.Handle = dyn_cast<VarDecl>(DRE->getDecl());
  if (!Site.Handle)
    Site.HandleField = nullptr;
  return Site;
}

// Globals of other files and headers (MPI_BYTE is &ompi_mpi_byte) are not the program's
// state: the PT never copies them from a call's results.
bool isForeignGlobal(const VarDecl *VD) {
  const SourceManager &SM = VD->getASTContext().getSourceManager();
  return VD->hasGlobalStorage() &&
         !SM.isWrittenInMainFile(SM.getExpansionLoc(VD->getLocation()));
}

// Collects uses, definitions, calls and side effects of one statement or expression.
class UnitScanner : public RecursiveASTVisitor<UnitScanner> {
public:
  UnitScanner(Unit &U, SideEffectOracle &Oracle) : U(U), Oracle(Oracle) {}

  bool TraverseUnaryExprOrTypeTraitExpr(UnaryExprOrTypeTraitExpr *E) {
    // sizeof/alignof do not evaluate their operand, but its variables must be declared.
    if (!E->isArgumentType()) {
      llvm::SmallVector<const Stmt *, 8> Work{E->getArgumentExpr()};
      while (!Work.empty()) {
        const Stmt *S = Work.pop_back_val();
        if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
          if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
            U.TypeUses.insert(VD);
        for (const Stmt *Child : S->children())
          if (Child)
            Work.push_back(Child);
      }
    }
    return true;
  }

  bool TraverseCallExpr(CallExpr *Call) {
    const IoCallInfo *Info = IoCallTable::lookup(Call);
    if (!Info) {
      noteCall(Call);
      return RecursiveASTVisitor::TraverseCallExpr(Call);
    }
    const IoCallSite Site = handleSite(Call, *Info);
    U.IoCalls.push_back(Site);
    if (Info->Kind == IoKind::Write) {
      // The PT only counts a write; its arguments are never evaluated there.
      return true;
    }
    for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
      const Expr *Arg = Call->getArg(I);
      // What the call stores into (data, status) depends on the file; the arguments the PT
      // drops (communicator, info) are only not evaluated.
      bool Stored = IoCallTable::isDataDestination(*Info, I) || static_cast<int>(I) == Info->StatusArg;
      // A local status the PT has a copy of holds the predicted outcome of the prefetch
      // (its count for MPI_Get_count), so it is defined there, not data.
      if (static_cast<int>(I) == Info->StatusArg && Info->Kind == IoKind::Read) {
        if (const VarDecl *VD = ptOwnStatus(Arg)) {
          U.Defs.insert(VD);
          continue;
        }
      }
      // Likewise a formatted read's local scalar destination: the PT's own scan assigns it.
      if (Info->Formatted && Stored) {
        if (const VarDecl *VD = ptOwnScalar(Arg)) {
          U.Defs.insert(VD);
          continue;
        }
      }
      if (Stored || static_cast<int>(I) == Info->DropArgs[0] ||
          static_cast<int>(I) == Info->DropArgs[1]) {
        if (const VarDecl *VD = Stored ? baseVariable(Arg) : nullptr)
          U.BufferVars.insert(VD);
        continue;
      }
      if (static_cast<int>(I) == Info->OutArg) {
        if (const VarDecl *VD = addressedVariable(Arg))
          U.Defs.insert(VD);
        else
          TraverseStmt(const_cast<Expr *>(Arg));
        continue;
      }
      if (static_cast<int>(I) == Info->HandleArg && Info->HandleIsOut) {
        if (Site.HandleField) {
          // `&g.fh`, `&r->fh`: the open stores into the struct.
          if (const auto *UO = dyn_cast<UnaryOperator>(Arg->IgnoreParenImpCasts()))
            noteStore(UO->getSubExpr());
        } else if (Site.Handle) {
          U.Defs.insert(Site.Handle);
          if (Info->Kind == IoKind::Close)
            U.Uses.insert(Site.Handle);
        }
        continue;
      }
      TraverseStmt(const_cast<Expr *>(Arg));
    }
    return true;
  }

  bool VisitDeclRefExpr(DeclRefExpr *DRE) {
    if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
      U.Uses.insert(VD);
    return true;
  }
  bool VisitVarDecl(VarDecl *VD) {
    U.Defs.insert(VD);
    if (VD->getInit() && isAllocation(VD->getInit()))
      U.Allocations.insert(VD);
    if (VD->isStaticLocal())
      unsafe("uses static local variable '" + VD->getNameAsString() + "'");
    return true;
  }
  bool VisitBinaryOperator(BinaryOperator *BO) {
    if (BO->isAssignmentOp()) {
      noteStore(BO->getLHS());
      StoreTarget T = classifyStore(BO->getLHS());
      if (BO->getOpcode() == BO_Assign && T.Target == StoreTarget::Variable &&
          isAllocation(BO->getRHS()))
        U.Allocations.insert(T.Var);
    }
    return true;
  }
  bool VisitUnaryOperator(UnaryOperator *UO) {
    if (UO->isIncrementDecrementOp())
      noteStore(UO->getSubExpr());
    if (UO->getOpcode() == UO_Deref)
      noteDeref(UO->getSubExpr());
    return true;
  }
  bool VisitArraySubscriptExpr(ArraySubscriptExpr *ASE) {
    noteDeref(ASE->getBase());
    return true;
  }
  bool VisitMemberExpr(MemberExpr *ME) {
    if (ME->isArrow())
      noteDeref(ME->getBase());
    return true;
  }

private:
  static const VarDecl *baseVariable(const Expr *E) {
    E = E->IgnoreParenCasts();
    while (true) {
      if (const auto *UO = dyn_cast<UnaryOperator>(E)) {
        E = UO->getSubExpr()->IgnoreParenCasts();
      } else if (const auto *BO = dyn_cast<BinaryOperator>(E)) {
        E = BO->getLHS()->IgnoreParenCasts(); // buf + offset
      } else if (const auto *ASE = dyn_cast<ArraySubscriptExpr>(E)) {
        E = ASE->getBase()->IgnoreParenCasts();
      } else if (const auto *ME = dyn_cast<MemberExpr>(E)) {
        E = ME->getBase()->IgnoreParenCasts();
      } else {
        break;
      }
    }
    if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
      return dyn_cast<VarDecl>(DRE->getDecl());
    return nullptr;
  }
  void unsafe(const std::string &Why) {
    if (!U.Unsafe) {
      U.Unsafe = true;
      U.UnsafeWhy = Why;
    }
  }
  void noteDeref(const Expr *Pointer) {
    if (const VarDecl *VD = baseVariable(Pointer))
      if (VD->getType()->isPointerType())
        U.DereferencedPointers.insert(VD);
  }
  void noteStore(const Expr *LValue) {
    StoreTarget T = classifyStore(LValue);
    if (T.Target == StoreTarget::Variable) {
      U.Defs.insert(T.Var);
    } else if (const VarDecl *VD = T.Pointer ? baseVariable(T.Pointer) : nullptr) {
      // Fine in the PT only if the pointer holds memory of the PT's own (the slicer decides).
      if (VD->getType()->isPointerType()) {
        U.PointerStores.insert(VD);
        return;
      }
      unsafe("stores through pointer '" + VD->getNameAsString() + "'");
    } else {
      unsafe("stores through a pointer of unknown origin");
    }
  }
  static bool isAllocation(const Expr *E) {
    const auto *Call = dyn_cast<CallExpr>(E->IgnoreParenCasts());
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    return Callee && Callee->getIdentifier() &&
           (Callee->getName() == "malloc" || Callee->getName() == "calloc");
  }
  void noteCall(const CallExpr *Call) {
    U.Calls.push_back(Call);
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (Callee && Callee->getIdentifier() &&
        (Callee->getName() == "MPI_Init" || Callee->getName() == "MPI_Init_thread"))
      U.ContainsMpiInit = true;
    CalleeEffect E = Oracle.classify(Callee);
    if (E.Effect == CalleeEffect::Unsafe) {
      unsafe(E.Why);
      // Whatever it may store to through &v arguments is now defined by this statement,
      // unless the parameter is a pointer to const.
      for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
        const VarDecl *VD = addressedVariable(Call->getArg(I));
        // Objects of system headers (MPI_BYTE is &ompi_mpi_byte) are not the program's.
        if (!VD || isForeignGlobal(VD))
          continue;
        if (Callee && I < Callee->getNumParams()) {
          QualType T = Callee->getParamDecl(I)->getType();
          if (T->isPointerType() && T->getPointeeType().isConstQualified())
            continue;
        }
        if (E.StoresKnown && I < 32 && !(E.StoredArgs & (1u << I)))
          continue;
        U.Defs.insert(VD);
      }
      return;
    }
    for (unsigned I = 0; I < Call->getNumArgs() && I < 32; ++I) {
      if (!(E.StoredArgs & (1u << I)) || isNullPointer(Call->getArg(I)))
        continue;
      if (const VarDecl *VD = addressedVariable(Call->getArg(I)))
        U.Defs.insert(VD);
      else
        unsafe("passes a pointer of unknown origin to '" +
               (Callee ? Callee->getNameAsString() : std::string("?")) + "', which stores to it");
    }
  }

  Unit &U;
  SideEffectOracle &Oracle;
};

} // namespace

FunctionUnits::FunctionUnits(ASTContext &Ctx, const FunctionDecl *FD, SideEffectOracle &Oracle)
    : Ctx(Ctx), FD(FD), Oracle(Oracle) {
  const auto *Body = dyn_cast_or_null<CompoundStmt>(FD->getBody());
  if (!Body)
    return;
  int Index = 0;
  for (const Stmt *S : Body->body())
    Top.push_back(build(S, nullptr, Index++));
}

Unit *FunctionUnits::build(const Stmt *S, Unit *Parent, int TopIndex) {
  Units.push_back(std::make_unique<Unit>());
  Unit *U = Units.back().get();
  U->S = S;
  U->Parent = Parent;
  U->TopIndex = TopIndex;
  if (writtenAsOneMacro(S)) {
    // `CHECK(pread(...));`: the macro's own statements (an error message, an abort) are
    // not the PT's to run; one unit, so that it is emitted as its prefetches alone.
    U->UnitKind = Unit::Simple;
    analyze(*U, S);
  } else if (const auto *CS = dyn_cast<CompoundStmt>(S)) {
    U->UnitKind = Unit::Block;
    for (const Stmt *Child : CS->body()) {
      // A switch's labels are its structure: the statement they name is the unit.
      bool Labeled = false;
      for (; const auto *SC = dyn_cast<SwitchCase>(Child); Labeled = true)
        Child = SC->getSubStmt();
      U->Children.push_back(build(Child, U, TopIndex));
      U->Children.back()->Labeled = Labeled;
    }
  } else if (const auto *SS = dyn_cast<SwitchStmt>(S); SS && structuredSwitch(SS)) {
    U->UnitKind = Unit::Switch;
    for (const Stmt *Part : headerParts(S))
      analyze(*U, Part);
    U->Children.push_back(build(SS->getBody(), U, TopIndex));
  } else if (const auto *IS = dyn_cast<IfStmt>(S)) {
    U->UnitKind = Unit::If;
    for (const Stmt *Part : headerParts(S))
      analyze(*U, Part);
    U->Children.push_back(build(IS->getThen(), U, TopIndex));
    if (IS->getElse())
      U->Children.push_back(build(IS->getElse(), U, TopIndex));
  } else if (isa<ForStmt>(S) || isa<WhileStmt>(S) || isa<DoStmt>(S)) {
    U->UnitKind = Unit::Loop;
    for (const Stmt *Part : headerParts(S))
      analyze(*U, Part);
    const Stmt *Body = isa<ForStmt>(S)     ? cast<ForStmt>(S)->getBody()
                       : isa<WhileStmt>(S) ? cast<WhileStmt>(S)->getBody()
                                           : cast<DoStmt>(S)->getBody();
    U->Children.push_back(build(Body, U, TopIndex));
  } else if (programExitCall(S) || gotoToCleanup(S)) {
    // exit(3), abort(), MPI_Abort(...), `goto out;` to main()'s cleanup: the PT keeps the
    // guard around it and stops there (ppios_pt_exit), so that it never goes on where the
    // program would not.
    U->UnitKind = Unit::Jump;
    U->StopsPt = true;
  } else if (isa<ReturnStmt>(S) || isa<BreakStmt>(S) || isa<ContinueStmt>(S)) {
    // The PT returns nothing: a return's value is never evaluated there, unless it holds
    // I/O or a call with side effects (`return pread(...)`, `return helper(...)`), whose
    // calls the PT may pre-execute before returning.
    U->UnitKind = Unit::Jump;
    if (const auto *RS = dyn_cast<ReturnStmt>(S))
      if (RS->getRetValue()) {
        Unit Probe;
        analyze(Probe, RS->getRetValue());
        if (!Probe.IoCalls.empty() || Probe.Unsafe)
          analyze(*U, RS->getRetValue());
      }
  } else {
    // Expression and declaration statements; labels, goto and switches with labels below
    // their body's top level are analysed as one opaque statement (the slicer refuses
    // reads inside them).
    U->UnitKind = Unit::Simple;
    analyze(*U, S);
  }
  return U;
}

// A statement that a macro expands to, running its parts at most once: the usual
// `do { ... } while (0)` or an expression or if. Loops written by a macro are left to the
// slicer, which leaves the reads in them alone.
bool writtenAsOneMacro(const Stmt *S) {
  if (!S->getBeginLoc().isMacroID() || isa<CompoundStmt>(S))
    return false;
  llvm::SmallVector<const Stmt *, 16> Work{S};
  while (!Work.empty()) {
    const Stmt *St = Work.pop_back_val();
    if (!St)
      continue;
    if (isa<ForStmt>(St) || isa<WhileStmt>(St) || isa<SwitchStmt>(St) || isa<GotoStmt>(St))
      return false;
    if (const auto *DS = dyn_cast<DoStmt>(St)) {
      const auto *Zero = dyn_cast<IntegerLiteral>(DS->getCond()->IgnoreParenImpCasts());
      if (!Zero || Zero->getValue() != 0)
        return false;
    }
    for (const Stmt *Child : St->children())
      Work.push_back(Child);
  }
  return true;
}

bool structuredSwitch(const SwitchStmt *SS) {
  const auto *Body = dyn_cast<CompoundStmt>(SS->getBody());
  if (!Body)
    return false;
  llvm::SmallVector<const Stmt *, 16> Work;
  for (const Stmt *Child : Body->body()) {
    while (const auto *SC = dyn_cast<SwitchCase>(Child))
      Child = SC->getSubStmt();
    Work.push_back(Child);
  }
  while (!Work.empty()) {
    const Stmt *St = Work.pop_back_val();
    if (!St || isa<SwitchStmt>(St))
      continue; // an inner switch has labels of its own
    if (isa<SwitchCase>(St) || isa<LabelStmt>(St))
      return false;
    for (const Stmt *Child : St->children())
      Work.push_back(Child);
  }
  return true;
}

std::vector<const Stmt *> headerParts(const Stmt *S) {
  std::vector<const Stmt *> Parts;
  if (const auto *IS = dyn_cast<IfStmt>(S))
    Parts = {IS->getInit(), IS->getCond()};
  else if (const auto *SS = dyn_cast<SwitchStmt>(S))
    Parts = {SS->getInit(), SS->getCond()};
  else if (const auto *FS = dyn_cast<ForStmt>(S))
    Parts = {FS->getInit(), FS->getCond(), FS->getInc()};
  else if (const auto *WS = dyn_cast<WhileStmt>(S))
    Parts = {WS->getCond()};
  else if (const auto *DS = dyn_cast<DoStmt>(S))
    Parts = {DS->getCond()};
  llvm::erase_value(Parts, nullptr);
  return Parts;
}

const CallExpr *programExitCall(const Stmt *S) {
  const auto *E = dyn_cast_or_null<Expr>(S);
  const auto *Call = E ? dyn_cast<CallExpr>(E->IgnoreParenCasts()) : nullptr;
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || !Callee->getIdentifier())
    return nullptr;
  StringRef Name = Callee->getName();
  bool Exits = Callee->isNoReturn() || Name == "exit" || Name == "_exit" || Name == "_Exit" ||
               Name == "quick_exit" || Name == "abort" || Name == "MPI_Abort";
  return Exits ? Call : nullptr;
}

// `goto out;` in main() to a label after it from which main() reads nothing: the error
// and cleanup paths at its end (`die: free(buf); MPI_Finalize(); return 0;`). Nothing is
// left to prefetch there, so the PT ends. Any other goto stays an opaque statement.
bool FunctionUnits::gotoToCleanup(const Stmt *S) const {
  const auto *GS = dyn_cast<GotoStmt>(S);
  const LabelStmt *Label = GS ? GS->getLabel()->getStmt() : nullptr;
  const SourceManager &SM = Ctx.getSourceManager();
  if (!Label || !FD->isMain() || !SM.isBeforeInTranslationUnit(GS->getEndLoc(), Label->getBeginLoc()))
    return false;
  bool ReadsAfter = false;
  forEachStmtIn(FD->getBody(), [&](const Stmt *St) {
    const auto *Call = dyn_cast<CallExpr>(St);
    if (!Call || SM.isBeforeInTranslationUnit(Call->getBeginLoc(), Label->getBeginLoc()))
      return;
    const IoCallInfo *Info = IoCallTable::lookup(Call);
    const FunctionDecl *Callee = Call->getDirectCallee();
    // A read, or a call that may lead to one (a function of the program, a pointer).
    ReadsAfter |= (Info && Info->Kind == IoKind::Read) || (!Info && (!Callee || Callee->hasBody()));
  });
  return !ReadsAfter;
}

void FunctionUnits::analyze(Unit &U, const Stmt *Part) {
  UnitScanner Scanner(U, Oracle);
  Scanner.TraverseStmt(const_cast<Stmt *>(Part));
}

const Unit *FunctionUnits::declaringUnit(const VarDecl *VD) const {
  for (const auto &U : Units) {
    const DeclStmt *DS = nullptr;
    if (U->UnitKind == Unit::Simple)
      DS = dyn_cast<DeclStmt>(U->S);
    else if (const auto *FS = dyn_cast<ForStmt>(U->S))
      DS = dyn_cast_or_null<DeclStmt>(FS->getInit()); // `for (int i = 0; ...)`: the loop's
    if (DS)
      for (const Decl *D : DS->decls())
        if (D == VD)
          return U.get();
  }
  return nullptr;
}

} // namespace ppios
