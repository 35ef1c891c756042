// Types the generated code writes outside the function that declares them: the context
// struct and the prefetch thread's prologue (at file scope, or at the entry of the thread
// function, where none of main()'s declarations are visible), a clone's parameters, the
// heap pointers declared at a function's entry, prototypes of functions main() declares
// in a block. Each is spelled by spellAtFileScope, so that it means there what it means
// where the program wrote it; the planner refuses (with a remark) the types for which
// fileScopeType finds no such spelling. Neither planner nor emitter: both use it.
#ifndef PPIOS_TRANSFORMER_FILESCOPETYPE_H
#define PPIOS_TRANSFORMER_FILESCOPETYPE_H

#include "clang/AST/Type.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace clang {
class ASTContext;
}

namespace ppios {

// T without the spellings that depend on the function's scope: `__typeof__` (of an
// expression, which may name the function's locals, or of a type), `__auto_type`, and the
// function's own typedefs are replaced by the types they stand for; the typedefs and tags
// of file scope stay as written (size_t, FILE, MPI_File). A null type if T cannot be named
// outside its function: a struct, union or enum declared in a function, an anonymous one
// without a file-scope typedef, a variable-length array.
clang::QualType fileScopeType(const clang::ASTContext &Ctx, clang::QualType T);

// A declaration of Name (a type name when Name is empty) with type T, as written outside
// the function: T through fileScopeType; T as written where it has none (the planner
// refused those where the spelling is outside the function).
std::string spellAtFileScope(const clang::ASTContext &Ctx, clang::QualType T,
                             llvm::StringRef Name);

} // namespace ppios

#endif
