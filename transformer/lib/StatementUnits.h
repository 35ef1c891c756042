// The statement tree of one function, as the slicer sees it: every statement of a block
// is a unit; if/for/while/do are control units whose header (condition, init, increment)
// is analysed separately from their bodies. Each unit knows the variables it defines and
// uses, its I/O calls, and whether running it in the PT would be a side effect.
#ifndef PPIOS_TRANSFORMER_STATEMENTUNITS_H
#define PPIOS_TRANSFORMER_STATEMENTUNITS_H

#include "IoCallTable.h"
#include "SideEffects.h"

#include "clang/AST/Stmt.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include <memory>
#include <string>
#include <vector>

namespace clang {
class ASTContext;
class CallExpr;
class FieldDecl;
class FunctionDecl;
class Stmt;
class SwitchStmt;
class VarDecl;
} // namespace clang

namespace ppios {

using VarSet = llvm::SmallPtrSet<const clang::VarDecl *, 8>;

struct IoCallSite {
  const clang::CallExpr *Call;
  const IoCallInfo *Info;
  const clang::VarDecl *Handle; // the descriptor/stream/file variable, or null
  // For a handle that is a struct field (`g.fd`, `r->fp`): the field; Handle is then the
  // struct or pointer variable it is reached through.
  const clang::FieldDecl *HandleField = nullptr;
};

struct Unit {
  enum Kind { Simple, If, Switch, Loop, Jump, Block } UnitKind = Simple;
  const clang::Stmt *S = nullptr;
  Unit *Parent = nullptr;
  std::vector<Unit *> Children; // Block: statements; If: then [, else]; Switch, Loop: body
  // A statement of a switch's body behind `case`/`default` labels (S is the statement the
  // labels name, the labels stay in the text): removed, it leaves `;` so the labels stay.
  bool Labeled = false;
  // A Jump where the PT ends (ppios_pt_exit): the program ends (exit, abort, MPI_Abort), or
  // main() goes to its cleanup (FunctionUnits::gotoToCleanup).
  bool StopsPt = false;
  int TopIndex = -1;            // index of the top-level statement of the function holding it

  VarSet Defs, Uses;             // of the statement (Simple/Jump) or the header (If/Switch/Loop)
  VarSet TypeUses;               // named only in sizeof: declared, never read
  VarSet PointerStores;          // pointer variables stored through (*p = , p[i] = , p->f = )
  VarSet Allocations;            // variables assigned the result of malloc/calloc
  VarSet DereferencedPointers;   // pointer variables read through (*p, p[i], p->f, strings)
  VarSet BufferVars;             // variables passed as I/O data buffers
  std::vector<IoCallSite> IoCalls;
  std::vector<const clang::CallExpr *> Calls; // every direct call, for PT-safety of callees
  bool Unsafe = false;
  std::string UnsafeWhy;
  bool ContainsMpiInit = false;

  // Slicer results.
  bool Bad = false;  // its values cannot be computed by the PT
  std::string BadWhy;
  const clang::VarDecl *TaintSource = nullptr; // read buffer whose bytes made it bad
  bool InSlice = false;

  bool isControl() const { return UnitKind == If || UnitKind == Switch || UnitKind == Loop; }
  // The loop or switch a `break` in this unit ends, the loop a `continue` goes on with;
  // nullptr for other jumps.
  const Unit *jumpTarget() const;
  // True if Ancestor is this unit or encloses it.
  bool isWithin(const Unit *Ancestor) const;
};

// The parts of an if/switch/for/while/do that its unit analyses itself (init, condition,
// increment), without the bodies; empty for other statements.
std::vector<const clang::Stmt *> headerParts(const clang::Stmt *S);

// The call if S is a statement that ends the program (exit, abort, MPI_Abort, any
// noreturn function): a Jump unit, which the PT turns into ppios_pt_exit().
const clang::CallExpr *programExitCall(const clang::Stmt *S);

// True for a statement that one macro expands to and that runs its parts at most once
// (`CHECK(pread(...));`, `do { ... } while (0)`): the slicer sees it as one statement.
bool writtenAsOneMacro(const clang::Stmt *S);

// Calls F on S and on every statement and expression below it.
template <typename Fn> void forEachStmtIn(const clang::Stmt *S, Fn F) {
  llvm::SmallVector<const clang::Stmt *, 32> Work{S};
  while (!Work.empty()) {
    const clang::Stmt *St = Work.pop_back_val();
    if (!St)
      continue;
    F(St);
    for (const clang::Stmt *Child : St->children())
      Work.push_back(Child);
  }
}

// A switch the slicer follows: a braced body whose `case`/`default` labels all stand at
// its top level (not inside inner statements, as in Duff's device); any other switch is
// one opaque statement.
bool structuredSwitch(const clang::SwitchStmt *SS);

class FunctionUnits {
public:
  FunctionUnits(clang::ASTContext &Ctx, const clang::FunctionDecl *FD, SideEffectOracle &Oracle);

  const clang::FunctionDecl *function() const { return FD; }
  SideEffectOracle &oracle() const { return Oracle; }
  const std::vector<Unit *> &topLevel() const { return Top; }
  const std::vector<std::unique_ptr<Unit>> &all() const { return Units; }
  // Units in source order (parents before children).
  template <typename Fn> void forEach(Fn F) const {
    for (const auto &U : Units)
      F(*U);
  }
  // The unit that declares VD: a declaration statement, or the loop whose `for` header
  // declares it; nullptr for parameters, globals and variables declared inside a
  // statement the slicer sees as one unit.
  const Unit *declaringUnit(const clang::VarDecl *VD) const;

private:
  Unit *build(const clang::Stmt *S, Unit *Parent, int TopIndex);
  void analyze(Unit &U, const clang::Stmt *Part);
  bool gotoToCleanup(const clang::Stmt *S) const;

  clang::ASTContext &Ctx;
  const clang::FunctionDecl *FD;
  SideEffectOracle &Oracle;
  std::vector<std::unique_ptr<Unit>> Units;
  std::vector<Unit *> Top;
};

} // namespace ppios

#endif
