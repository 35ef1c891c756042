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
#ifndef PPIOS_TRANSFORMER_PREFETCHPLANNER_H
#define PPIOS_TRANSFORMER_PREFETCHPLANNER_H

#include "StatementUnits.h"

#include "clang/Basic/SourceLocation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <string>
#include <vector>

namespace ppios {

struct ReadDecision {
  IoCallSite Site;
  Unit *Owner = nullptr;
  bool Prefetched = false;
  unsigned Flags = 0; // PPIOS_PF_*
  bool Copy = false;  // the PT needs the bytes: ppios_prefetch_*_copy into its own buffer
  const clang::VarDecl *TaintSource = nullptr; // not prefetched for want of this buffer's bytes
  std::string Reason;
};

// A descriptor the MT opened before the PT starts: the PT reopens it.
struct ReopenedHandle {
  const clang::VarDecl *Var;
  IoCallSite Open;        // the MT's open call
  bool NeedsPosition;     // the PT restores the MT's file position at the start point
};

class PrefetchPlanner {
public:
  explicit PrefetchPlanner(FunctionUnits &Units) : Units(Units) {}

  // Computes everything; returns false when the function gets no prefetch thread (then
  // every read has a decision with a reason).
  bool plan();

  const std::vector<ReadDecision> &decisions() const { return Decisions; }
  int startIndex() const { return Start; }
  bool inRegion(const Unit &U) const { return U.TopIndex >= Start; }
  const std::vector<const clang::VarDecl *> &captured() const { return Captured; }
  const std::vector<ReopenedHandle> &reopened() const { return Reopened; }
  bool isHandle(const clang::VarDecl *VD) const { return HandleInterface.count(VD); }
  const ReadDecision *decisionFor(const clang::CallExpr *Call) const;
  bool isCountBlock(const Unit &U) const { return CountBlocks.count(&U); }
  unsigned initialSequence() const { return InitialSeq; }
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
  void markBad();
  void decideReads();
  void closeSlice(bool UseBad, int RegionStart);
  void collectCaptures();
  bool canExecuteInPt(const Unit &U) const;
  bool ancestorsGood(const Unit &U) const;
public:
  bool hasPrefetchedRead(const Unit &U) const;
private:
  void include(Unit *U);

  FunctionUnits &Units;
  int Start = 0;
  unsigned InitialSeq = 0;
  std::string Failure;
  std::vector<ReadDecision> Decisions;
  std::vector<const clang::VarDecl *> Captured;
  std::vector<ReopenedHandle> Reopened;
  llvm::DenseMap<const clang::VarDecl *, IoInterface> HandleInterface;
  llvm::DenseSet<const clang::VarDecl *> WrittenHandles, WritableHandles, BufferVars;
  llvm::DenseMap<const clang::VarDecl *, std::string> BadVars; // variable -> why
  llvm::DenseMap<const clang::VarDecl *, const clang::VarDecl *> TaintOf; // bad var -> buffer
  llvm::DenseSet<const Unit *> CountBlocks;
  llvm::DenseSet<const clang::VarDecl *> CopyBuffers; // read buffers whose bytes the PT uses
  std::vector<const Unit *> Approximate;
};

} // namespace ppios

#endif
