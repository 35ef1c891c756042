#include "PrefetchPlanner.h"
#include "SourceText.h"

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
constexpr unsigned PfAfterSync = 0x2u;  // PPIOS_PF_AFTER_SYNC

// MPI calls that only ask about the local process: no other rank's data becomes visible.
bool isLocalMpiQuery(llvm::StringRef Name) {
  static const char *const Local[] = {
      "MPI_Comm_rank",  "MPI_Comm_size",       "MPI_Wtime",       "MPI_Wtick",
      "MPI_Get_count",  "MPI_Get_elements",    "MPI_Type_size",   "MPI_Initialized",
      "MPI_Finalized",  "MPI_Error_string",    "MPI_Error_class", "MPI_Get_processor_name",
      "MPI_Query_thread", "MPI_Is_thread_main", "MPI_Get_version", "MPI_Type_get_extent",
      "MPI_File_get_size", "MPI_File_get_position", "MPI_Get_address", "MPI_Comm_get_attr"};
  for (const char *L : Local)
    if (Name == L)
      return true;
  return false;
}

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

// An open that may create or truncate its file (O_CREAT/O_TRUNC, "w"/"a",
// MPI_MODE_CREATE): the PT must not run it before the main thread did (it would find no
// file, or the old one).
bool openMayCreate(const CallExpr *Call, const IoCallInfo &Info, const ASTContext &Ctx) {
  if (!Info.WriteModeArg)
    return false;
  unsigned ModeArg = Info.Interface == IoInterface::MpiIo ? 2 : 1;
  if (Call->getNumArgs() <= ModeArg)
    return false;
  const Expr *Mode = Call->getArg(ModeArg)->IgnoreParenImpCasts();
  if (Info.Interface == IoInterface::Stdio) {
    if (const auto *SL = dyn_cast<StringLiteral>(Mode))
      return SL->getString().find_first_of("wa") != llvm::StringRef::npos;
    return true;
  }
  Expr::EvalResult Value;
  if (!Mode->EvaluateAsInt(Value, Ctx))
    return true;
  uint64_t Flags = Value.Val.getInt().getZExtValue();
  if (Info.Interface == IoInterface::Posix)
    return (Flags & (0100 | 01000)) != 0; // Linux's O_CREAT | O_TRUNC
  return (Flags & 1) != 0;                // Open MPI's MPI_MODE_CREATE
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

std::string shadowName(const VarDecl *VD) { return "ppios_pt_g_" + VD->getNameAsString(); }

std::vector<const HandoffPoint *> PrefetchPlanner::handoffsAt(const Unit &U) const {
  std::vector<const HandoffPoint *> Out;
  for (const HandoffPoint &H : Handoffs)
    if (H.At == &U)
      Out.push_back(&H);
  return Out;
}

const HandoffPoint *PrefetchPlanner::handoffAt(const Unit &U) const {
  for (const HandoffPoint &H : Handoffs)
    if (H.At == &U)
      return &H;
  return nullptr;
}

const ReadDecision *PrefetchPlanner::decisionFor(const CallExpr *Call) const {
  for (const ReadDecision &D : Decisions)
    if (D.Site.Call == Call)
      return &D;
  return nullptr;
}

namespace {
bool contains(const Stmt *S, const Stmt *Target) {
  if (S == Target)
    return true;
  for (const Stmt *Child : S->children())
    if (Child && contains(Child, Target))
      return true;
  return false;
}

// VD is initialised or assigned from an expression holding Call, somewhere in S.
bool receivesResult(const Stmt *S, const VarDecl *VD, const CallExpr *Call) {
  if (VD->getInit() && contains(VD->getInit(), Call))
    return true;
  llvm::SmallVector<const Stmt *, 8> Work{S};
  while (!Work.empty()) {
    const Stmt *E = Work.pop_back_val();
    if (const auto *BO = dyn_cast<BinaryOperator>(E); BO && BO->isAssignmentOp())
      if (const auto *DRE = dyn_cast<DeclRefExpr>(BO->getLHS()->IgnoreParenImpCasts()))
        if (DRE->getDecl() == VD && contains(BO->getRHS(), Call))
          return true;
    for (const Stmt *Child : E->children())
      if (Child)
        Work.push_back(Child);
  }
  return false;
}
} // namespace

void PrefetchPlanner::collectHandles() {
  const ASTContext &Ctx = Units.function()->getASTContext();
  Units.forEach([&](const Unit &U) {
    for (const IoCallSite &Site : U.IoCalls) {
      if (Site.HandleField && Site.Info->Kind == IoKind::Write)
        WrittenFields.insert(Site.HandleField);
      if (!Site.Handle || Site.HandleField)
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
  // A clone reads through the descriptors its parameters bring (the caller passes its PT's).
  if (AsClone) {
    auto AddParam = [&](const VarDecl *VD, IoInterface Iface) {
      if (VD && isa<ParmVarDecl>(VD) && !HandleInterface.count(VD))
        HandleInterface[VD] = Iface;
    };
    Units.forEach([&](const Unit &U) {
      for (const IoCallSite &Site : U.IoCalls)
        if (Site.Info->Kind != IoKind::Open && !Site.HandleField)
          AddParam(Site.Handle, Site.Info->Interface);
      for (const CallExpr *Call : U.Calls)
        if (const CloneSummary *S = summaryOf(Call->getDirectCallee()))
          for (unsigned I = 0; I < Call->getNumArgs() && I < S->Params.size(); ++I)
            if (S->Params[I] == ParamRole::Handle)
              if (const auto *DRE = dyn_cast<DeclRefExpr>(Call->getArg(I)->IgnoreParenImpCasts()))
                AddParam(dyn_cast<VarDecl>(DRE->getDecl()), S->HandleInterfaces[I]);
    });
  }
  // `int fd = open(...)`: the open's handle is the variable it initialises or is assigned
  // to (not the other variables of the statement: `int n = 0, fd = open(...)`).
  Units.forEach([&](const Unit &U) {
    for (const IoCallSite &Site : U.IoCalls)
      if (Site.Info->Kind == IoKind::Open && !Site.Info->HandleIsOut)
        for (const VarDecl *VD : U.Defs)
          if ((VD->getType()->isIntegerType() || VD->getType()->isPointerType()) &&
              receivesResult(U.S, VD, Site.Call))
            HandleInterface[VD] = Site.Info->Interface;
  });
  // Global handles: every PT reference is to the PT's shadow (see TranslationUnitFacts).
  if (Facts)
    for (const auto &[G, Iface] : Facts->GlobalHandles)
      HandleInterface[G] = Iface;
  // main(): a variable the program reads, seeks or closes through is a handle too, however
  // it got its value (a helper's open, another file's): the PT reopens what the MT holds.
  if (!AsClone)
    Units.forEach([&](const Unit &U) {
      for (const IoCallSite &Site : U.IoCalls)
        if (Site.Handle && !Site.HandleField && Site.Info->Kind != IoKind::Open &&
            Site.Info->Interface != IoInterface::Mpi && !Site.Handle->hasGlobalStorage() &&
            !isa<ParmVarDecl>(Site.Handle) && !HandleInterface.count(Site.Handle))
          HandleInterface[Site.Handle] = Site.Info->Interface;
    });
}

// Handles the PT cannot follow: set in its region by a statement it does not run (a
// helper's open, a copy from memory it cannot read), so its copy would be stale.
void PrefetchPlanner::collectUnsafeHandles() {
  UnsafeHandles.clear();
  Handoffs.clear();
  for (const auto &Owned : Units.all()) {
    const Unit &U = *Owned;
    if (U.TopIndex < Start || U.UnitKind == Unit::Block)
      continue;
    for (const VarDecl *VD : U.Defs) {
      if (!HandleInterface.count(VD) || UnsafeHandles.count(VD))
        continue;
      if (Units.declaringUnit(VD) == &U && !VD->getInit())
        continue; // `int fd;` declares, sets nothing
      // A statement of main() that runs once, setting a local handle: handed over.
      // So is a global handle a call of such a statement sets (init() opening it).
      // (`int fd = open(...)` alone in its declaration: the PT declares it with the take.)
      const auto *DS = dyn_cast<DeclStmt>(U.S);
      bool DeclaresOnlyIt = DS && DS->isSingleDecl() && DS->getSingleDecl() == VD;
      bool Local = VD->hasLocalStorage() && !isa<ParmVarDecl>(VD) && Units.declaringUnit(VD) &&
                   (Units.declaringUnit(VD) != &U || DeclaresOnlyIt);
      bool Global = Facts && Facts->isGlobalHandle(VD);
      // (Not when the statement also calls a clone: the take replaces the statement.)
      bool CallsClone = false;
      for (const CallExpr *Call : U.Calls)
        CallsClone |= summaryOf(Call->getDirectCallee()) != nullptr;
      if (!canExecuteInPt(U) && !AsClone && !HasGoto && !U.Parent &&
          U.UnitKind != Unit::Loop && (Local || (Global && !CallsClone)) && !countTransfers(U)) {
        Handoffs.push_back({&U, VD, HandleInterface.find(VD)->second,
                            static_cast<unsigned>(Handoffs.size())});
        continue;
      }
      if (!canExecuteInPt(U)) {
        const SourceManager &SM = VD->getASTContext().getSourceManager();
        std::string Where;
        if (Global)
          Where = AsClone ? ", in '" + Units.function()->getNameAsString() +
                                "' (the main thread hands a global over only after a statement "
                                "of main())"
                  : U.Parent || U.UnitKind == Unit::Loop
                      ? ", inside a loop or condition (the main thread hands a global over only "
                        "after a top-level statement of main())"
                  : HasGoto ? " (main() has goto: no point to hand it over at)"
                  : countTransfers(U) ? " (the statement also does I/O of its own)"
                  : CallsClone ? " (the statement also calls a function whose reads the "
                                 "prefetch thread pre-executes)"
                               : std::string();
        UnsafeHandles[VD] = std::string(Global ? "its descriptor, global " : "its descriptor ") +
                            quoted(VD) + (Global ? ", is set at line " : " is set at line ") +
                            std::to_string(SM.getPresumedLineNumber(U.S->getBeginLoc())) +
                            " by a statement the prefetch thread does not run" +
                            (U.Bad && !Global ? " (it " + U.BadWhy + ")" : std::string()) +
                            Where;
      }
    }
  }
}

// A read through a struct field (`g.fd`, `r->fp`): the field must hold nothing but
// descriptors of its interface, and the struct must be the PT's own.
std::string PrefetchPlanner::fieldHandleProblem(const IoCallSite &Site, const Unit *At) {
  const FieldDecl *F = Site.HandleField;
  const VarDecl *B = Site.Handle;
  auto It = Facts ? Facts->HandleFields.find(F) : TranslationUnitFacts().HandleFields.end();
  if (!Facts || It == Facts->HandleFields.end() || It->second != Site.Info->Interface)
    return "its descriptor is field '" + F->getNameAsString() +
           "', which the program does not only set from opens";
  if (const std::string *Bad = badReason(B, At))
    return "its descriptor is a field of " + quoted(B) + ", which " + *Bad;
  if (B->getType()->isPointerType()) {
    if (!ptOwnedPointer(B))
      return "its descriptor is a field of a struct the prefetch thread does not own";
    if (isa<ParmVarDecl>(B))
      DerefParams.insert(B);
    return "";
  }
  if (B->hasGlobalStorage() || (AsClone && isa<ParmVarDecl>(B)))
    return "its descriptor is a field of " + quoted(B) + ", which the prefetch thread does not copy";
  return "";
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

namespace {
void varsIn(const Stmt *E, VarSet &Out) {
  llvm::SmallVector<const Stmt *, 8> Work{E};
  while (!Work.empty()) {
    const Stmt *S = Work.pop_back_val();
    if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
        Out.insert(VD);
    for (const Stmt *Child : S->children())
      if (Child)
        Work.push_back(Child);
  }
}
} // namespace

// The variables the PT needs for the calls it keeps from a bad statement: operands of its
// prefetched reads (all of the statement's uses, as before clones existed) and the
// arguments of its active clone calls that the clone uses.
void PrefetchPlanner::activeOperands(const Unit &U, VarSet &Out) const {
  bool HasClone = false;
  for (const CloneCallDecision &C : CloneCalls)
    if (C.Owner == &U)
      HasClone = true;
  if (!HasClone) {
    Out.insert(U.Uses.begin(), U.Uses.end());
    Out.insert(U.TypeUses.begin(), U.TypeUses.end());
    return;
  }
  for (const IoCallSite &Site : U.IoCalls) {
    const ReadDecision *D = decisionFor(Site.Call);
    if (!D || !D->Prefetched)
      continue;
    for (const ArmGuard &G : D->Guards)
      varsIn(G.Cond, Out);
    for (unsigned I = 0; I < Site.Call->getNumArgs(); ++I)
      if (static_cast<int>(I) != Site.Info->BufferArg || D->Copy)
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

namespace {
// Finds Target below S; on the way back up, notes the conditions of the arms it is in.
bool findArm(const Stmt *S, const Stmt *Target, std::vector<ArmGuard> &Out) {
  if (S == Target)
    return true;
  for (const Stmt *Child : S->children()) {
    if (!Child || !findArm(Child, Target, Out))
      continue;
    if (const auto *CO = dyn_cast<ConditionalOperator>(S)) {
      if (Child == CO->getTrueExpr())
        Out.push_back({CO->getCond(), false});
      else if (Child == CO->getFalseExpr())
        Out.push_back({CO->getCond(), true});
    } else if (const auto *BO = dyn_cast<BinaryOperator>(S)) {
      if (BO->isLogicalOp() && Child == BO->getRHS())
        Out.push_back({BO->getLHS(), BO->getOpcode() == BO_LOr});
    }
    return true;
  }
  return false;
}
} // namespace

// True if Target is below a switch inside S: which arm runs is the switch's to say, and
// the PT, keeping only the calls of a statement it cannot run, would run them all.
static bool belowSwitch(const Stmt *S, const Stmt *Target, bool InSwitch = false) {
  if (S == Target)
    return InSwitch;
  InSwitch |= isa<SwitchStmt>(S);
  for (const Stmt *Child : S->children())
    if (Child && belowSwitch(Child, Target, InSwitch))
      return true;
  return false;
}

// An expression the PT can evaluate at U: no calls, only variables it computes.
bool PrefetchPlanner::computable(const Expr *E, const Unit &U) const {
  llvm::SmallVector<const Stmt *, 8> Work{E};
  while (!Work.empty()) {
    const Stmt *S = Work.pop_back_val();
    if (isa<CallExpr>(S) || isa<StmtExpr>(S))
      return false;
    if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
        if (badReason(VD, &U) || (BufferVars.count(VD) && !CopyBuffers.count(VD)))
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

namespace {
void conjunctsOf(const Expr *E, llvm::SmallVectorImpl<const Expr *> &Out) {
  E = E->IgnoreParens();
  if (const auto *BO = dyn_cast<BinaryOperator>(E); BO && BO->getOpcode() == BO_LAnd) {
    conjunctsOf(BO->getLHS(), Out);
    conjunctsOf(BO->getRHS(), Out);
    return;
  }
  Out.push_back(E);
}

bool mentions(const Stmt *S, const VarDecl *VD) {
  if (!S)
    return false;
  if (const auto *DRE = dyn_cast<DeclRefExpr>(S); DRE && DRE->getDecl() == VD)
    return true;
  for (const Stmt *Child : S->children())
    if (mentions(Child, VD))
      return true;
  return false;
}

// No calls, no stores: leaving it out of the PT's condition changes nothing else.
bool sideEffectFree(const Stmt *S) {
  if (isa<CallExpr>(S) || isa<StmtExpr>(S))
    return false;
  if (const auto *BO = dyn_cast<BinaryOperator>(S); BO && BO->isAssignmentOp())
    return false;
  if (const auto *UO = dyn_cast<UnaryOperator>(S); UO && UO->isIncrementDecrementOp())
    return false;
  for (const Stmt *Child : S->children())
    if (Child && !sideEffectFree(Child))
      return false;
  return true;
}
} // namespace

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
    // A bad statement holding a prefetched read is emitted as the prefetch alone (clone
    // calls likewise); a return always stays, so that the PT leaves where the MT does.
    return ancestorsGood(U) &&
           (!U.Bad || hasActiveCall(U) || U.UnitKind == Unit::Jump || handoffAt(U));
  };
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
      if (UseBad && handoffAt(*U))
        continue; // the PT takes the handle: it needs nothing of the statement
      // A clone call needs the global handles the clone reads through.
      for (const CloneCallDecision &C : CloneCalls)
        if (C.Owner == U && (!UseBad || C.Active))
          if (const CloneSummary *S = summaryOf(C.Callee))
            Relevant.insert(S->GlobalHandles.begin(), S->GlobalHandles.end());
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
        if (isa<ReturnStmt>(U->S) || programExitCall(U->S)) {
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

// A local declared before the start without a value (C89: `int *idx;` at the top of
// main) that no statement before the start sets or takes the address of: its value there
// is indeterminate, so the PT owns it like a local of its region, never copied from the MT.
bool PrefetchPlanner::unsetAtStart(const VarDecl *VD) const {
  const Unit *D = Units.declaringUnit(VD);
  if (!D || D->TopIndex >= Start || VD->hasInit() || !VD->hasLocalStorage() ||
      isa<ParmVarDecl>(VD) || !VD->getType()->isScalarType())
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

bool PrefetchPlanner::canExecuteInPt(const Unit &U) const {
  return !U.Bad && ancestorsGood(U);
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
    for (const VarDecl *VD : U.Uses)
      if (BufferVars.count(VD) && !CopyBuffers.count(VD) && MarkBad(U, "uses the data read into " + quoted(VD)))
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
        MarkBad(U, "creates or truncates the file it opens");
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

std::string PrefetchPlanner::checkCloneArgument(const Expr *Arg, ParamRole Role,
                                                IoInterface Iface, const Unit *At) {
  const Expr *E = Arg->IgnoreParenImpCasts();
  auto IsBad = [&](const VarDecl *VD) -> std::string {
    const std::string *Bad = badReason(VD, At);
    if (Bad && !HandleInterface.count(VD))
      return "depends on " + quoted(VD) + ", which " + *Bad;
    if (BufferVars.count(VD) && !CopyBuffers.count(VD))
      return "depends on data read into " + quoted(VD);
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
      Why = "the call is in a switch, which the prefetch thread does not follow";
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
    C.Reason = Why;
    C.Active = Why.empty();
    C.Guards = C.Active ? armGuards(C.Call, U) : std::vector<ArmGuard>();
  }
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
        if (Index == D.Site.Info->BufferArg || Index == D.Site.Info->StatusArg)
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
                Why = "its size or offset depends on data read into " + quoted(VD);
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
    // From a statement the PT cannot run it keeps only the prefetches: a read from the
    // handle's current position is then right only if nothing else in the statement moves
    // that position (`switch (k) { case 0: lseek(fd, ...); return read(fd, ...); }`).
    if (Why.empty() && U.Bad && belowSwitch(U.S, D.Site.Call))
      Why = "it is in a switch, which the prefetch thread does not follow";
    if (Why.empty() && U.Bad && D.Site.Info->UsesPosition)
      for (const IoCallSite &Other : U.IoCalls)
        if (Other.Call != D.Site.Call && Other.Handle == H &&
            Other.HandleField == D.Site.HandleField && Other.Info->Kind != IoKind::Read &&
            Other.Info->Kind != IoKind::Query) {
          Why = "its file position is set by '" + std::string(Other.Info->Name) +
                "' in the same statement, which the prefetch thread cannot run (" + U.BadWhy + ")";
          break;
        }
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
      if (HasClone || U.UnitKind == Unit::Jump)
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
    const CloneSummary *S = summaryOf(C.Callee);
    for (unsigned I = 0; I < C.Call->getNumArgs(); ++I)
      if (S->Params[I] == ParamRole::Handle)
        if (const auto *DRE = dyn_cast<DeclRefExpr>(C.Call->getArg(I)->IgnoreParenImpCasts()))
          if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
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

// Bad statements and read decisions for one start point. Read buffers whose bytes the PT
// needs (an index read first) become copy buffers as long as every read into them is
// prefetched; otherwise their data stays unknown to the PT.
void PrefetchPlanner::analyze(int StartIndex) {
  resetAnalysis();
  Start = StartIndex;
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
    if (!NoCopy.count(B) && declaredInRegion(B) &&
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

bool PrefetchPlanner::plan() {
  Units.forEach([&](const Unit &U) {
    HasGoto |= isa<GotoStmt>(U.S) || isa<IndirectGotoStmt>(U.S) || isa<LabelStmt>(U.S);
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
    for (unsigned I = 0; I < C.Call->getNumArgs(); ++I)
      if (Callee->Params[I] == ParamRole::Handle)
        if (const auto *DRE = dyn_cast<DeclRefExpr>(C.Call->getArg(I)->IgnoreParenImpCasts()))
          if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
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
      Role = P->getType()->isPointerType() && !isStringPointer(P->getType())
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

bool PrefetchPlanner::finishPlan() {

  closeSlice(/*UseBad=*/true, Start);
  // Handles nobody reads after their handoff are not handed over.
  llvm::erase_if(Handoffs, [](const HandoffPoint &H) { return !H.At->InSlice; });
  for (unsigned I = 0; I < Handoffs.size(); ++I)
    Handoffs[I].Slot = I;
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
