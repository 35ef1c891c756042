// Which calls the prefetch thread may make. The PT must have no side effects, so every
// callee is classified once: pure (libc table, or a body of the program's own that stores
// nowhere but its locals), storing only through some pointer arguments (snprintf, stat,
// memcpy, a helper filling *begin/*end), or unsafe (I/O, MPI, output, globals, unknown).
#ifndef PPIOS_TRANSFORMER_SIDEEFFECTS_H
#define PPIOS_TRANSFORMER_SIDEEFFECTS_H

#include "llvm/ADT/DenseMap.h"
#include <string>
#include <vector>

namespace clang {
class Expr;
class FunctionDecl;
class VarDecl;
} // namespace clang

namespace ppios {

struct CalleeEffect {
  enum Kind { Pure, StoresThroughArgs, Unsafe } Effect = Unsafe;
  unsigned StoredArgs = 0; // bit i: the callee may store through pointer argument i
  // StoredArgs names every pointer argument the callee may store through, even when it is
  // Unsafe for other reasons (a helper that reads through r->fp leaves *r alone).
  bool StoresKnown = true;
  std::string Why;         // for Unsafe: what makes it so, for remarks
  // The writable globals of this file the body reads, directly or through its callees: a
  // PT calling it reads the main thread's current state (which may be freed, or not set yet).
  std::vector<const clang::VarDecl *> GlobalsRead;
  // The name of a global pointer among them, the first one met (kept across files, unlike
  // GlobalsRead): through it the body reads memory the main thread may free.
  std::string ReadsGlobalPointer;
  // The globals of this file the body may set, directly or through its callees (stores,
  // `&g` passed anywhere: MPI_File_open(..., &g)), even when it is Unsafe: a statement
  // calling it sets them (global handles, see Transformer.cpp).
  std::vector<const clang::VarDecl *> GlobalsStored;
};

// Where an assignment or a pointer store lands.
struct StoreTarget {
  enum Kind { Variable, ThroughPointer, Unknown } Target = Unknown;
  const clang::VarDecl *Var = nullptr;     // Variable: the variable (or array/struct) stored to
  const clang::Expr *Pointer = nullptr;    // ThroughPointer: the pointer expression
};

// Classifies an lvalue: `x`, `s.f`, `a[i]` (array) are stores to a variable; `*p`, `p->f`,
// `p[i]` (pointer) are stores through a pointer.
StoreTarget classifyStore(const clang::Expr *LValue);

// NULL or 0 written as a pointer argument: a callee stores nothing through it.
bool isNullPointer(const clang::Expr *Arg);

// The variable `&v` or an array `v` names, if Arg is one of those (argument passed to a
// storing callee).
const clang::VarDecl *addressedVariable(const clang::Expr *Arg);

// The local variable `v` of a status argument `&v`: the PT keeps its own copy of it, which
// its prefetch of the read sets to the predicted outcome. Any other status expression
// (a global, an array element, a pointer) is left to the MT: the PT passes
// MPI_STATUS_IGNORE instead.
const clang::VarDecl *ptOwnStatus(const clang::Expr *Arg);

// The local arithmetic variable `v` of a formatted read's destination `&v` (fscanf's
// `&rows`): the PT keeps its own copy, which its own scan of the same input assigns, so
// a loop bound read from a header is a value the PT computes. Any other destination
// (an array element, a global, through a pointer) is the program's memory: the PT's
// call suppresses that conversion.
const clang::VarDecl *ptOwnScalar(const clang::Expr *Arg);

class SideEffectOracle {
public:
  CalleeEffect classify(const clang::FunctionDecl *Callee);
  // What another translation unit found out about a function this one only declares.
  void seed(const clang::FunctionDecl *Callee, const CalleeEffect &Effect);

private:
  CalleeEffect analyzeBody(const clang::FunctionDecl *FD);
  llvm::DenseMap<const clang::FunctionDecl *, CalleeEffect> Cache;
};

} // namespace ppios

#endif
