// The finished plan of one prefetch thread (main()'s, or a clone of a helper): everything
// its text is made of, decided. The planner builds it once every name the PT's text holds
// is declared (PrefetchPlanner::finishPlan, PlannerFinish.cpp); the verifier checks it
// (PlanVerifier.h) and the planner plans again until it passes; the emitter
// (PrefetchThreadEmitter.h) renders it and asks nothing back. The contract:
// docs/design/plan-contract.md.
//
// Per statement unit, what the PT makes of it (UnitPlan::Form) and what goes with that;
// per I/O call, how it is rewritten (IoCallPlan); per active clone call, the clone it
// calls and the arguments it zeroes (CloneCallPlan); per function, what the MT captures,
// reopens and hands over and what the PT's prologue declares. The plan names the
// program's AST nodes; how they are spelled is the emitter's business.
#ifndef PPIOS_TRANSFORMER_THREADPLAN_H
#define PPIOS_TRANSFORMER_THREADPLAN_H

#include "IoCallTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <string>
#include <vector>

namespace clang {
class CallExpr;
class Expr;
class FieldDecl;
class FunctionDecl;
class VarDecl;
} // namespace clang

namespace ppios {

struct Unit;

// A condition under which a call inside a larger expression runs: `c ? call : x` (c),
// `c ? x : call` (!c), `a && call` (a), `a || call` (!a). A statement the PT cannot run
// keeps such a call only under the conditions the PT can compute.
struct ArmGuard {
  const clang::Expr *Cond;
  bool Negate;
};

// A descriptor, stream or MPI file the MT holds when the PT starts (opened anywhere: in
// main, in a helper, in another file) and the PT reads through: the MT's start block gives
// the PT's copy a handle of its own to the same file at the same position
// (ppios_pt_reopen_*). With Field set, it is that field of the captured struct Var.
struct ReopenedHandle {
  const clang::VarDecl *Var;
  const clang::FieldDecl *Field;
  IoInterface Interface;
};

// The PT's file-scope shadow of a global handle.
std::string shadowName(const clang::VarDecl *VD);

// How the PT rewrites one I/O call of its text.
struct IoCallPlan {
  // A read pre-executed as ppios_prefetch_* (else it is counted, never run).
  bool Prefetched = false;
  bool Copy = false;  // ppios_prefetch_*_copy: the PT gets the bytes into its own buffer
  unsigned Flags = 0; // PPIOS_PF_*
  // Kept from a statement the PT cannot run: the computable conditions of its arm.
  std::vector<ArmGuard> Guards;
  // A formatted read's destinations (argument indices) the PT does not assign: the
  // program's memory, or a value nothing of the PT uses.
  std::vector<unsigned> NullDestinations;
  bool IgnoreStatus = false; // an MPI read's status that is not the PT's own
  // An open whose path the MT copies into the context at the start (the PT never reads
  // a name through the MT's pointers).
  bool CapturePath = false;
};

// An active call into a clone: ppios_pt_<name>(the same arguments, 0 for those listed,
// the sequence counter).
struct CloneCallPlan {
  const clang::CallExpr *Call = nullptr;
  std::string Name;
  std::vector<unsigned> ZeroArgs;
  std::vector<ArmGuard> Guards; // as IoCallPlan::Guards
};

// A handle a statement sets after the PT started, which the MT hands over right after it
// (ppios_mt_handoff_*) and the PT takes in its place (ppios_pt_take_*).
struct HandoffTake {
  const clang::VarDecl *Var;
  IoInterface Interface;
  unsigned Slot;
  bool Global; // a global handle: the PT's is its shadow
};

// A check the PT's text makes of a subscript or a pointer before it uses it (see
// docs/design/pt-confinement.md, "Bounds"): what it stores through lands inside the
// object. Every subscript of an array of constant size is checked (reads too: cheap); a
// store through a pointer of the PT's or a variable-length array, by the object's size
// at run time.
struct BoundGuard {
  enum Kind {
    Elements, // ppios_pt_index(Index, Count): an array of Count elements
    Block,    // ppios_pt_block_index(Base, Index, sizeof *Base): a block of the PT's allocator
    Object,   // ppios_pt_object_index(Base, Index, sizeof *Base): what a clone's pointer
              // parameter points to (a block, or a whole variable: element 0 only)
  } GuardKind = Elements;
  // The subscript, `*` or `->` it checks.
  const clang::Expr *Access = nullptr;
  // The integer the check wraps, spelled in the file (a subscript written as a macro's
  // argument included); null for `*p` and `p->f` (Block, Object), where the check wraps
  // the pointer Pointer itself, at element 0: (p + check(p, 0, sizeof *p)).
  const clang::Expr *Index = nullptr;
  const clang::Expr *Pointer = nullptr;
  uint64_t Count = 0;                   // Elements
  const clang::VarDecl *Base = nullptr; // Block, Object: the pointer, or the array's heap block
};

struct UnitPlan {
  enum Form {
    Outside,   // before the PT's start: not the PT's
    Dropped,   // not run (removed; a switch's labelled statement leaves `;`)
    Counted,   // not followed: a count of its transfers, as if it ran once
    TakesHandles, // the PT takes the handles the MT hands over (Takes)
    Block,     // its statements, each by its own plan
    Header,    // if/switch/loop: the header as written, then its bodies by their plans
    Exit,      // the program ends (or main() goes to its cleanup): ppios_pt_exit()
    Jump,      // break, continue, goto, a return without a value: as written
    Return,    // a return with a value: its kept calls and counts, then `return;`
    CountOnly, // the counts of its transfers (and its Declared names)
    Declares,  // a declaration without initializers: its Declared names, the PT's own
    KeptCalls, // the PT cannot run it: its Declared names, kept calls and counts
    AsWritten, // run as written, its calls rewritten
  } Form = Outside;
  // Counted: its transfers; Return, CountOnly, KeptCalls: its transfers not pre-executed
  // (CountNames: their functions, for the comment).
  unsigned Count = 0;
  std::string CountNames;
  // The variables of a declaration the PT does not run as written that its text names:
  // declared as the PT's own, zeroed.
  std::vector<const clang::VarDecl *> Declared;
  // Its active clone calls, in the planner's order (Return, KeptCalls, AsWritten).
  std::vector<CloneCallPlan> CloneCalls;
  bool KeepsCalls = false; // Return: it has a prefetched read or an active clone call
  std::vector<HandoffTake> Takes;
  // AsWritten declarations: variables whose program cleanup function the PT's copy drops,
  // and those the PT declares but does not use ((void)name, for -Werror builds).
  std::vector<const clang::VarDecl *> StripCleanup, Unused;
  // Header of a loop: conjuncts of its condition the PT replaces by 1 (Speculation).
  llvm::SmallVector<const clang::Expr *, 2> Speculated;
  std::string SpeculatedWhy;
  // A loop the PT runs polls the runtime each iteration; one that runs past an exit it
  // cannot evaluate stays within a window of the MT (ppios_pt_speculate).
  enum PollKind { NoPoll, Poll, Speculate } LoopPoll = NoPoll;
  // Its own text is the PT's (in the slice, computable): subscripts checked, allocations
  // through the runtime.
  bool Guarded = false;
  // The checks of its own text (Guarded), in no particular order.
  std::vector<BoundGuard> Bounds;
};

// A local too big for the PT's stack (PlanVerifier::StackLimit) that the PT keeps in a
// heap block of its own (within PPIOS_CACHE_MB), and every name of the variable in the
// PT's text is (*Name). A local of constant size is allocated once, at the entry of the
// function (ppios_pt_calloc), into the pointer Name. A variable-length array (Sized) is
// allocated where it is declared, at the size it has there (ppios_pt_vla): Name is
// declared there, through a typedef of the array's type.
struct HeapLocal {
  const clang::VarDecl *Var;
  std::string Name;
  bool Sized = false;
};

struct ThreadPlan {
  bool Clone = false;
  int Start = 0; // the first top-level statement the PT runs
  // Why the thread cannot be written (a type it cannot name, ...); empty if it can.
  std::string Unbuildable;
  // main()'s PT: the values the MT copies into the context, the handles it reopens, and
  // the locals declared before the start that the PT's text names without needing their
  // values (declared by the prologue as the PT's own, zeroed), in source order.
  std::vector<const clang::VarDecl *> Captured;
  std::vector<ReopenedHandle> Reopened;
  std::vector<const clang::VarDecl *> PrologueDeclared;
  // main()'s PT: the functions its text calls whose only declarations before main() are
  // in main()'s blocks (`long offset_of(int);`): the thread function, written before
  // main(), declares them at file scope first, in source order.
  std::vector<const clang::FunctionDecl *> BlockFunctions;
  // Global handles: every reference of the PT's text is to its shadow (shadowName).
  llvm::DenseSet<const clang::VarDecl *> GlobalHandles;
  std::vector<HeapLocal> HeapLocals; // in source order
  llvm::DenseMap<const Unit *, UnitPlan> Units;
  llvm::DenseMap<const clang::CallExpr *, IoCallPlan> Calls;

  const UnitPlan &unit(const Unit &U) const;
  // Null for a call the plan has nothing on (a read it does not know is counted).
  const IoCallPlan *call(const clang::CallExpr *Call) const;
  bool prefetched(const clang::CallExpr *Call) const {
    const IoCallPlan *P = call(Call);
    return P && P->Prefetched;
  }
  bool isGlobalHandle(const clang::VarDecl *VD) const;
  const HeapLocal *heapLocal(const clang::VarDecl *VD) const;
};

} // namespace ppios

#endif
