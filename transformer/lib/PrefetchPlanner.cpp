// The planner's orchestration: the start point, the read decisions and the slice's
// backward closure over the analyses of PlannerHandles/Values/Clones/Captures.cpp (see
// PrefetchPlanner.h).
#include "PlanVerifier.h"
#include "PlannerSupport.h"
#include "SourceText.h"

#include "clang/Basic/SourceManager.h"

#include <algorithm>

using namespace clang;

namespace ppios {
using namespace slicing;

namespace {
// Whether `D` is declared by a declaration statement inside `S` (so a name `S` uses is
// its own, not one the thread must declare for it).
bool declaredInside(const Stmt *S, const Decl *D) {
  bool Inside = false;
  forEachStmtIn(S, [&](const Stmt *St) {
    if (const auto *DS = dyn_cast<DeclStmt>(St))
      for (const Decl *Dc : DS->decls())
        Inside |= Dc == D;
  });
  return Inside;
}
}  // namespace

const ReadDecision *PrefetchPlanner::decisionFor(const CallExpr *Call) const {
  for (const ReadDecision &D : Decisions)
    if (D.Site.Call == Call)
      return &D;
  return nullptr;
}

bool PrefetchPlanner::hasPrefetchedRead(const Unit &U) const {
  for (const IoCallSite &Site : U.IoCalls)
    if (const ReadDecision *D = decisionFor(Site.Call))
      if (D->Prefetched)
        return true;
  return false;
}

bool PrefetchPlanner::hasActiveCall(const Unit &U) const {
  if (hasPrefetchedRead(U))
    return true;
  for (const CloneCallDecision &C : CloneCalls)
    if (C.Owner == &U && C.Active)
      return true;
  return false;
}

// The variables the PT needs for the calls it keeps from a bad statement: the operands of
// its prefetched reads (a buffer only where the read copies into it) and of their arm
// guards, and the arguments of its active clone calls that the clone uses. Nothing else
// of the statement: a variable the PT declared and never used would warn, and break
// builds with -Werror.
void PrefetchPlanner::activeOperands(const Unit &U, VarSet &Out) const {
  for (const IoCallSite &Site : U.IoCalls) {
    const ReadDecision *D = decisionFor(Site.Call);
    if (!D || !D->Prefetched)
      continue;
    for (const ArmGuard &G : D->Guards)
      varsIn(G.Cond, Out);
    for (unsigned I = 0; I < Site.Call->getNumArgs(); ++I)
      if (!IoCallTable::isDataDestination(*Site.Info, I) || D->Copy)
        varsIn(Site.Call->getArg(I), Out);
  }
  for (const CloneCallDecision &C : CloneCalls) {
    if (C.Owner != &U || !C.Active)
      continue;
    const CloneSummary *S = summaryOf(C.Callee);
    for (const ArmGuard &G : C.Guards)
      varsIn(G.Cond, Out);
    for (unsigned I = 0; I < C.Call->getNumArgs() && I < S->Params.size(); ++I)
      if (S->Params[I] != ParamRole::Unused)
        varsIn(C.Call->getArg(I), Out);
  }
}

void PrefetchPlanner::include(Unit *U) {
  for (; U && !U->InSlice; U = U->Parent)
    U->InSlice = true;
}

// Whether the closure may take `U` in: it lies at or after RegionStart, and (UseBad) the PT
// can run it. A bad statement holding a prefetched read is emitted as the prefetch alone
// (clone calls likewise); a return always stays, so that the PT leaves where the MT does.
bool PrefetchPlanner::eligibleForSlice(const Unit &U, bool UseBad, int RegionStart) const {
  if (U.TopIndex < RegionStart)
    return false;
  if (!UseBad)
    return true;
  return ancestorsGood(U) &&
         (!U.Bad || hasActiveCall(U) || U.UnitKind == Unit::Jump || handoffAt(U));
}

// Backward closure from the I/O the PT performs or counts. With UseBad false it runs over
// the whole function to find out what the reads depend on at all (for the start point).
void PrefetchPlanner::closeSlice(bool UseBad, int RegionStart) {
  auto Eligible = [&](const Unit &U) { return eligibleForSlice(U, UseBad, RegionStart); };
  for (const auto &Owned : Units.all())
    Owned->InSlice = false;
  // Seeds: reads, writes (counted), and the opens, seeks and closes of read descriptors.
  llvm::DenseSet<std::pair<const VarDecl *, const FieldDecl *>> ReadHandles;
  for (const ReadDecision &D : Decisions)
    if ((!UseBad || D.Prefetched) && D.Site.Handle)
      ReadHandles.insert({D.Site.Handle, D.Site.HandleField});
  for (const auto &Owned : Units.all()) {
    Unit *U = Owned.get();
    if (!Eligible(*U))
      continue;
    for (const IoCallSite &Site : U->IoCalls) {
      bool Seed = IoCallTable::isTransfer(*Site.Info);
      if (!Seed && Site.Info->Kind != IoKind::Finalize && Site.Handle &&
          ReadHandles.count({Site.Handle, Site.HandleField}))
        Seed = true;
      if (Seed)
        include(U);
    }
  }
  for (const CloneCallDecision &C : CloneCalls)
    if ((!UseBad || C.Active) && Eligible(*C.Owner))
      include(C.Owner);
  closeOver(UseBad, RegionStart);
}

// The closure itself, from the units in the slice so far: the statements that set what
// they use, the jumps that decide whether they run, and the declarations of every
// variable their text names (which may be only a name: `sizeof b`, an open's `&fh`).
void PrefetchPlanner::closeOver(bool UseBad, int RegionStart) {
  auto Eligible = [&](const Unit &U) { return eligibleForSlice(U, UseBad, RegionStart); };
  bool Changed = true;
  while (Changed) {
    Changed = false;
    VarSet Relevant, Named;
    DeclSet Types;
    for (const auto &Owned : Units.all()) {
      const Unit *U = Owned.get();
      if (!U->InSlice || U->UnitKind == Unit::Block)
        continue;
      // A statement that is only a write is counted, not run: its operands do not matter.
      bool OnlyWrites = !U->IoCalls.empty();
      for (const IoCallSite &Site : U->IoCalls)
        OnlyWrites &= Site.Info->Kind == IoKind::Write;
      if (UseBad && handoffAt(*U))
        continue; // the PT takes the handle: it needs nothing of the statement
      // A clone call needs the global handles the clone reads through.
      for (const CloneCallDecision &C : CloneCalls)
        if (C.Owner == U && (!UseBad || C.Active))
          if (const CloneSummary *S = summaryOf(C.Callee))
            Relevant.insert(S->GlobalHandles.begin(), S->GlobalHandles.end());
      if (UseBad) {
        namedBy(*U, Named);
        typesNamedBy(*U, Types);
      }
      if (!OnlyWrites) {
        if (UseBad && U->Bad)
          activeOperands(*U, Relevant);
        else {
          const Speculation *Sp = speculationFor(*U);
          for (const VarDecl *VD : U->Uses)
            if (!Sp || !Sp->Vars.count(VD))
              Relevant.insert(VD);
          Relevant.insert(U->TypeUses.begin(), U->TypeUses.end());
        }
      }
      // A copy read needs its buffer declared and allocated in the PT; a prefetched MPI
      // read its own status declared.
      for (const IoCallSite &Site : U->IoCalls)
        if (const ReadDecision *D = decisionFor(Site.Call)) {
          if (D->Copy && bufferOf(Site))
            Relevant.insert(bufferOf(Site));
          if (D->Prefetched && Site.Info->StatusArg >= 0)
            if (const VarDecl *Status = ptOwnStatus(Site.Call->getArg(Site.Info->StatusArg)))
              Relevant.insert(Status);
          if (D->Prefetched && Site.Info->Formatted)
            for (unsigned I = Site.Info->HandleArg + 2; I < Site.Call->getNumArgs(); ++I)
              if (const VarDecl *Scalar = ptOwnScalar(Site.Call->getArg(I)))
                Relevant.insert(Scalar);
        }
    }
    for (const auto &Owned : Units.all()) {
      Unit *U = Owned.get();
      if (U->InSlice || U->TopIndex < RegionStart)
        continue;
      // A declaration of a name the slice's text holds: kept, as a declaration of the PT's
      // own if the PT cannot run it (declaresOnly).
      if (UseBad && U->UnitKind == Unit::Simple && isa<DeclStmt>(U->S) && ancestorsGood(*U)) {
        bool Declares = false;
        for (const Decl *D : cast<DeclStmt>(U->S)->decls())
          if (const auto *VD = dyn_cast<VarDecl>(D))
            Declares |= Named.count(VD) > 0;
          else
            Declares |= Types.count(D) > 0;
        if (Declares) {
          include(U);
          Changed = true;
          continue;
        }
      }
      if (!Eligible(*U))
        continue;
      bool Needed = false;
      for (const VarDecl *VD : U->Defs)
        Needed |= Relevant.count(VD) > 0;
      for (const VarDecl *VD : U->PointerStores)
        Needed |= Relevant.count(VD) > 0;
      if (U->UnitKind == Unit::Jump) {
        // return always decides whether later I/O happens; break/continue when the loop
        // or switch they leave is part of the PT (a switch's breaks keep its arms apart).
        if (isa<ReturnStmt>(U->S) || U->StopsPt) {
          Needed = true;
        } else if (const Unit *Target = U->jumpTarget()) {
          Needed |= Target->InSlice;
        }
      }
      if (Needed) {
        include(U);
        Changed = true;
      }
    }
  }
}

int PrefetchPlanner::chooseStart(int FirstRead) {
  int AfterInit = 0;
  for (const Unit *U : Units.topLevel()) {
    bool Init = false;
    for (const auto &Owned : Units.all())
      if (Owned->TopIndex == U->TopIndex && Owned->ContainsMpiInit)
        Init = true;
    if (Init && U->TopIndex < FirstRead)
      AfterInit = U->TopIndex + 1;
  }
  closeSlice(/*UseBad=*/false, 0);
  int Start = AfterInit;
  // A file the MT creates or writes before its first read is opened by the PT only after
  // the MT opened it (the PT never creates files).
  for (const ReadDecision &D : Decisions)
    if (D.Site.Handle && WritableHandles.count(D.Site.Handle))
      for (const auto &Owned : Units.all())
        for (const IoCallSite &Site : Owned->IoCalls)
          if (Site.Info->Kind == IoKind::Open && Owned->TopIndex < FirstRead &&
              (Site.Handle == D.Site.Handle || Owned->Defs.count(D.Site.Handle)) &&
              Owned->TopIndex + 1 > Start)
            Start = Owned->TopIndex + 1;
  for (const auto &Owned : Units.all()) {
    const Unit *U = Owned.get();
    if (U->InSlice && U->Unsafe && U->TopIndex < FirstRead && U->TopIndex + 1 > Start)
      Start = U->TopIndex + 1;
  }
  return Start;
}

void PrefetchPlanner::decideReads() {
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  for (ReadDecision &D : Decisions) {
    const Unit &U = *D.Owner;
    const VarDecl *H = D.Site.Handle;
    D.Prefetched = false;
    if (!spelledInFile(D.Site.Call)) {
      D.Reason = "the call is inside a macro definition";
      continue;
    }
    if (U.TopIndex < Start) {
      D.Reason = "it runs before the prefetch thread can start (line " +
                 std::to_string(SM.getPresumedLineNumber(
                     Units.topLevel()[Start - 1]->S->getEndLoc())) +
                 " computes values the reads need)";
      continue;
    }
    std::string Why;
    if (D.Site.HandleField) {
      Why = fieldHandleProblem(D.Site, &U);
    } else if (!H || !HandleInterface.count(H)) {
      Why = "its descriptor is not a variable the prefetch thread can have";
      if (H && Facts && H->hasGlobalStorage()) {
        auto P = Facts->GlobalHandleProblems.find(H->getCanonicalDecl());
        Why = "its descriptor is global " + quoted(H) + ", which the prefetch thread cannot "
              "have a copy of: " +
              (P != Facts->GlobalHandleProblems.end() ? P->second
                                                      : std::string("the program never opens it"));
      }
    } else if (UnsafeHandles.count(H)) {
      Why = UnsafeHandles.find(H)->second;
    }
    for (const Unit *P = U.Parent; P && Why.empty(); P = P->Parent)
      if (P->Bad) {
        Why = "it runs under a condition that " + P->BadWhy;
        D.TaintSource = P->TaintSource;
      }
    if (Why.empty() && U.Bad && U.isControl()) {
      Why = "its loop or condition " + U.BadWhy;
      D.TaintSource = U.TaintSource;
    }
    if (Why.empty()) {
      // The call's own operands (not the buffer) must be computable.
      for (unsigned I = 0; I < D.Site.Call->getNumArgs() && Why.empty(); ++I) {
        int Index = static_cast<int>(I);
        if (IoCallTable::isDataDestination(*D.Site.Info, I) || Index == D.Site.Info->StatusArg)
          continue;
        llvm::SmallVector<const Stmt *, 8> Work{D.Site.Call->getArg(I)};
        while (!Work.empty() && Why.empty()) {
          const Stmt *E = Work.pop_back_val();
          if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
            if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
              const std::string *Bad = badReason(VD, &U);
              if (Bad && !HandleInterface.count(VD) && !(VD == H && D.Site.HandleField)) {
                Why = "its " + std::string(Index == D.Site.Info->HandleArg ? "descriptor"
                                                                            : "size or offset") +
                      " depends on " + quoted(VD) + ", which " + *Bad;
                auto T = TaintOf.find(VD);
                if (T != TaintOf.end())
                  D.TaintSource = T->second;
              }
              if (BufferVars.count(VD) && !CopyBuffers.count(VD) &&
                  Index != D.Site.Info->HandleArg) {
                Why = "its size or offset depends on " + dataReadInto(VD);
                D.TaintSource = VD;
              }
            }
          if (const auto *Call = dyn_cast<CallExpr>(E)) {
            std::string Problem = calleeGlobalProblem(Call);
            if (!Problem.empty())
              Why = "its " + std::string(Index == D.Site.Info->HandleArg ? "descriptor"
                                                                          : "size or offset") +
                    " " + Problem;
          }
          if (isa<UnaryExprOrTypeTraitExpr>(E))
            continue;
          for (const Stmt *Child : E->children())
            if (Child)
              Work.push_back(Child);
        }
      }
    }
    // Every name the PT's call holds must be declared there.
    for (unsigned I = 0; I < D.Site.Call->getNumArgs() && Why.empty(); ++I) {
      int Index = static_cast<int>(I);
      if (Index == D.Site.Info->DropArgs[0] || Index == D.Site.Info->DropArgs[1] ||
          (Index == D.Site.Info->BufferArg && !CopyBuffers.count(bufferOf(D.Site))))
        continue;
      const Decl *Which = nullptr;
      if (const std::string *Problem = undeclarable(D.Site.Call->getArg(I), &Which))
        Why = "it names " + describe(Which) + ", which " + *Problem;
    }
    // From a statement the PT cannot run it keeps only the prefetches: a read from the
    // handle's current position is then right only if nothing else in the statement moves
    // that position (`switch (k) { case 0: lseek(fd, ...); return read(fd, ...); }`).
    if (Why.empty() && U.Bad && belowSwitch(U.S, D.Site.Call))
      Why = "it is in a switch with labels inside inner statements, which the prefetch thread "
            "does not follow";
    if (Why.empty() && U.Bad && D.Site.Info->UsesPosition)
      for (const IoCallSite &Other : U.IoCalls)
        if (Other.Call != D.Site.Call && Other.Handle == H &&
            Other.HandleField == D.Site.HandleField && Other.Info->Kind != IoKind::Read &&
            Other.Info->Kind != IoKind::Query) {
          Why = "its file position is set by '" + std::string(Other.Info->Name) +
                "' in the same statement, which the prefetch thread cannot run (" + U.BadWhy + ")";
          break;
        }
    // The verifier refused what the PT would evaluate of the call (PlanVerifier.h).
    if (Why.empty())
      if (auto It = RefusedCalls.find(D.Site.Call); It != RefusedCalls.end())
        Why = It->second;
    if (!Why.empty()) {
      D.Reason = Why;
      continue;
    }
    D.Prefetched = true;
    D.Guards = armGuards(D.Site.Call, U);
    D.Copy = bufferOf(D.Site) && CopyBuffers.count(bufferOf(D.Site));
    if (D.Site.HandleField ? WrittenFields.count(D.Site.HandleField) > 0
                           : WrittenHandles.count(H) || WritableHandles.count(H))
      D.Flags |= PfAfterWrite;
    // The PT computes with the bytes of a copy read: they must not predate a
    // synchronization the MT passes before this read (another rank may have written them
    // before a barrier), so the PT waits until the MT is at the read.
    if (D.Copy && synchronizesAfterStart())
      D.Flags |= PfAfterSync;
  }
  // A read from its handle's position is right only if the PT moved that position exactly
  // as the program did. A read left alone moves it too, so this runs to a fixed point.
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (ReadDecision &D : Decisions) {
      if (!D.Prefetched || !D.Site.Info->UsesPosition)
        continue;
      std::string Why = positionMovedBehind(D);
      if (Why.empty())
        continue;
      D.Prefetched = false;
      D.Reason = Why;
      D.Guards.clear();
      D.Copy = false;
      D.Flags = 0;
      Changed = true;
    }
  }
}

std::string PrefetchPlanner::positionMovedBehind(const ReadDecision &R) const {
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  auto At = [&](const CallExpr *Call) {
    return "' at line " + std::to_string(SM.getPresumedLineNumber(Call->getBeginLoc()));
  };
  const VarDecl *H = R.Site.Handle;
  if (!H)
    return "";
  for (const auto &Owned : Units.all()) {
    const Unit &M = *Owned;
    if (M.TopIndex < Start || !reaches(&M, R.Owner))
      continue;
    for (const IoCallSite &Other : M.IoCalls) {
      if (Other.Call == R.Site.Call || Other.Handle != H || Other.HandleField != R.Site.HandleField)
        continue;
      // A seek (or a view) the PT leaves out: the same statement is reported above.
      if (Other.Info->Kind == IoKind::Seek && !canExecuteInPt(M) && &M != R.Owner) {
        std::string Why = M.Bad ? M.BadWhy : "runs under a condition the prefetch thread cannot evaluate";
        return "its file position is moved by '" + std::string(Other.Info->Name) + At(Other.Call) +
               ", which the prefetch thread does not run (it " + Why + ")";
      }
      if (Other.Info->Kind == IoKind::Read && Other.Info->UsesPosition) {
        const ReadDecision *O = decisionFor(Other.Call);
        if (O && !O->Prefetched)
          return "its file position is moved by the read '" + std::string(Other.Info->Name) +
                 At(Other.Call) + ", which is not prefetched";
      }
    }
    // Reads ppios-cc does not pre-execute at all (fgets, fscanf, ...) move it as well.
    for (const CallExpr *Call : M.Calls) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      if (!Callee || !Callee->getIdentifier() || !IoCallTable::unhandledReadReason(Callee->getName()))
        continue;
      for (const Expr *Arg : Call->arguments())
        if (mentions(Arg, H))
          return "its file position is moved by '" + Callee->getNameAsString() + At(Call) +
                 ", which the prefetch thread does not pre-execute";
    }
  }
  return "";
}

bool isMpiSynchronization(const CallExpr *Call) {
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee || !Callee->getIdentifier())
    return false;
  llvm::StringRef Name = Callee->getName();
  if (!Name.startswith("MPI_") && !Name.startswith("PMPI_"))
    return false;
  if (Name.startswith("PMPI_"))
    Name = Name.drop_front(1);
  if (isLocalMpiQuery(Name) || Name.startswith("MPI_Type_") || Name.startswith("MPI_Info_") ||
      Name == "MPI_Init" || Name == "MPI_Init_thread")
    return false;
  // The program's file I/O calls are transfers, not synchronization (MPI_File_sync is).
  if (IoCallTable::lookup(Call) && Name != "MPI_File_sync")
    return false;
  return true;
}

// A synchronization may run between the PT's start and its reads: in this function after
// the start point (anywhere in a clone, whose caller the PT reached after starting), or in
// another function of the file.
bool PrefetchPlanner::synchronizesAfterStart() const {
  if (Facts && Facts->SynchronizesOutsideMain)
    return true;
  for (const auto &Owned : Units.all())
    if (AsClone || Owned->TopIndex >= Start)
      for (const CallExpr *Call : Owned->Calls)
        if (isMpiSynchronization(Call))
          return true;
  return false;
}

// Bad statements and read decisions for one start point. Read buffers whose bytes the PT
// needs (an index read first) become copy buffers as long as every read into them is
// prefetched; otherwise their data stays unknown to the PT.
void PrefetchPlanner::analyze(int StartIndex) {
  resetAnalysis();
  Start = StartIndex;
  BufferVars.clear();
  for (const auto &[VD, Last] : LastBufferWrite)
    if (AsClone || Last >= Start)
      BufferVars.insert(VD);
  CopyBuffers.clear();
  markBad();
  collectUnsafeHandles();
  decideReads();
  decideCloneCalls();
  // Buffers whose bytes the unprefetched reads wait for.
  llvm::DenseSet<const VarDecl *> Wanted;
  for (const ReadDecision &D : Decisions)
    if (!D.Prefetched && D.TaintSource && D.Owner->TopIndex >= Start)
      Wanted.insert(D.TaintSource);
  if (Wanted.empty())
    return;
  llvm::DenseSet<const VarDecl *> NoCopy;
  for (const ReadDecision &D : Decisions)
    if (const VarDecl *B = bufferOf(D.Site))
      if (!hasCopyVariant(*D.Site.Info) || D.Owner->TopIndex < Start)
        NoCopy.insert(B);
  for (const VarDecl *B : Wanted)
    if (!NoCopy.count(B) && !RefusedCopies.count(B) && declaredInRegion(B) &&
        (B->getType()->isArrayType() || heapOwned(B)))
      CopyBuffers.insert(B);
  if (CopyBuffers.empty())
    return;
  resetAnalysis();
  while (true) {
    markBad();
    collectUnsafeHandles();
    decideReads();
    decideCloneCalls();
    bool Changed = false;
    for (const ReadDecision &D : Decisions) {
      const VarDecl *B = bufferOf(D.Site);
      if (B && CopyBuffers.count(B) && !D.Prefetched) {
        CopyBuffers.erase(B);
        Changed = true;
      }
    }
    if (!Changed)
      return;
    resetAnalysis();
  }
}

void PrefetchPlanner::resetAnalysis() {
  for (const auto &Owned : Units.all()) {
    Owned->Bad = false;
    Owned->BadWhy.clear();
    Owned->InSlice = false;
  }
  BadVars.clear();
  TaintOf.clear();
  Speculations.clear();
  for (const auto &Owned : Units.all())
    Owned->TaintSource = nullptr;
  for (CloneCallDecision &C : CloneCalls) {
    C.Active = false;
    C.Reason.clear();
  }
  DerefParams.clear();
  for (ReadDecision &D : Decisions) {
    D.Prefetched = false;
    D.Copy = false;
    D.TaintSource = nullptr;
    D.Flags = 0;
    D.Reason.clear();
    D.Guards.clear();
  }
}

// A goto jumps back over U, and so may run it again, only to a label before it.
bool PrefetchPlanner::gotoMayRepeat(const Unit &U) const {
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  return llvm::any_of(LabelLocs, [&](SourceLocation L) {
    return !SM.isBeforeInTranslationUnit(U.S->getEndLoc(), L);
  });
}

bool PrefetchPlanner::plan() {
  Units.forEach([&](const Unit &U) {
    HasGoto |= isa<GotoStmt>(U.S) || isa<IndirectGotoStmt>(U.S) || isa<LabelStmt>(U.S);
  });
  const Stmt *Body = Units.function()->getBody();
  forEachStmtIn(Body, [&](const Stmt *S) {
    if (isa<LabelStmt>(S))
      LabelLocs.push_back(S->getBeginLoc());
    else if (isa<IndirectGotoStmt>(S))
      LabelLocs.push_back(Body->getBeginLoc());
  });
  // A statement calling a function that sets globals (init() opening a global handle,
  // storing the file's size) sets them: a value the PT captured before it is stale after.
  for (const auto &Owned : Units.all())
    for (const CallExpr *Call : Owned->Calls)
      if (const FunctionDecl *Callee = Call->getDirectCallee())
        for (const VarDecl *G : Units.oracle().classify(Callee).GlobalsStored)
          Owned->Defs.insert(G);
  collectHandles();
  Units.forEach([&](const Unit &U) {
    for (const IoCallSite &Site : U.IoCalls)
      if (Site.Info->Kind == IoKind::Read) {
        ReadDecision D;
        D.Site = Site;
        D.Owner = const_cast<Unit *>(&U);
        Decisions.push_back(D);
      }
  });
  Units.forEach([&](const Unit &U) {
    for (const CallExpr *Call : U.Calls)
      if (summaryOf(Call->getDirectCallee()))
        CloneCalls.push_back({Call, const_cast<Unit *>(&U),
                              Call->getDirectCallee()->getCanonicalDecl(), false, "", {}});
  });
  if (Decisions.empty() && CloneCalls.empty())
    return false;
  if (AsClone)
    return planClone();
  // Any start point is safe (what the PT cannot compute from there is left out), so every
  // top-level statement after MPI_Init is tried and the one that prefetches the most wins
  // (reads in loops count more). Ties go to the start the dependences suggest (after the
  // last unsafe statement the reads need), else to the earliest.
  int AfterInit = 0;
  for (const auto &Owned : Units.all())
    if (Owned->ContainsMpiInit && Owned->TopIndex + 1 > AfterInit)
      AfterInit = Owned->TopIndex + 1;
  int FirstRead = -1;
  for (const ReadDecision &D : Decisions)
    if (FirstRead < 0 || D.Owner->TopIndex < FirstRead)
      FirstRead = D.Owner->TopIndex;
  int Suggested = chooseStart(FirstRead);
  int Best = -1, BestScore = -1;
  int Last = static_cast<int>(Units.topLevel().size()) - 1;
  for (int Candidate = AfterInit; Candidate <= Last; ++Candidate) {
    analyze(Candidate);
    int Score = score();
    if (Score > BestScore || (Score == BestScore && Candidate == Suggested)) {
      BestScore = Score;
      Best = Candidate;
    }
  }
  if (Best < 0)
    Best = AfterInit;
  analyze(Best);
  if (score() == 0)
    return false;
  return finishPlan();
}

// Every name in the PT's text is declared there (see namedBy). A variable whose
// declaration the PT cannot have makes the statements that name it ones the PT does not
// run, and the reads that name it are left alone with a remark saying so: the slice is
// planned again without them until every name is declared.
bool PrefetchPlanner::finishPlan() {
  for (unsigned Round = 0;; ++Round) {
    closeSlice(/*UseBad=*/true, Start);
    addCountBlocks();
    std::string Why;
    const Decl *VD = undeclaredName(Why);
    if (!VD) {
      // Every name is declared: the plan is complete, and the PT's confinement is checked
      // on it before anything is emitted. What breaks it is refused, and the function
      // planned again without it.
      completePlan();
      buildThreadPlan();
      std::vector<Violation> Found = PlanVerifier(Finished, *this).verify();
      if (Found.empty())
        return true;
      if (Found.front().Where == Violation::Function || Round > 64 || !refuse(Found)) {
        Failure = Found.front().Why;
        for (ReadDecision &D : Decisions) {
          D.Prefetched = false;
          if (D.Reason.empty() || Found.front().Where == Violation::Function)
            D.Reason = Found.front().Why;
        }
        for (CloneCallDecision &C : CloneCalls)
          C.Active = false;
        return false;
      }
      analyze(Start);
      if (score() == 0)
        return false;
      continue;
    }
    if (Round > 64 || Undeclarable.count(VD)) {
      Failure = describe(VD) + " cannot be declared in it (" + Why + ")";
      for (ReadDecision &D : Decisions)
        if (D.Prefetched) {
          D.Prefetched = false;
          D.Reason = "the prefetch thread cannot be built: " + Failure;
        }
      return false;
    }
    Undeclarable[VD] = Why;
    UndeclarableTypes |= !isa<VarDecl>(VD);
    analyze(Start);
    if (score() == 0) {
      for (ReadDecision &D : Decisions)
        if (D.Reason.empty())
          D.Reason = "it names " + describe(VD) + ", which " + Why;
      return false;
    }
  }
}

void PrefetchPlanner::completePlan() {
  NamedVars.clear();
  for (const auto &Owned : Units.all())
    if (Owned->InSlice && Owned->TopIndex >= Start)
      namedBy(*Owned, NamedVars);
  // Handles nobody reads after their handoff are not handed over.
  llvm::erase_if(Handoffs, [](const HandoffPoint &H) { return !H.At->InSlice; });
  for (unsigned I = 0; I < Handoffs.size(); ++I)
    Handoffs[I].Slot = I;
  Captured.clear();
  Reopened.clear();
  collectCaptures();
}

std::string PrefetchPlanner::dataReadInto(const VarDecl *VD) const {
  auto It = RefusedCopies.find(VD);
  return "data read into " + quoted(VD) +
         (It == RefusedCopies.end() ? std::string()
                                    : ", which the prefetch thread may not copy the bytes into: it " + It->second);
}

bool PrefetchPlanner::refuse(const std::vector<Violation> &Found) {
  bool New = false;
  for (const Violation &V : Found) {
    if (V.Where == Violation::Statement)
      New |= RefusedUnits.insert({V.At, V.Why}).second;
    else if (V.Where == Violation::KeptCall)
      New |= RefusedCalls.insert({V.Call, V.Why}).second;
    else if (V.Where == Violation::CopyBuffer)
      New |= RefusedCopies.insert({V.Buffer, V.Why}).second;
  }
  return New;
}

// Transfers the PT cannot follow exactly (under a bad condition) are counted where the
// outermost bad statement was, as if it ran once. The statements around such a count are
// then part of the slice, and so is what they name and use: the closure goes on from
// them until nothing changes.
void PrefetchPlanner::addCountBlocks() {
  for (bool Changed = true; Changed;) {
    Changed = false;
    CountBlocks.clear();
    Approximate.clear();
    for (const auto &Owned : Units.all()) {
      const Unit &U = *Owned;
      if (U.TopIndex < Start || U.IoCalls.empty() || canExecuteInPt(U))
        continue;
      bool Transfers = false;
      for (const IoCallSite &Site : U.IoCalls)
        Transfers |= IoCallTable::isTransfer(*Site.Info);
      if (!Transfers)
        continue;
      const Unit *Outer = &U;
      for (const Unit *P = U.Parent; P; P = P->Parent)
        if (P->Bad)
          Outer = P;
      if (!ancestorsGood(*Outer))
        continue;
      if (Outer->InSlice && Outer->UnitKind == Unit::Simple)
        continue; // a bad statement holding a prefetched read: emitted as the prefetch
      CountBlocks.insert(Outer);
      for (Unit *P = Outer->Parent; P && !P->InSlice; P = P->Parent)
        Changed = true;
      include(Outer->Parent);
      if (containsLoop(*Outer))
        Approximate.push_back(Outer);
    }
    if (Changed)
      closeOver(/*UseBad=*/true, Start);
  }
}

void PrefetchPlanner::namedIn(const Stmt *S, VarSet &Out) const {
  llvm::SmallVector<const Stmt *, 16> Work{S};
  while (!Work.empty()) {
    const Stmt *St = Work.pop_back_val();
    if (!St)
      continue;
    if (const auto *DRE = dyn_cast<DeclRefExpr>(St))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
        Out.insert(VD);
    if (const auto *Call = dyn_cast<CallExpr>(St))
      if (const IoCallInfo *Info = IoCallTable::lookup(Call)) {
        const ReadDecision *D = decisionFor(Call);
        // Writes and reads the PT does not pre-execute become counts.
        if (Info->Kind == IoKind::Write || (Info->Kind == IoKind::Read && (!D || !D->Prefetched)))
          continue;
        for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
          int Index = static_cast<int>(I);
          const Expr *Arg = Call->getArg(I);
          if (Index == Info->DropArgs[0] || Index == Info->DropArgs[1])
            continue;
          // What the PT's read drops: its buffer (unless it copies), a status or formatted
          // destination of the MT's (only the PT's own stay).
          if (Info->Kind == IoKind::Read &&
              ((Index == Info->BufferArg && !D->Copy) ||
               (Index == Info->StatusArg && !ptOwnStatus(Arg)) ||
               (Info->Formatted && IoCallTable::isDataDestination(*Info, I) && !ptOwnScalar(Arg))))
            continue;
          Work.push_back(Arg);
        }
        continue;
      }
    for (const Stmt *Child : St->children())
      Work.push_back(Child);
  }
}

void PrefetchPlanner::namedBy(const Unit &U, VarSet &Out) const {
  if (U.UnitKind == Unit::Block || handoffAt(U))
    return;
  if (U.UnitKind == Unit::Jump) {
    if (!U.StopsPt && hasActiveCall(U))
      activeOperands(U, Out);
    return;
  }
  if (U.isControl()) {
    const Speculation *Sp = speculationFor(U);
    for (const Stmt *Part : headerParts(U.S)) {
      llvm::SmallVector<const Expr *, 4> Conjuncts;
      if (const auto *E = dyn_cast<Expr>(Part); E && Sp)
        conjunctsOf(E, Conjuncts);
      if (Conjuncts.size() > 1 || (Sp && llvm::is_contained(Sp->Conjuncts, Part))) {
        for (const Expr *C : Conjuncts)
          if (!llvm::is_contained(Sp->Conjuncts, C))
            namedIn(C, Out);
        continue;
      }
      namedIn(Part, Out);
    }
    return;
  }
  if (U.Bad || (!hasActiveCall(U) && countTransfers(U))) {
    activeOperands(U, Out);
    return;
  }
  namedIn(U.S, Out);
}

bool PrefetchPlanner::declaresOnly(const Unit &U) const {
  if (!U.InSlice || U.UnitKind != Unit::Simple || !isa<DeclStmt>(U.S) || handoffAt(U))
    return false;
  return U.Bad || (!hasActiveCall(U) && countTransfers(U));
}

void PrefetchPlanner::typesNamedBy(const Unit &U, DeclSet &Out) const {
  if (U.UnitKind == Unit::Block)
    return;
  auto ActiveCalls = [&] {
    for (const IoCallSite &Site : U.IoCalls)
      if (const ReadDecision *D = decisionFor(Site.Call); D && D->Prefetched)
        localTypesIn(Site.Call, Out);
    for (const CloneCallDecision &C : CloneCalls)
      if (C.Owner == &U && C.Active)
        localTypesIn(C.Call, Out);
  };
  if (handoffAt(U)) {
    if (const auto *DS = dyn_cast<DeclStmt>(U.S))
      for (const Decl *D : DS->decls())
        if (const auto *VD = dyn_cast<VarDecl>(D))
          localTypesOf(VD->getType(), Out);
    return;
  }
  if (U.UnitKind == Unit::Jump) {
    if (!U.StopsPt && hasActiveCall(U))
      ActiveCalls();
    return;
  }
  if (U.isControl()) {
    for (const Stmt *Part : headerParts(U.S))
      localTypesIn(Part, Out);
    return;
  }
  if (U.Bad || (!hasActiveCall(U) && countTransfers(U))) {
    ActiveCalls();
    if (const auto *DS = dyn_cast<DeclStmt>(U.S))
      for (const Decl *D : DS->decls())
        if (const auto *VD = dyn_cast<VarDecl>(D))
          localTypesOf(VD->getType(), Out);
    return;
  }
  localTypesIn(U.S, Out);
}

const Unit *PrefetchPlanner::typeDeclaringUnit(const Decl *T) const {
  for (const auto &Owned : Units.all())
    if (Owned->UnitKind == Unit::Simple)
      if (const auto *DS = dyn_cast<DeclStmt>(Owned->S))
        for (const Decl *D : DS->decls())
          if (D == T)
            return Owned.get();
  return nullptr;
}

const Decl *PrefetchPlanner::undeclaredName(std::string &Why) const {
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  for (const auto &Owned : Units.all()) {
    const Unit &U = *Owned;
    if (!U.InSlice || U.TopIndex < Start)
      continue;
    VarSet Named;
    namedBy(U, Named);
    std::vector<const VarDecl *> Sorted(Named.begin(), Named.end());
    std::sort(Sorted.begin(), Sorted.end(), [&](const VarDecl *A, const VarDecl *B) {
      return SM.isBeforeInTranslationUnit(A->getLocation(), B->getLocation());
    });
    for (const VarDecl *VD : Sorted) {
      // Globals are the file's; parameters the clone's own, or main()'s, captured or
      // declared by its prologue like every local declared before the start.
      if (!VD->isLocalVarDecl())
        continue;
      // Too big for the PT's stack, and its heap block cannot stand in for it.
      if (PlanVerifier::stackBytes(VD) > PlanVerifier::StackLimit) {
        std::string HeapWhy = heapUnplaceable(VD);
        if (!HeapWhy.empty()) {
          Why = (PlanVerifier::stackBytes(VD) == PlanVerifier::Unbounded
                     ? std::string("is sized only when it runs, more than the prefetch thread's stack can be "
                                   "trusted with")
                     : "takes " + PlanVerifier::stackSize(VD) + ", too many for the prefetch thread's stack") +
                ", and " + HeapWhy + PlanVerifier::HeapRule;
          return VD;
        }
      }
      const Unit *D = Units.declaringUnit(VD);
      std::string Line = std::to_string(SM.getPresumedLineNumber(VD->getLocation()));
      if (!D) {
        if (declaredInside(U.S, VD))
          continue;
        Why = "is declared at line " + Line + " inside a statement the prefetch thread does not run";
        return VD;
      }
      if (D->TopIndex < Start && !AsClone)
        continue; // captured, or declared by the PT's prologue (the emitter's)
      if (!D->InSlice) {
        std::string Cause = D->Bad ? " (it " + D->BadWhy + ")" : "";
        for (const Unit *P = D->Parent; P && Cause.empty(); P = P->Parent)
          if (P->Bad)
            Cause = " (it runs under a condition that " + P->BadWhy + ")";
        Why = "is declared at line " + Line + " by a statement the prefetch thread does not run" + Cause;
        return VD;
      }
      if (declaresOnly(*D) && !declarableInPt(VD)) {
        Why = "is declared at line " + Line + " by a statement the prefetch thread does not run (" +
              (D->Bad ? "it " + D->BadWhy : std::string("it only counts its I/O")) +
              "), and has a type the prefetch thread cannot declare as its own";
        return VD;
      }
    }
    // Types and enumerations declared in the function: their declaration statements are
    // the PT's, or the PT cannot name them (the PT of main() is a function of its own).
    DeclSet Types;
    typesNamedBy(U, Types);
    std::vector<const Decl *> SortedTypes(Types.begin(), Types.end());
    std::sort(SortedTypes.begin(), SortedTypes.end(), [&](const Decl *A, const Decl *B) {
      return SM.isBeforeInTranslationUnit(A->getLocation(), B->getLocation());
    });
    for (const Decl *T : SortedTypes) {
      std::string Line = std::to_string(SM.getPresumedLineNumber(T->getLocation()));
      const Unit *D = typeDeclaringUnit(T);
      if (D == &U && !declaresOnly(U))
        continue;
      if (!D) {
        if (declaredInside(U.S, T))
          continue;
        Why = "is declared at line " + Line + " in a statement the prefetch thread does not run";
        return T;
      }
      if (D->TopIndex < Start && !AsClone) {
        Why = "is declared at line " + Line + ", before the prefetch thread starts, in " +
              Units.function()->getNameAsString() + "(), which the prefetch thread's function "
              "cannot name";
        return T;
      }
      if (!D->InSlice || declaresOnly(*D)) {
        Why = "is declared at line " + Line + " by a statement the prefetch thread does not run" +
              (D->Bad ? " (it " + D->BadWhy + ")" : std::string());
        return T;
      }
    }
  }
  return nullptr;
}

const std::string *PrefetchPlanner::undeclarable(const Stmt *S, const Decl **Which) const {
  if (Undeclarable.empty() || !S)
    return nullptr;
  const std::string *Found = nullptr;
  if (UndeclarableTypes) {
    DeclSet Types;
    localTypesIn(S, Types);
    for (const Decl *T : Types) {
      auto It = Undeclarable.find(T);
      if (It != Undeclarable.end()) {
        if (Which)
          *Which = T;
        return &It->second;
      }
    }
  }
  forEachStmtIn(S, [&](const Stmt *St) {
    if (Found)
      return;
    if (const auto *DRE = dyn_cast<DeclRefExpr>(St))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
        auto It = Undeclarable.find(VD);
        if (It != Undeclarable.end()) {
          Found = &It->second;
          if (Which)
            *Which = VD;
        }
      }
  });
  return Found;
}

} // namespace ppios
