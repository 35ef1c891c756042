// The prefetch thread's confinement, checked on the finished plan before anything is
// emitted (docs/design/pt-confinement.md). The planner decides what the PT runs and writes
// it down in a ThreadPlan (ThreadPlan.h); this pass reads that plan, statement by
// statement, as the emitter will render it, and checks two rules on every expression of
// it:
//
// - stores: every store goes to memory the PT owns: its own locals and copies (locals and
//   parameters of the function, main()'s captured values and prologue declarations, the
//   shadows of global handles, its own statics), and blocks it allocated (ppios_pt_malloc,
//   or a clone's pointer parameter its caller checked). Never a program global, a
//   function-local static of the program, or memory behind a pointer the PT did not
//   allocate; also not through an argument a callee stores through (memcpy, snprintf...).
// - calls: the runtime (the I/O calls the emitter renames, malloc and free), libc functions
//   of SideEffectOracle's table, active calls into clones (verified on their own plans),
//   and program helpers the oracle finds confined (no stores outside their locals and
//   pointer parameters, no inline assembly, no cleanup function with effects). Nothing else.
//
// - bounds: every subscript, `*` and `->` on a store's way to its object has a check in the
//   plan (UnitPlan::Bounds) that keeps it inside the object (PlanVerifierBounds.cpp).
//
// Every node of what the PT evaluates is classified (nodeEffect, SideEffects.h): stores
// that are no assignment (atomic builtins, va_arg) are checked where they land, and a
// kind nobody listed is refused. What it evaluates includes the sizes of the variably
// modified types it names (sizeof(double[f()]) calls f), and nothing of an operand of
// sizeof or _Alignof whose type is not one.
//
// Also: no inline assembly anywhere in a function the PT runs a clone of; no local bigger
// than StackLimit and no variable-length array on the PT's stack (the plan keeps such
// locals in the PT's heap, ThreadPlan::HeapLocals); and no program cleanup function on a declaration the PT copies (the emitter strips one written in the
// file, UnitPlan::StripCleanup; one that comes from a macro is refused).
//
// A violation names where it is: a statement the PT would run as written (the planner then
// treats it as one the PT cannot run, so the reads that need it get a remark), or the
// operands of a read or clone call the PT keeps from a statement it cannot run (that read
// or call is left alone). The planner plans again until the plan passes (finishPlan).
#ifndef PPIOS_TRANSFORMER_PLANVERIFIER_H
#define PPIOS_TRANSFORMER_PLANVERIFIER_H

#include "PrefetchPlanner.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <string>
#include <vector>

namespace clang {
class ASTContext;
class CallExpr;
class Expr;
class Stmt;
class VarDecl;
} // namespace clang

namespace ppios {

struct Violation {
  enum Scope {
    Statement, // Unit may not run as written
    KeptCall,  // Call (a prefetched read or an active clone call) may not be kept
    Function,  // nothing of the function may run in the PT (a clone with inline assembly)
    CopyBuffer, // the PT may not copy a read's bytes into Buffer (it prefetches without)
  } Where = Statement;
  const Unit *At = nullptr;
  const clang::CallExpr *Call = nullptr;
  const clang::VarDecl *Buffer = nullptr;
  // A verb phrase about the statement or operand ("stores to global 'g' (...)"), so that it
  // reads after "which" and "a condition that" in the remarks of the reads it costs.
  std::string Why;
};

class PlanVerifier {
public:
  // Plan is Planner's finished plan; what memory the PT owns (heap blocks, a clone's
  // pointer parameters) is the planner's to say.
  PlanVerifier(const ThreadPlan &Plan, const PrefetchPlanner &Planner);
  std::vector<Violation> verify();

  // The most a local of the PT may take on its stack. The PT runs on a thread stack of
  // glibc's default size, fixed when the program starts: 2 MiB under `ulimit -s
  // unlimited`, and never what a program that raises RLIMIT_STACK itself gets for its
  // main thread; its own frames and the runtime's calls need their share. A bigger local
  // lives in the PT's heap, within PPIOS_CACHE_MB.
  static constexpr uint64_t StackLimit = 64 * 1024;
  // Bytes a local would take on the PT's stack: a non-static local of constant size;
  // Unbounded for a variable-length array, whose size no limit can be checked against
  // before it runs (it lives in the PT's heap too, sized where it is declared); 0 for
  // any other variable.
  static constexpr uint64_t Unbounded = UINT64_MAX;
  static uint64_t stackBytes(const clang::VarDecl *VD);
  // What a local too big for the PT's stack takes, for a remark: "N bytes", or "sized
  // only when it runs".
  static std::string stackSize(const clang::VarDecl *VD);
  static const char *const HeapRule;

  // A cleanup attribute the emitter can remove from the PT's copy of a declaration: written
  // in the main file itself, not produced by a macro.
  static bool strippableCleanup(const clang::VarDecl *VD);

  // Bounds (PlanVerifierBounds.cpp): the subscripts and dereferences of S's stores (the
  // left side of an assignment, the operand of ++ or --) that need a check to land inside
  // their object: every one on the store's way to its lvalue (`a[i].f[j]`: both), but a
  // constant subscript of an array of constant size within it, and `*&x`. The plan
  // guards them (UnitPlan::Bounds) and the verifier refuses a store it cannot.
  static void forEachStoreAccess(const clang::Stmt *S, const clang::ASTContext &Ctx,
                                 llvm::function_ref<void(const clang::Expr *)> F);
  // The part of E a check can wrap in the PT's text: E, or inside the parentheses and
  // implicit casts a macro's body puts around its argument, the argument as written in
  // the file, in one piece; null if there is none.
  static const clang::Expr *spelledOperand(const clang::Expr *E, const clang::ASTContext &Ctx);
  static const char *const BoundsRule;

private:
  void verifyUnit(const Unit &U);
  void verifyKeptCalls(const Unit &U);
  void verifyOwnDeclarations();
  // Checks what the PT evaluates of S; the first problem, or empty.
  std::string checkRuns(const clang::Stmt *S, const Unit &U, bool AsWritten);
  std::string checkCall(const clang::CallExpr *Call, const Unit &U, bool AsWritten);
  std::string checkStore(const clang::Expr *LValue);
  std::string checkDestination(const clang::Expr *Arg, const std::string &Callee);
  std::string checkPointer(const clang::Expr *Pointer);
  bool ownedVariable(const clang::VarDecl *VD) const;
  std::string unallocated(const clang::VarDecl *VD) const;
  // Bounds (PlanVerifierBounds.cpp).
  void verifyBounds(const Unit &U);
  std::string unboundedStore(const clang::Expr *Access) const;

  const ThreadPlan &Plan;
  const PrefetchPlanner &Planner;
  FunctionUnits &Units;
  llvm::DenseMap<const clang::CallExpr *, const CloneCallPlan *> CloneCalls; // active ones
  std::vector<Violation> Found;
};

} // namespace ppios

#endif
