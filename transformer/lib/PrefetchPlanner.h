// Backward slicing of one function (main) for its prefetch thread.
//
// 1. The PT starts after the last top-level statement that the reads depend on and that
//    the PT cannot execute itself (MPI calls, functions with unknown side effects, and
//    never before MPI_Init). Everything computed before that point is captured by value.
// 2. After the start point, a forward pass marks statements whose values the PT cannot
//    compute ("bad"): unsafe calls, data read from files, memory of the main thread reached
//    through pointers, results of writes, and everything under a bad condition.
// 3. A read is prefetched if its descriptor, size, offset and enclosing conditions are
//    all computable; otherwise it gets a remark saying why.
// 4. A backward closure from the prefetched reads (plus the writes and unprefetched reads
//    that the PT only counts, plus opens/seeks/closes of their descriptors and the jumps
//    that decide whether they run) gives the statements the PT executes.
// 5. Every name the PT's text holds (a variable, even only in sizeof or as an open's
//    result; a local type or enumeration) is declared there: its declaration joins the
//    slice (as a zeroed declaration of the PT's own if the PT cannot run it), or it is
//    captured or declared by the PT's prologue; a name the PT cannot declare makes the
//    statements naming it ones the PT does not run, and its reads get a remark
//    (PrefetchPlanner::finishPlan).
// 6. The finished plan (ThreadPlan.h, written down by PlannerFinish.cpp) is checked
//    against the PT's confinement (PlanVerifier.h): a statement, a kept read or clone
//    call, or a copy buffer that breaks it is refused, and the function planned again
//    without it (finishPlan), before anything is emitted. The emitter renders that plan
//    and nothing else.
//
// One analysis a file: PlannerHandles.cpp (descriptors, handoffs), PlannerValues.cpp
// (bad statements and values, owned memory, speculation, arm guards), PlannerClones.cpp
// (calls into clones, clone summaries), PlannerCaptures.cpp (the start's copies and
// reopens), PlannerFinish.cpp (the ThreadPlan); PrefetchPlanner.cpp runs them for each start point and decides the reads;
// PlannerSupport.h holds the expression queries they share.
#ifndef PPIOS_TRANSFORMER_PREFETCHPLANNER_H
#define PPIOS_TRANSFORMER_PREFETCHPLANNER_H

#include "StatementUnits.h"
#include "ThreadPlan.h"

#include "clang/AST/Decl.h"

#include "clang/Basic/SourceLocation.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <string>
#include <vector>

namespace ppios {

struct Violation; // PlanVerifier.h

struct ReadDecision {
  IoCallSite Site;
  Unit *Owner = nullptr;
  bool Prefetched = false;
  unsigned Flags = 0; // PPIOS_PF_*
  bool Copy = false;  // the PT needs the bytes: ppios_prefetch_*_copy into its own buffer
  const clang::VarDecl *TaintSource = nullptr; // not prefetched for want of this buffer's bytes
  std::string Reason;
  std::vector<ArmGuard> Guards; // computable conditions of its arm in its statement
};

// A handle of main() that a top-level statement the PT does not run sets after the PT
// started (`stream_open(&fh, ...)`): the MT hands the PT a reopened copy right after it
// (ppios_mt_handoff_*), and the PT takes it at the same statement (ppios_pt_take_*).
struct HandoffPoint {
  const Unit *At;
  const clang::VarDecl *Var;
  IoInterface Interface;
  unsigned Slot;
};

// What a prefetch-thread clone of a function (ppios_pt_<name>) does with each parameter,
// so that its callers know what to pass (see Transformer.cpp).
enum class ParamRole {
  Unused, // not needed by the clone: the caller passes 0
  Value,  // a value the clone computes with: must be computable in the caller's PT
  Handle, // a descriptor/stream the clone reads through: the caller passes its PT handle
  Deref,  // a pointer the clone reads through: must point to memory the PT owns
};

// A loop whose condition the PT runs without the conjuncts it cannot compute
// (`while (!stop && (n = read(fd, buf, size)) > 0)`, stop set from the data read): it
// prefetches as if the loop goes on, bounded by the conjuncts it keeps, the end of the
// file and the cache budget, instead of repeating the program's work on every byte to
// find out. The prefetches past the real exit are wasted, never wrong.
struct Speculation {
  llvm::SmallVector<const clang::Expr *, 2> Conjuncts; // left out of the PT's condition
  llvm::SmallPtrSet<const clang::VarDecl *, 2> Vars;   // what they depend on
  std::string Why;
};

struct CloneSummary {
  std::string Name; // ppios_pt_<name>
  std::vector<ParamRole> Params;
  std::vector<IoInterface> HandleInterfaces; // per parameter, for Handle
  // Globals the clone (and the clones it calls) read in place: the MT must not change them
  // once the PT started.
  llvm::SmallVector<const clang::VarDecl *, 4> Globals;
  int Score = 0; // how much it prefetches (reads in loops count more)
  // Global handles the clone (and the clones it calls) reads through (their PT shadows):
  // the caller must have them current where it calls.
  llvm::SmallVector<const clang::VarDecl *, 2> GlobalHandles;
};

using CloneTable = llvm::DenseMap<const clang::FunctionDecl *, CloneSummary>;

// Facts about the whole translation unit the planner needs for clones.
struct TranslationUnitFacts {
  CloneTable Clones;                                  // callees cloned so far
  llvm::DenseMap<const clang::FieldDecl *, IoInterface> HandleFields;
  llvm::DenseSet<const clang::VarDecl *> GlobalsWrittenOutsideMain;
  // Global handles: file-scope descriptors (static int fd, FILE *, MPI_File) the file only
  // sets from opens (or closes). The PT never touches them: every PT reference is to a
  // shadow of its own (shadowName), reopened at the start or handed over after the main()
  // statement that sets it. Descriptor-typed globals that are not: why, for remarks.
  llvm::DenseMap<const clang::VarDecl *, IoInterface> GlobalHandles;
  llvm::DenseMap<const clang::VarDecl *, std::string> GlobalHandleProblems;
  bool isGlobalHandle(const clang::VarDecl *VD) const {
    return GlobalHandles.count(VD->getCanonicalDecl());
  }
  // A function other than main() synchronizes with other processes (isMpiSynchronization):
  // after the PT starts, bytes another rank writes may change under the PT's copy reads.
  bool SynchronizesOutsideMain = false;
};

// True for MPI calls after which data another process wrote before may be visible:
// collectives, receives, waits and tests, file syncs, one-sided synchronization. Local
// queries (MPI_Comm_rank, MPI_Wtime, MPI_Get_count...) are not.
bool isMpiSynchronization(const clang::CallExpr *Call);

// A call in the slice to a function with a clone.
struct CloneCallDecision {
  const clang::CallExpr *Call;
  Unit *Owner;
  const clang::FunctionDecl *Callee;
  bool Active = false;
  std::string Reason;
  std::vector<ArmGuard> Guards; // computable conditions of its arm in its statement
};

class PrefetchPlanner {
  friend class PlanVerifier; // reads the plan's notion of owned memory (heapOwned...)

public:
  explicit PrefetchPlanner(FunctionUnits &Units) : Units(Units) {}
  // With Facts, calls to cloned functions are pre-executed through their clones. With
  // AsClone, the function is planned as a clone: the PT enters it at its first statement
  // with its parameters, and the caller's sequence counter.
  PrefetchPlanner(FunctionUnits &Units, const TranslationUnitFacts *Facts, bool AsClone)
      : Facts(Facts), AsClone(AsClone), Units(Units) {
    Finished.Clone = AsClone;
  }

  // Computes everything; returns false when the function gets no prefetch thread (then
  // every read has a decision with a reason).
  bool plan();
  // The finished plan, verified (after plan() returned true): all the emitter renders.
  const ThreadPlan &threadPlan() const { return Finished; }

  const std::vector<ReadDecision> &decisions() const { return Decisions; }
  int startIndex() const { return Start; }
  bool inRegion(const Unit &U) const { return U.TopIndex >= Start; }
  const std::vector<const clang::VarDecl *> &captured() const { return Captured; }
  const std::vector<ReopenedHandle> &reopened() const { return Reopened; }
  const std::vector<HandoffPoint> &handoffs() const { return Handoffs; }
  const HandoffPoint *handoffAt(const Unit &U) const;
  std::vector<const HandoffPoint *> handoffsAt(const Unit &U) const;
  const TranslationUnitFacts *facts() const { return Facts; }
  bool isHandle(const clang::VarDecl *VD) const { return HandleInterface.count(VD); }
  const ReadDecision *decisionFor(const clang::CallExpr *Call) const;
  bool isCountBlock(const Unit &U) const { return CountBlocks.count(&U); }
  // Units after which the PT's sequence numbers are only estimates, for a remark.
  const std::vector<const Unit *> &approximateSequence() const { return Approximate; }
  std::string failure() const { return Failure; }

private:
  void collectHandles();
  int chooseStart(int FirstRead);
  void resetAnalysis();
  void analyze(int StartIndex);
  bool heapOwned(const clang::VarDecl *VD) const;
  bool declaredInRegion(const clang::VarDecl *VD) const;
  bool unsetAtStart(const clang::VarDecl *VD) const;
  void markBad();
  std::string pathWrittenAfterStart(const IoCallSite &Open) const;
  void decideReads();
  // Why a read from its handle's position cannot be pre-executed because a statement the
  // PT does not follow moves that position before it (empty: nothing does).
  std::string positionMovedBehind(const ReadDecision &R) const;
  bool eligibleForSlice(const Unit &U, bool UseBad, int RegionStart) const;
  void closeSlice(bool UseBad, int RegionStart);
  void closeOver(bool UseBad, int RegionStart);
  void addCountBlocks();
  void namedIn(const clang::Stmt *S, VarSet &Out) const;
  // The first variable a statement of the slice names that the PT would not have
  // declared, and why (null if none).
  const clang::Decl *undeclaredName(std::string &Why) const;
  const Unit *typeDeclaringUnit(const clang::Decl *D) const;
  // Variables and local types the PT cannot declare (see finishPlan): every statement
  // naming one is one the PT does not run, every read whose operands name one is left
  // alone.
  llvm::DenseMap<const clang::Decl *, std::string> Undeclarable;
  bool UndeclarableTypes = false;
  VarSet NamedVars;
  const std::string *undeclarable(const clang::Stmt *S, const clang::Decl **Which) const;
  void collectCaptures();
  bool synchronizesAfterStart() const;
  std::string calleeGlobalProblem(const clang::CallExpr *Call) const;
  bool spelledInFile(const clang::CallExpr *Call) const;
  bool canExecuteInPt(const Unit &U) const;
  std::vector<ArmGuard> armGuards(const clang::CallExpr *Call, const Unit &U) const;
  bool speculate(const Unit &U, const clang::VarDecl *VD, const std::string &Why);
  bool computable(const clang::Expr *E, const Unit &U) const;
  bool droppedExitHolds(const Unit &Loop) const;
  bool endsByCondition(const Unit &Loop) const;
  bool ancestorsGood(const Unit &U) const;
public:
  bool hasPrefetchedRead(const Unit &U) const;
  // A prefetched read or an active clone call: a bad statement holding one is emitted as
  // those calls alone.
  bool hasActiveCall(const Unit &U) const;
  const std::vector<CloneCallDecision> &cloneCalls() const { return CloneCalls; }
  // Conjuncts of a loop's condition the PT leaves out (see Speculation).
  const struct Speculation *speculationFor(const Unit &U) const;
  // The PT runs the loop past an exit of the program's it cannot evaluate: conjuncts of
  // its condition it leaves out, a break/return under a statement that depends on the
  // bytes read, or every exit of a loop without a condition. Such a loop holds the PT
  // within a window of the MT (ppios_pt_speculate).
  bool speculates(const Unit &Loop) const;
  const CloneCallDecision *cloneCallFor(const clang::CallExpr *Call) const;
  // The variables the PT's text of U names (its header for a control unit, its kept calls
  // for a statement the PT cannot run, nothing for a handoff or a dropped return value).
  // Every one is declared in the PT: captured or declared by its prologue (declared
  // before the start), declared by a statement the slice keeps, or the statement naming
  // it is one the PT does not run (see finishPlan).
  void namedBy(const Unit &U, VarSet &Out) const;
  // A declaration statement in the slice that the PT does not run as written (it cannot
  // run it, or it keeps only its I/O's count): it declares its variables as its own,
  // zeroed, so that the statements that name them compile.
  bool declaresOnly(const Unit &U) const;
  // VD is named by the PT's text (namedBy of a statement of the slice).
  bool named(const clang::VarDecl *VD) const { return NamedVars.count(VD) > 0; }
  // The types and enumerations declared in the function that the PT's text of U names.
  void typesNamedBy(const Unit &U, llvm::SmallPtrSet<const clang::Decl *, 4> &Out) const;
  const CloneSummary *summaryOf(const clang::FunctionDecl *Callee) const;
  bool isClone() const { return AsClone; }
  // The clone's summary (AsClone, after plan() returned true).
  CloneSummary summarize() const;
  int score() const;
private:
  void include(Unit *U);
  void decideCloneCalls();
  bool planClone();
  bool finishPlan();
  // The slice's names, handoffs and captures, once every name is declared.
  void completePlan();
  // The ThreadPlan of the completed slice (PlannerFinish.cpp), for the verifier and then
  // the emitter.
  void buildThreadPlan();
  UnitPlan unitPlan(const Unit &U) const;
  std::vector<CloneCallPlan> activeCloneCalls(const Unit &U) const;
  bool usedElsewhere(const clang::VarDecl *VD, const Unit &Self) const;
  bool capturedOnly(const clang::Expr *E) const;
  bool pathCaptured(const IoCallSite &Site) const;
  std::string unbuildable(const ThreadPlan &P) const;
  std::vector<const clang::FunctionDecl *> blockFunctions() const;
  // Why the PT cannot keep VD in a heap block of its own (empty if it can): every name of
  // it in the PT's text becomes (*block), so each must be spelled in the file.
  std::string heapUnplaceable(const clang::VarDecl *VD) const;
  void placeBigLocals(ThreadPlan &P) const;
  // The checks of the PT's subscripts and pointers (PlannerBounds.cpp).
  void planBounds(ThreadPlan &P) const;
  BoundGuard boundOf(const clang::Expr *Access, const ThreadPlan &P) const;
  ThreadPlan Finished;
  // What the verifier (PlanVerifier.h) refused: statements the PT may not run as written,
  // and reads or clone calls it may not keep from a statement it cannot run (-> why).
  // Kept across analyses, like Undeclarable. False if nothing new was refused.
  llvm::DenseMap<const Unit *, std::string> RefusedUnits;
  llvm::DenseMap<const clang::CallExpr *, std::string> RefusedCalls;
  // Read buffers the PT may not copy the bytes into (not memory it owns).
  llvm::DenseMap<const clang::VarDecl *, std::string> RefusedCopies;
  // " data read into 'b'", and why the PT has no copy of it when the verifier said so.
  std::string dataReadInto(const clang::VarDecl *VD) const;
  bool refuse(const std::vector<Violation> &Found);
  std::string checkCloneArgument(const clang::Expr *Arg, ParamRole Role, IoInterface Iface,
                                 const Unit *At);
  bool ptOwnedPointer(const clang::VarDecl *VD) const;
  bool plainPointee(const clang::VarDecl *VD) const;
  std::string cloneGlobalProblem(const clang::VarDecl *VD, bool Store) const;
  void activeOperands(const Unit &U, VarSet &Out) const;
  const TranslationUnitFacts *Facts = nullptr;
  bool AsClone = false;
  std::vector<CloneCallDecision> CloneCalls;
  llvm::DenseSet<const clang::VarDecl *> DerefParams; // clone: parameters read through

  FunctionUnits &Units;
  int Start = 0;
  std::string Failure;
  std::vector<ReadDecision> Decisions;
  std::vector<const clang::VarDecl *> Captured;
  std::vector<ReopenedHandle> Reopened;
  std::vector<HandoffPoint> Handoffs;
  llvm::DenseMap<const clang::VarDecl *, IoInterface> HandleInterface;
  llvm::DenseSet<const clang::VarDecl *> WrittenHandles, WritableHandles;
  // Variables reads store file data into (buffers, destinations), with the last top-level
  // statement that does; BufferVars, those of them the reads after the start point write
  // (before it, the PT gets the MT's values: they are captured, not data).
  llvm::DenseMap<const clang::VarDecl *, int> LastBufferWrite;
  llvm::DenseSet<const clang::VarDecl *> BufferVars;
  // Descriptor fields this function writes through (the MT's writes invalidate the cache
  // anyway; the flag only orders a read after them).
  llvm::DenseSet<const clang::FieldDecl *> WrittenFields;
  // Handles set in the PT's region by a statement the PT does not run (-> why).
  llvm::DenseMap<const clang::VarDecl *, std::string> UnsafeHandles;
  std::string fieldHandleProblem(const IoCallSite &Site, const Unit *At);
  void collectUnsafeHandles();
  // Variables the PT cannot compute: each bad statement that sets one, and why. A use
  // sees a bad definition only if that can run before it (earlier in the function, or in
  // a loop around both), unless the function has goto.
  struct BadDef {
    const Unit *At;
    std::string Why;
  };
  llvm::DenseMap<const clang::VarDecl *, std::vector<BadDef>> BadVars;
  bool HasGoto = false;
  // Where main()'s labels are (any computed goto counts as a label at the start): a
  // statement after none of them runs at most once per run of its loops.
  llvm::SmallVector<clang::SourceLocation, 4> LabelLocs;
  bool gotoMayRepeat(const Unit &U) const;
  bool reaches(const Unit *Def, const Unit *Use) const;
  const std::string *badReason(const clang::VarDecl *VD, const Unit *Use) const;
  llvm::DenseMap<const clang::VarDecl *, const clang::VarDecl *> TaintOf; // bad var -> buffer
  llvm::DenseSet<const Unit *> CountBlocks;
  llvm::DenseSet<const clang::VarDecl *> CopyBuffers; // read buffers whose bytes the PT uses
  std::vector<const Unit *> Approximate;
  llvm::DenseMap<const Unit *, Speculation> Speculations;
};

} // namespace ppios

#endif
