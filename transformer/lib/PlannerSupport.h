// Questions about statements and expressions that the planner's analyses share (see
// PrefetchPlanner.h): which variables an expression names, where a call sits in a larger
// expression, what an open may do to its file. Internal to the planner.
#ifndef PPIOS_TRANSFORMER_PLANNERSUPPORT_H
#define PPIOS_TRANSFORMER_PLANNERSUPPORT_H

#include "PrefetchPlanner.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"

#include <string>
#include <vector>

namespace ppios {
namespace slicing {

constexpr unsigned PfAfterWrite = 0x1u; // PPIOS_PF_AFTER_WRITE
constexpr unsigned PfAfterSync = 0x2u;  // PPIOS_PF_AFTER_SYNC

// MPI calls that only ask about the local process: no other rank's data becomes visible.
bool isLocalMpiQuery(llvm::StringRef Name);

// 'name', for remarks.
std::string quoted(const clang::VarDecl *VD);

// Strings (char pointers and arrays of them, like argv) are read-only inputs in practice;
// the PT may read them. Other memory reached through MT pointers may change under it.
bool isStringPointer(clang::QualType T);
// An MPI handle other than a file (MPI_Comm, MPI_Datatype, MPI_Info, ...): a value the PT
// passes on (to its ppios_pt_* calls, which only compare it), never memory it reads.
bool isMpiValueHandle(clang::QualType T);

// An open that may write its file (O_WRONLY/O_RDWR, "w"/"a"/"+", MPI_MODE_WRONLY/RDWR).
bool openMayWrite(const clang::CallExpr *Call, const IoCallInfo &Info, const clang::ASTContext &Ctx);

// An open that may create or truncate its file (O_CREAT/O_TRUNC, "w"/"a",
// MPI_MODE_CREATE): the PT must not run it before the main thread did (it would find no
// file, or the old one).
bool openMayCreate(const clang::CallExpr *Call, const IoCallInfo &Info, const clang::ASTContext &Ctx);

// Reads and writes of the statement (each carries a sequence number).
unsigned countTransfers(const Unit &U);

// The variables a call passes as handles to a clone (parameters the clone reads through),
// with the parameter's index.
llvm::SmallVector<std::pair<unsigned, const clang::VarDecl *>, 2>
cloneHandleArgs(const clang::CallExpr *Call, const CloneSummary &Callee);

// The unit is a loop or holds one.
bool containsLoop(const Unit &U);

// The variable a read stores its bytes into (`buf`, `&x`, `buf + k`), if any.
const clang::VarDecl *bufferOf(const IoCallSite &Site);

// The runtime has ppios_prefetch_<name>_copy for the call (the PT gets the bytes too).
bool hasCopyVariant(const IoCallInfo &Info);

// Target is S or below it.
bool contains(const clang::Stmt *S, const clang::Stmt *Target);

// VD is initialised or assigned from an expression holding Call, somewhere in S.
bool receivesResult(const clang::Stmt *S, const clang::VarDecl *VD, const clang::CallExpr *Call);

// Every variable E names.
void varsIn(const clang::Stmt *E, VarSet &Out);

// Finds Target below S; on the way back up, notes the conditions of the arms it is in.
bool findArm(const clang::Stmt *S, const clang::Stmt *Target, std::vector<ArmGuard> &Out);

// True if Target is below a switch inside S: which arm runs is the switch's to say, and
// the PT, keeping only the calls of a statement it cannot run, would run them all.
bool belowSwitch(const clang::Stmt *S, const clang::Stmt *Target, bool InSwitch = false);

// The operands of a chain of && (a && b && c: a, b, c); E itself if it is none.
void conjunctsOf(const clang::Expr *E, llvm::SmallVectorImpl<const clang::Expr *> &Out);

// S names VD.
bool mentions(const clang::Stmt *S, const clang::VarDecl *VD);

// The generated code can write T outside the function (the context struct, the PT's
// prologue, a clone's parameters): FileScopeType.h finds it a spelling there. A struct of
// the function cannot be named there; a typedef of the function or a `__typeof__` of its
// locals is written as the type it stands for.
bool nameableAtFileScope(const clang::ASTContext &Ctx, clang::QualType T);
// T as written (a type in an expression the PT's text copies: a cast, a sizeof) names
// nothing of the function's own: no typedef, struct or variable-length array of it.
bool nameableAsWritten(clang::QualType T);

// The PT may declare a variable of VD's type as its own (zeroed): a type it can name, of
// a known size.
bool declarableInPt(const clang::VarDecl *VD);

using DeclSet = llvm::SmallPtrSet<const clang::Decl *, 4>;

// The types and enumerations declared inside a function that T names (a typedef, a
// struct, union or enum, through pointers, arrays and typedefs): the PT's text that names
// them needs their declarations.
void localTypesOf(clang::QualType T, DeclSet &Out);
// Those that S names: in the types of the variables it declares, casts, sizeof(type),
// compound literals, and enumerators.
void localTypesIn(const clang::Stmt *S, DeclSet &Out);
// 'name' for remarks: a variable, a type ('rec_t', 'struct rec'), an enumeration.
std::string describe(const clang::Decl *D);

// No calls, no stores: leaving it out of the PT's condition changes nothing else.
bool sideEffectFree(const clang::Stmt *S);

} // namespace slicing
} // namespace ppios

#endif
