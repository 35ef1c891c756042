// Which calls the prefetch thread may make. The PT must have no side effects, so every
// callee is classified once: pure (libc table, or a body of the program's own that stores
// nowhere but its locals), storing only through some pointer arguments (snprintf, stat,
// memcpy, a helper filling *begin/*end), or unsafe (I/O, MPI, output, globals, unknown).
#ifndef PPIOS_TRANSFORMER_SIDEEFFECTS_H
#define PPIOS_TRANSFORMER_SIDEEFFECTS_H

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include <string>
#include <vector>

namespace clang {
class CallExpr;
class Expr;
class FunctionDecl;
class SourceManager;
class Stmt;
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

// What one node of the AST does by itself, apart from its children
// (docs/design/pt-confinement.md, "Every expression is classified"). Every kind of C
// statement and expression is listed: those that do nothing a walker must check, those
// that store (nodeStores says where), calls, and inline assembly. Any other kind (a block
// literal, a pseudo-object, OpenMP, a recovery node, a kind a later clang adds) is
// Unknown, and a walker that meets one refuses what contains it: a kind nobody listed is
// never taken for one that does nothing.
enum class NodeEffect { None, Stores, Calls, Asm, Unknown };
NodeEffect nodeEffect(const clang::Stmt *S);

// Where a node that Stores stores: the lvalues it assigns (`x = `, `x += `, `++x`; va_arg's
// list when va_list is a scalar or a struct), and the pointers it stores through, the way a
// callee stores through an argument (an atomic builtin's object and the pointers it
// returns a value through; va_arg's list when va_list is an array).
struct NodeStores {
  llvm::SmallVector<const clang::Expr *, 2> LValues;
  llvm::SmallVector<const clang::Expr *, 2> Through;
};
NodeStores nodeStores(const clang::Stmt *S);

// The operands of S the program evaluates that S's children do not show: the size
// expressions of the variably modified types S names (a cast, a compound literal,
// sizeof/_Alignof of a type or of an expression, va_arg, the variables and typedefs a
// declaration declares), through pointers, arrays, typedefs and typeof. A VLA type's size
// is computed when the expression or declaration that names it runs.
void sizeExpressions(const clang::Stmt *S, llvm::SmallVectorImpl<const clang::Expr *> &Out);

// Whether S's children are evaluated when S is: not those of sizeof and _Alignof (and
// vec_step) whose operand has no variably modified type.
bool operandsEvaluated(const clang::Stmt *S);

// A node that stores, or one nobody listed, as a remark names it: the atomic builtin as
// the file spells it ("__c11_atomic_fetch_add"), "va_arg", or the kind of the node.
std::string describeNode(const clang::Stmt *S, const clang::SourceManager &SM);

class SideEffectOracle;

// The pointer arguments one call stores through: the callee's StoredArgs, and for a
// formatted output call (printf, snprintf, ...) whose format is not a string literal
// without a %n conversion, every pointer argument after the format (%n stores the count
// so far through one). Known is false when the call may store through something it
// cannot name (a va_list with such a format; an argument past the 32nd): Why says so.
struct CallStores {
  unsigned Args = 0;
  bool Known = true;
  std::string Why;
};
CallStores callStores(const clang::CallExpr *Call, const CalleeEffect &Effect);

// Whether the body this translation unit has for FD is the one its calls run. Not when the
// linker may bind them to another definition: a weak definition (a strong one elsewhere
// wins), an inline definition that is not the function's external definition (gnu_inline
// `extern inline`, a C99 `inline` definition with no `extern` declaration: a call that is
// not inlined runs the external definition of another file). Empty if it is, else why
// not, after "its definition here": "is weak (another file's definition may run instead)".
std::string replaceableDefinition(const clang::FunctionDecl *Definition);

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
