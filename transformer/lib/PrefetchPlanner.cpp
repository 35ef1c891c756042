#include "PrefetchPlanner.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"
#include "clang/Basic/SourceManager.h"

#include <algorithm>

using namespace clang;

namespace ppios {

namespace {

constexpr unsigned PfAfterWrite = 0x1u; // PPIOS_PF_AFTER_WRITE

std::string quoted(const VarDecl *VD) { return "'" + VD->getNameAsString() + "'"; }

// Strings (char pointers and arrays of them, like argv) are read-only inputs in practice;
// the PT may read them. Other memory reached through MT pointers may change under it.
bool isStringPointer(QualType T) {
  while (T->isPointerType() || T->isArrayType()) {
    QualType Pointee = T->isPointerType() ? T->getPointeeType()
                                          : QualType(T->getPointeeOrArrayElementType(), 0);
    if (Pointee->isCharType())
      return true;
    T = Pointee;
  }
  return false;
}

bool openMayWrite(const CallExpr *Call, const IoCallInfo &Info, const ASTContext &Ctx) {
  if (!Info.WriteModeArg)
    return false;
  unsigned ModeArg = Info.Interface == IoInterface::MpiIo ? 2 : 1;
  if (Call->getNumArgs() <= ModeArg)
    return false;
  const Expr *Mode = Call->getArg(ModeArg)->IgnoreParenImpCasts();
  if (Info.Interface == IoInterface::Stdio) {
    if (const auto *SL = dyn_cast<StringLiteral>(Mode))
      return SL->getString().find_first_of("wa+") != llvm::StringRef::npos;
    return true;
  }
  Expr::EvalResult Value;
  if (!Mode->EvaluateAsInt(Value, Ctx))
    return true;
  uint64_t Flags = Value.Val.getInt().getZExtValue();
  if (Info.Interface == IoInterface::Posix)
    return (Flags & 3) != 0; // O_WRONLY or O_RDWR
  return (Flags & (4 | 8)) != 0; // Open MPI's MPI_MODE_WRONLY | MPI_MODE_RDWR
}

unsigned countTransfers(const Unit &U) {
  unsigned N = 0;
  for (const IoCallSite &Site : U.IoCalls)
    N += IoCallTable::isTransfer(*Site.Info);
  for (const Unit *Child : U.Children)
    N += countTransfers(*Child);
  return N;
}

bool containsLoop(const Unit &U) {
  if (U.UnitKind == Unit::Loop)
    return true;
  for (const Unit *Child : U.Children)
    if (containsLoop(*Child))
      return true;
  return false;
}

// The variable a read stores its bytes into (`buf`, `&x`, `buf + k`), if any.
const VarDecl *bufferOf(const IoCallSite &Site) {
  if (Site.Info->BufferArg < 0 || Site.Info->BufferArg >= (int)Site.Call->getNumArgs())
    return nullptr;
  const Expr *E = Site.Call->getArg(Site.Info->BufferArg)->IgnoreParenCasts();
  while (true) {
    if (const auto *UO = dyn_cast<UnaryOperator>(E))
      E = UO->getSubExpr()->IgnoreParenCasts();
    else if (const auto *BO = dyn_cast<BinaryOperator>(E))
      E = BO->getLHS()->IgnoreParenCasts();
    else
      break;
  }
  if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
    return dyn_cast<VarDecl>(DRE->getDecl());
  return nullptr;
}

bool hasCopyVariant(const IoCallInfo &Info) {
  llvm::StringRef Name = Info.Name;
  return Name == "read" || Name == "pread" || Name == "fread" || Name == "MPI_File_read_at";
}

} // namespace

const ReadDecision *PrefetchPlanner::decisionFor(const CallExpr *Call) const {
  for (const ReadDecision &D : Decisions)
    if (D.Site.Call == Call)
      return &D;
  return nullptr;
}

void PrefetchPlanner::collectHandles() {
  const ASTContext &Ctx = Units.function()->getASTContext();
  Units.forEach([&](const Unit &U) {
    for (const IoCallSite &Site : U.IoCalls) {
      if (!Site.Handle)
        continue;
      if (Site.Info->Kind == IoKind::Open) {
        HandleInterface[Site.Handle] = Site.Info->Interface;
        if (openMayWrite(Site.Call, *Site.Info, Ctx))
          WritableHandles.insert(Site.Handle);
      }
      if (Site.Info->Kind == IoKind::Write)
        WrittenHandles.insert(Site.Handle);
    }
    BufferVars.insert(U.BufferVars.begin(), U.BufferVars.end());
  });
  // `int fd = open(...)`: the open's handle is the variable it initialises or is assigned to.
  Units.forEach([&](const Unit &U) {
    for (const IoCallSite &Site : U.IoCalls)
      if (Site.Info->Kind == IoKind::Open && !Site.Info->HandleIsOut)
        for (const VarDecl *VD : U.Defs)
          if (VD->getType()->isIntegerType() || VD->getType()->isPointerType())
            HandleInterface[VD] = Site.Info->Interface;
  });
}

bool PrefetchPlanner::hasPrefetchedRead(const Unit &U) const {
  for (const IoCallSite &Site : U.IoCalls)
    if (const ReadDecision *D = decisionFor(Site.Call))
      if (D->Prefetched)
        return true;
  return false;
}

bool PrefetchPlanner::ancestorsGood(const Unit &U) const {
  for (const Unit *P = U.Parent; P; P = P->Parent)
    if (P->Bad)
      return false;
  return true;
}

void PrefetchPlanner::include(Unit *U) {
  for (; U && !U->InSlice; U = U->Parent)
    U->InSlice = true;
}

// Backward closure from the I/O the PT performs or counts. With UseBad false it runs over
// the whole function to find out what the reads depend on at all (for the start point).
void PrefetchPlanner::closeSlice(bool UseBad, int RegionStart) {
  auto Eligible = [&](const Unit &U) {
    if (U.TopIndex < RegionStart)
      return false;
    if (!UseBad)
      return true;
    // A bad statement holding a prefetched read is emitted as the prefetch alone.
    return ancestorsGood(U) && (!U.Bad || hasPrefetchedRead(U));
  };
  for (const auto &Owned : Units.all())
    Owned->InSlice = false;
  // Seeds: reads, writes (counted), and the opens, seeks and closes of read descriptors.
  llvm::DenseSet<const VarDecl *> ReadHandles;
  for (const ReadDecision &D : Decisions)
    if ((!UseBad || D.Prefetched) && D.Site.Handle)
      ReadHandles.insert(D.Site.Handle);
  for (const auto &Owned : Units.all()) {
    Unit *U = Owned.get();
    if (!Eligible(*U))
      continue;
    for (const IoCallSite &Site : U->IoCalls) {
      bool Seed = IoCallTable::isTransfer(*Site.Info);
      if (!Seed && Site.Info->Kind != IoKind::Finalize && Site.Handle &&
          ReadHandles.count(Site.Handle))
        Seed = true;
      if (Seed)
        include(U);
    }
  }
  bool Changed = true;
  while (Changed) {
    Changed = false;
    VarSet Relevant;
    for (const auto &Owned : Units.all()) {
      const Unit *U = Owned.get();
      if (!U->InSlice || U->UnitKind == Unit::Block)
        continue;
      // A statement that is only a write is counted, not run: its operands do not matter.
      bool OnlyWrites = !U->IoCalls.empty();
      for (const IoCallSite &Site : U->IoCalls)
        OnlyWrites &= Site.Info->Kind == IoKind::Write;
      if (!OnlyWrites) {
        Relevant.insert(U->Uses.begin(), U->Uses.end());
        Relevant.insert(U->TypeUses.begin(), U->TypeUses.end());
      }
      // A copy read needs its buffer declared and allocated in the PT.
      for (const IoCallSite &Site : U->IoCalls)
        if (const ReadDecision *D = decisionFor(Site.Call))
          if (D->Copy && bufferOf(Site))
            Relevant.insert(bufferOf(Site));
    }
    for (const auto &Owned : Units.all()) {
      Unit *U = Owned.get();
      if (U->InSlice || !Eligible(*U))
        continue;
      bool Needed = false;
      for (const VarDecl *VD : U->Defs)
        Needed |= Relevant.count(VD) > 0;
      for (const VarDecl *VD : U->PointerStores)
        Needed |= Relevant.count(VD) > 0;
      if (U->UnitKind == Unit::Jump) {
        // return always decides whether later I/O happens; break/continue when their loop
        // is part of the PT.
        if (isa<ReturnStmt>(U->S)) {
          Needed = true;
        } else {
          for (const Unit *P = U->Parent; P; P = P->Parent)
            if (P->UnitKind == Unit::Loop) {
              Needed |= P->InSlice;
              break;
            }
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

bool PrefetchPlanner::declaredInRegion(const VarDecl *VD) const {
  const Unit *D = Units.declaringUnit(VD);
  if (D && D->TopIndex >= Start)
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

bool PrefetchPlanner::canExecuteInPt(const Unit &U) const {
  return !U.Bad && ancestorsGood(U);
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
    for (const VarDecl *VD : U.Uses)
      if (BufferVars.count(VD) && !CopyBuffers.count(VD) && MarkBad(U, "uses the data read into " + quoted(VD)))
        U.TaintSource = VD;
    for (const VarDecl *VD : U.PointerStores)
      if (!heapOwned(VD))
        MarkBad(U, "stores through pointer " + quoted(VD) + " into memory of the main thread");
    for (const VarDecl *VD : U.DereferencedPointers)
      if (!declaredInRegion(VD) && !isStringPointer(VD->getType()) && !HandleInterface.count(VD))
        MarkBad(U, "reads memory of the main thread through " + quoted(VD));
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
          for (const VarDecl *VD : *Set)
            if (!BadVars.count(VD)) {
              BadVars[VD] = Why;
              if (Taint)
                TaintOf[VD] = Taint;
              Changed = true;
            }
        continue;
      }
      for (const VarDecl *VD : U.Uses) {
        auto It = BadVars.find(VD);
        if (It != BadVars.end() && !HandleInterface.count(VD)) {
          if (MarkBad(U, "depends on " + quoted(VD) + ", which " + It->second)) {
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

void PrefetchPlanner::decideReads() {
  const SourceManager &SM = Units.function()->getASTContext().getSourceManager();
  for (ReadDecision &D : Decisions) {
    const Unit &U = *D.Owner;
    const VarDecl *H = D.Site.Handle;
    D.Prefetched = false;
    if (D.Site.Call->getBeginLoc().isMacroID()) {
      D.Reason = "the call is inside a macro expansion";
      continue;
    }
    if (U.TopIndex < Start) {
      D.Reason = "it runs before the prefetch thread can start (line " +
                 std::to_string(SM.getPresumedLineNumber(
                     Units.topLevel()[Start - 1]->S->getEndLoc())) +
                 " computes values the reads need)";
      continue;
    }
    if (!H || !HandleInterface.count(H)) {
      D.Reason = "its descriptor is not a variable opened in this function";
      continue;
    }
    std::string Why;
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
        if (Index == D.Site.Info->BufferArg || Index == D.Site.Info->StatusArg)
          continue;
        llvm::SmallVector<const Stmt *, 8> Work{D.Site.Call->getArg(I)};
        while (!Work.empty() && Why.empty()) {
          const Stmt *E = Work.pop_back_val();
          if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
            if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
              auto It = BadVars.find(VD);
              if (It != BadVars.end() && !HandleInterface.count(VD)) {
                Why = "its " + std::string(Index == D.Site.Info->HandleArg ? "descriptor"
                                                                            : "size or offset") +
                      " depends on " + quoted(VD) + ", which " + It->second;
                auto T = TaintOf.find(VD);
                if (T != TaintOf.end())
                  D.TaintSource = T->second;
              }
              if (BufferVars.count(VD) && !CopyBuffers.count(VD) &&
                  Index != D.Site.Info->HandleArg) {
                Why = "its size or offset depends on data read into " + quoted(VD);
                D.TaintSource = VD;
              }
            }
          if (isa<UnaryExprOrTypeTraitExpr>(E))
            continue;
          for (const Stmt *Child : E->children())
            if (Child)
              Work.push_back(Child);
        }
      }
    }
    if (!Why.empty()) {
      D.Reason = Why;
      continue;
    }
    D.Prefetched = true;
    D.Copy = bufferOf(D.Site) && CopyBuffers.count(bufferOf(D.Site));
    if (WrittenHandles.count(H) || WritableHandles.count(H))
      D.Flags |= PfAfterWrite;
  }
}

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
    if (!Seen.insert(VD).second || !DeclaredBeforeStart(VD))
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
    if (!U.InSlice || U.TopIndex < Start || U.UnitKind == Unit::Block)
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
    for (const VarDecl *VD : U.Uses)
      Capture(VD);
    for (const VarDecl *VD : U.TypeUses)
      Capture(VD);
    for (const VarDecl *VD : U.Defs)
      Capture(VD);
  }
  // Declaration order, so that the output does not depend on pointer values.
  std::sort(Captured.begin(), Captured.end(), [](const VarDecl *A, const VarDecl *B) {
    const SourceManager &SM = A->getASTContext().getSourceManager();
    return SM.isBeforeInTranslationUnit(A->getLocation(), B->getLocation());
  });
  // Handles used by the PT but opened before the start point are reopened.
  llvm::DenseSet<const VarDecl *> Used;
  for (const auto &Owned : Units.all())
    if (Owned->InSlice && Owned->TopIndex >= Start)
      for (const IoCallSite &Site : Owned->IoCalls)
        if (Site.Handle)
          Used.insert(Site.Handle);
  for (const VarDecl *H : Used) {
    if (!DeclaredBeforeStart(H))
      continue;
    const IoCallSite *Open = nullptr;
    const Unit *OpenUnit = nullptr;
    for (const auto &Owned : Units.all())
      if (Owned->TopIndex < Start)
        for (const IoCallSite &Site : Owned->IoCalls)
          if (Site.Info->Kind == IoKind::Open &&
              (Site.Handle == H || (!Site.Info->HandleIsOut && Owned->Defs.count(H)))) {
            Open = &Site;
            OpenUnit = Owned.get();
          }
    if (!Open)
      continue;
    (void)OpenUnit;
    bool NeedsPosition = false;
    for (const ReadDecision &D : Decisions)
      NeedsPosition |= D.Prefetched && D.Site.Handle == H && D.Site.Info->UsesPosition;
    Reopened.push_back({H, *Open, NeedsPosition});
    std::sort(Reopened.begin(), Reopened.end(), [](const ReopenedHandle &A, const ReopenedHandle &B) {
      const SourceManager &SM = A.Var->getASTContext().getSourceManager();
      return SM.isBeforeInTranslationUnit(A.Var->getLocation(), B.Var->getLocation());
    });
    // The open's mode and flags are evaluated in the PT.
    for (unsigned I = 0; I < Open->Call->getNumArgs(); ++I) {
      int Index = static_cast<int>(I);
      if (Index == Open->Info->PathArg || Index == Open->Info->HandleArg ||
          Index == Open->Info->DropArgs[0] || Index == Open->Info->DropArgs[1])
        continue;
      llvm::SmallVector<const Stmt *, 8> Work{Open->Call->getArg(I)};
      while (!Work.empty()) {
        const Stmt *E = Work.pop_back_val();
        if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
          if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
            Capture(VD);
        for (const Stmt *Child : E->children())
          if (Child)
            Work.push_back(Child);
      }
    }
  }
}

// Bad statements and read decisions for one start point. Read buffers whose bytes the PT
// needs (an index read first) become copy buffers as long as every read into them is
// prefetched; otherwise their data stays unknown to the PT.
void PrefetchPlanner::analyze(int StartIndex) {
  resetAnalysis();
  Start = StartIndex;
  CopyBuffers.clear();
  markBad();
  decideReads();
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
    if (!NoCopy.count(B) && declaredInRegion(B) &&
        (B->getType()->isArrayType() || heapOwned(B)))
      CopyBuffers.insert(B);
  if (CopyBuffers.empty())
    return;
  resetAnalysis();
  while (true) {
    markBad();
    decideReads();
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
  for (const auto &Owned : Units.all())
    Owned->TaintSource = nullptr;
  for (ReadDecision &D : Decisions) {
    D.Prefetched = false;
    D.Copy = false;
    D.TaintSource = nullptr;
    D.Flags = 0;
    D.Reason.clear();
  }
}

bool PrefetchPlanner::plan() {
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
  if (Decisions.empty())
    return false;
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
    int Score = 0;
    for (const ReadDecision &D : Decisions)
      if (D.Prefetched) {
        bool InLoop = false;
        for (const Unit *P = D.Owner; P; P = P->Parent)
          InLoop |= P->UnitKind == Unit::Loop;
        Score += InLoop ? 10 : 1;
      }
    if (Score > BestScore || (Score == BestScore && Candidate == Suggested)) {
      BestScore = Score;
      Best = Candidate;
    }
  }
  if (Best < 0)
    Best = AfterInit;
  analyze(Best);
  bool Any = false;
  for (const ReadDecision &D : Decisions)
    Any |= D.Prefetched;
  if (!Any)
    return false;

  closeSlice(/*UseBad=*/true, Start);
  // Transfers the PT cannot follow exactly (under a bad condition) are counted where the
  // outermost bad statement was, as if it ran once.
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
    include(Outer->Parent);
    if (containsLoop(*Outer))
      Approximate.push_back(Outer);
  }
  // Transfers before the start point that the PT does not see.
  for (const Unit *U : Units.topLevel()) {
    if (U->TopIndex >= Start)
      break;
    InitialSeq += countTransfers(*U);
    if (countTransfers(*U) && containsLoop(*U))
      Approximate.push_back(U);
  }
  collectCaptures();
  return true;
}

} // namespace ppios
