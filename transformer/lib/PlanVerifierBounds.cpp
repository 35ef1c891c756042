// The PT's stores land inside their objects (docs/design/pt-confinement.md, "Bounds"):
// which subscripts and dereferences of a store need a check, and the verifier's rule that
// the plan checks every one of them. See PlanVerifier.h.
#include "PlanVerifier.h"
#include "PlannerSupport.h"
#include "SideEffects.h"
#include "SourceText.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <optional>

using namespace clang;

namespace ppios {
using namespace slicing;

const char *const PlanVerifier::BoundsRule =
    " (the prefetch thread stores only inside the objects it owns: it checks every subscript "
    "and pointer it stores through)";

namespace {

const ConstantArrayType *constantArray(const Expr *E) {
  return dyn_cast_or_null<ConstantArrayType>(E->getType()->getAsArrayTypeUnsafe());
}

// An array object as an operand: the array itself, under its decay to a pointer.
const Expr *arrayOperand(const Expr *E) {
  const Expr *A = E->IgnoreParenImpCasts();
  return A->getType()->isArrayType() ? A : nullptr;
}

// `*E` or `E->f` stores into element 0 of what E points to; F gets the access unless that
// is an object the store's own lvalue names (`*&x`, `*a` of an array of constant size),
// whose way is followed instead.
void derefAccess(const Expr *Access, const Expr *Pointer, llvm::function_ref<void(const Expr *)> F,
                 llvm::function_ref<void(const Expr *)> Follow) {
  const Expr *P = Pointer->IgnoreParens();
  if (const auto *UO = dyn_cast<UnaryOperator>(P); UO && UO->getOpcode() == UO_AddrOf) {
    Follow(UO->getSubExpr());
    return;
  }
  if (const Expr *A = arrayOperand(Pointer)) {
    const ConstantArrayType *CA = constantArray(A);
    if (CA && CA->getSize().getZExtValue() > 0) {
      Follow(A);
      return;
    }
  }
  F(Access);
}

} // namespace

void PlanVerifier::forEachStoreAccess(const Stmt *S, const ASTContext &Ctx,
                                      llvm::function_ref<void(const Expr *)> F) {
  // The way from a store's lvalue to the object it names.
  std::function<void(const Expr *)> Way = [&](const Expr *L) {
    L = L->IgnoreParens();
    if (const auto *IC = dyn_cast<ImplicitCastExpr>(L)) {
      Way(IC->getSubExpr());
      return;
    }
    if (const auto *AS = dyn_cast<ArraySubscriptExpr>(L)) {
      if (const Expr *A = arrayOperand(AS->getBase())) {
        const ConstantArrayType *CA = constantArray(A);
        std::optional<llvm::APSInt> I = AS->getIdx()->getIntegerConstantExpr(Ctx);
        if (!(CA && I && !I->isNegative() && I->getZExtValue() < CA->getSize().getZExtValue()))
          F(AS);
        Way(A); // the array may be reached through a pointer itself (p->a[i])
        return;
      }
      F(AS);
      return;
    }
    if (const auto *UO = dyn_cast<UnaryOperator>(L); UO && UO->getOpcode() == UO_Deref) {
      derefAccess(UO, UO->getSubExpr(), F, Way);
      return;
    }
    if (const auto *ME = dyn_cast<MemberExpr>(L)) {
      if (ME->isArrow())
        derefAccess(ME, ME->getBase(), F, Way);
      else
        Way(ME->getBase());
      return;
    }
  };
  // Every store nodeStores names (SideEffects.h): assignments and ++/-- by their lvalue;
  // an atomic builtin's object (and va_arg's list) by the pointer it is given: `&x`,
  // `&a[i]`, `&p->f` reach it as an lvalue does, an array of constant size is its element
  // 0; any other pointer (`p`, `p + i`) has no subscript in the text to wrap, and is
  // reported as it is, to be refused.
  forEachStmtIn(S, [&](const Stmt *St) {
    if (nodeEffect(St) != NodeEffect::Stores)
      return;
    NodeStores Stores = nodeStores(St);
    for (const Expr *LValue : Stores.LValues)
      Way(LValue);
    for (const Expr *Pointer : Stores.Through) {
      const Expr *P = Pointer->IgnoreParenCasts();
      if (const auto *UO = dyn_cast<UnaryOperator>(P); UO && UO->getOpcode() == UO_AddrOf)
        Way(UO->getSubExpr());
      else if (const Expr *A = arrayOperand(P);
               A && constantArray(A) && constantArray(A)->getSize().getZExtValue() > 0)
        Way(A);
      else
        F(P);
    }
  });
  // (A store inside sizeof is never evaluated; it is checked all the same, and guarded.)
}

const Expr *PlanVerifier::spelledOperand(const Expr *E, const ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  while (E) {
    CharSourceRange R = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(E->getSourceRange()),
                                                 SM, Ctx.getLangOpts());
    if (R.isValid() && SM.isWrittenInMainFile(R.getBegin()) &&
        spelledInMainFile(SM, E->getBeginLoc()) && spelledInMainFile(SM, E->getEndLoc()))
      return E;
    if (const auto *PE = dyn_cast<ParenExpr>(E))
      E = PE->getSubExpr();
    else if (const auto *IC = dyn_cast<ImplicitCastExpr>(E))
      E = IC->getSubExpr();
    else
      return nullptr;
  }
  return nullptr;
}

// Every store access of what the PT runs has a check in the plan. The checks of a unit are
// rendered into its own text, so a statement the PT runs as written and a header have them;
// the calls kept from a statement the PT cannot run are rendered apart, without them.
void PlanVerifier::verifyBounds(const Unit &U) {
  const UnitPlan &P = Plan.unit(U);
  for (const Violation &V : Found)
    if (V.At == &U && V.Where != Violation::CopyBuffer)
      return; // refused already
  const ASTContext &Ctx = Units.function()->getASTContext();
  llvm::DenseSet<const Expr *> Checked;
  if (P.Guarded)
    for (const BoundGuard &G : P.Bounds)
      Checked.insert(G.Access);
  auto Check = [&](const Stmt *S) {
    std::string Why;
    if (S)
      forEachStoreAccess(S, Ctx, [&](const Expr *Access) {
        if (Why.empty() && !Checked.count(Access))
          Why = unboundedStore(Access);
      });
    return Why;
  };
  switch (P.Form) {
  case UnitPlan::AsWritten:
    if (std::string Why = Check(U.S); !Why.empty())
      Found.push_back({Violation::Statement, &U, nullptr, nullptr, Why});
    return;
  case UnitPlan::Header:
    for (const Stmt *Part : headerParts(U.S))
      if (std::string Why = Check(Part); !Why.empty()) {
        Found.push_back({Violation::Statement, &U, nullptr, nullptr, Why});
        return;
      }
    return;
  case UnitPlan::Return:
  case UnitPlan::KeptCalls: {
    Checked.clear();
    auto Kept = [&](const CallExpr *Call, const std::vector<ArmGuard> &Guards) {
      std::string Why = Check(Call);
      for (const ArmGuard &G : Guards)
        if (Why.empty())
          Why = Check(G.Cond);
      if (!Why.empty())
        Found.push_back({Violation::KeptCall, &U, Call, nullptr, "an operand " + Why});
    };
    for (const IoCallSite &Site : U.IoCalls)
      if (const IoCallPlan *D = Plan.call(Site.Call); D && D->Prefetched)
        Kept(Site.Call, D->Guards);
    for (const CloneCallPlan &C : P.CloneCalls)
      Kept(C.Call, C.Guards);
    return;
  }
  default:
    return;
  }
}

// Why the plan could not check Access: a verb phrase for the remarks, with the rule.
std::string PlanVerifier::unboundedStore(const Expr *Access) const {
  const ASTContext &Ctx = Units.function()->getASTContext();
  const Expr *Base = nullptr;
  const Expr *Index = nullptr;
  if (const auto *AS = dyn_cast<ArraySubscriptExpr>(Access)) {
    Base = AS->getBase();
    Index = AS->getIdx();
  } else if (const auto *UO = dyn_cast<UnaryOperator>(Access); UO && UO->getOpcode() == UO_Deref) {
    Base = UO->getSubExpr();
  } else if (const auto *ME = dyn_cast<MemberExpr>(Access)) {
    Base = ME->getBase();
  } else {
    // The pointer an atomic builtin stores through (forEachStoreAccess).
    const auto *DRE = dyn_cast<DeclRefExpr>(Access->IgnoreParenImpCasts());
    const auto *PV = DRE ? dyn_cast<VarDecl>(DRE->getDecl()) : nullptr;
    return "stores through " + (PV ? quoted(PV) : std::string("a pointer")) +
           " in an atomic operation, where the prefetch thread cannot check it" + BoundsRule;
  }
  const VarDecl *VD = nullptr;
  if (Base)
    if (const auto *DRE = dyn_cast<DeclRefExpr>(Base->IgnoreParenImpCasts()))
      VD = dyn_cast<VarDecl>(DRE->getDecl());
  std::string Of = VD ? " of " + quoted(VD) : "";
  if (Index && !spelledOperand(Index, Ctx))
    return "stores through a subscript" + Of +
           " that a macro computes, where the prefetch thread cannot check it" + BoundsRule;
  if (VD && Plan.Clone && isa<ParmVarDecl>(VD) && VD->getType()->isPointerType())
    return "stores through " + quoted(VD) +
           " beyond its first element, and only its callers know the size of what it points to" +
           BoundsRule;
  if (Index)
    return "stores through a subscript" + Of + " that the prefetch thread cannot check" + BoundsRule;
  return "stores through a pointer" + Of + " that the prefetch thread cannot check" + BoundsRule;
}

} // namespace ppios
