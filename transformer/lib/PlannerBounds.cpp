// The checks of the PT's subscripts and pointers (ThreadPlan.h, BoundGuard; see
// docs/design/pt-confinement.md, "Bounds"): which the PT's text makes, and of what.
#include "PlanVerifier.h"
#include "PrefetchPlanner.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Expr.h"
#include "llvm/ADT/DenseSet.h"

using namespace clang;

namespace ppios {

namespace {

const VarDecl *variableOf(const Expr *E) {
  if (const auto *DRE = dyn_cast<DeclRefExpr>(E->IgnoreParenImpCasts()))
    return dyn_cast<VarDecl>(DRE->getDecl());
  return nullptr;
}

bool isZero(const Expr *E, const ASTContext &Ctx) {
  std::optional<llvm::APSInt> V = E->getIntegerConstantExpr(Ctx);
  return V && V->isZero();
}

} // namespace

// The check of one access, if the PT's text can make one (Guard.Access is null if not).
BoundGuard PrefetchPlanner::boundOf(const Expr *Access, const ThreadPlan &P) const {
  const ASTContext &Ctx = Units.function()->getASTContext();
  BoundGuard G;
  // A pointer the PT's own allocator alone sets, a variable-length array (the PT keeps
  // each in a block of its heap), or a clone's pointer parameter: the kind of check, if any.
  auto PointerKind = [&](const VarDecl *VD, const Expr *Index) -> int {
    if (!VD)
      return -1;
    if (VD->getType()->isVariableArrayType()) {
      const HeapLocal *H = P.heapLocal(VD);
      return H && H->Sized ? BoundGuard::Block : -1;
    }
    if (!VD->getType()->isPointerType())
      return -1;
    if (heapOwned(VD))
      return BoundGuard::Block;
    if (AsClone && isa<ParmVarDecl>(VD) && (!Index || isZero(Index, Ctx)))
      return BoundGuard::Object;
    return -1;
  };
  auto Wrap = [&](const Expr *Index) { return PlanVerifier::spelledOperand(Index, Ctx); };
  auto Set = [&](int Kind, const Expr *Index, const Expr *Pointer, const VarDecl *Base,
                 uint64_t Count) {
    if (Kind < 0 || (Index && !(Index = Wrap(Index))) ||
        (Pointer && !(Pointer = Wrap(Pointer))))
      return;
    G.GuardKind = static_cast<BoundGuard::Kind>(Kind);
    G.Access = Access;
    G.Index = Index;
    G.Pointer = Pointer;
    G.Base = Base;
    G.Count = Count;
  };
  if (const auto *AS = dyn_cast<ArraySubscriptExpr>(Access)) {
    const Expr *Base = AS->getBase()->IgnoreParenImpCasts();
    if (const auto *CA = dyn_cast_or_null<ConstantArrayType>(Base->getType()->getAsArrayTypeUnsafe()))
      Set(BoundGuard::Elements, AS->getIdx(), nullptr, nullptr, CA->getSize().getZExtValue());
    else
      Set(PointerKind(variableOf(Base), AS->getIdx()), AS->getIdx(), nullptr, variableOf(Base), 0);
    return G;
  }
  const Expr *Pointer = nullptr;
  if (const auto *UO = dyn_cast<UnaryOperator>(Access))
    Pointer = UO->getSubExpr();
  else if (const auto *ME = dyn_cast<MemberExpr>(Access))
    Pointer = ME->getBase();
  if (!Pointer)
    return G;
  Pointer = Pointer->IgnoreParens();
  // `*(p + i)`, `*(i + p)`: the integer is checked, as in p[i].
  if (const auto *BO = dyn_cast<BinaryOperator>(Pointer); BO && BO->getOpcode() == BO_Add) {
    bool LeftPointer = BO->getLHS()->getType()->isPointerType();
    const Expr *Base = (LeftPointer ? BO->getLHS() : BO->getRHS())->IgnoreParenImpCasts();
    const Expr *Index = LeftPointer ? BO->getRHS() : BO->getLHS();
    if (const auto *CA = dyn_cast_or_null<ConstantArrayType>(Base->getType()->getAsArrayTypeUnsafe()))
      Set(BoundGuard::Elements, Index, nullptr, nullptr, CA->getSize().getZExtValue());
    else if (int Kind = PointerKind(variableOf(Base), Index); Kind == BoundGuard::Block)
      Set(Kind, Index, nullptr, variableOf(Base), 0);
    return G;
  }
  // `*p`, `p->f`: element 0, checked by wrapping p itself.
  const VarDecl *VD = variableOf(Pointer);
  if (const auto *DRE = dyn_cast<DeclRefExpr>(Pointer->IgnoreParenImpCasts()))
    Set(PointerKind(VD, nullptr), nullptr, DRE, VD, 0);
  return G;
}

// The checks of the units whose own text the PT runs (UnitPlan::Guarded): every subscript
// of an array of constant size (reads too: a check is two compares), and every access of
// a store (PlanVerifier::forEachStoreAccess) that the PT's text can check. The verifier
// refuses a store whose access is left without one.
void PrefetchPlanner::planBounds(ThreadPlan &P) const {
  const ASTContext &Ctx = Units.function()->getASTContext();
  for (auto &Entry : P.Units) {
    const Unit &U = *Entry.first;
    UnitPlan &UP = Entry.second;
    UP.Bounds.clear();
    if (!UP.Guarded || U.UnitKind == Unit::Block)
      continue;
    std::vector<const Stmt *> Parts =
        U.isControl() ? headerParts(U.S) : std::vector<const Stmt *>{U.S};
    llvm::DenseSet<const Expr *> Seen;
    auto Add = [&](const Expr *Access) {
      if (!Seen.insert(Access).second)
        return;
      BoundGuard G = boundOf(Access, P);
      if (G.Access)
        UP.Bounds.push_back(G);
    };
    for (const Stmt *Part : Parts) {
      if (!Part)
        continue;
      forEachStmtIn(Part, [&](const Stmt *St) {
        const auto *AS = dyn_cast<ArraySubscriptExpr>(St);
        if (!AS)
          return;
        const auto *CA = dyn_cast_or_null<ConstantArrayType>(
            AS->getBase()->IgnoreParenImpCasts()->getType()->getAsArrayTypeUnsafe());
        if (!CA)
          return;
        // A constant within the array needs nothing.
        std::optional<llvm::APSInt> I = AS->getIdx()->getIntegerConstantExpr(Ctx);
        if (I && !I->isNegative() && I->getZExtValue() < CA->getSize().getZExtValue())
          return;
        Add(AS);
      });
      PlanVerifier::forEachStoreAccess(Part, Ctx, Add);
    }
  }
}

} // namespace ppios
