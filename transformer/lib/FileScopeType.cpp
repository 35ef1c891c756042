// See FileScopeType.h.
#include "FileScopeType.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/PrettyPrinter.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

using namespace clang;

namespace ppios {

namespace {

bool ofFunction(const Decl *D) { return D->getDeclContext()->isFunctionOrMethod(); }

// T rebuilt without scope-dependent spellings; T itself (same sugar) when nothing in it
// depends on the function's scope; null when it cannot be named outside.
QualType rebuild(const ASTContext &Ctx, QualType T) {
  if (T.isNull())
    return T;
  Qualifiers Quals = T.getLocalQualifiers();
  const Type *Ty = T.getTypePtr();
  auto Requalified = [&](QualType R) { return R.isNull() ? R : Ctx.getQualifiedType(R, Quals); };

  if (const auto *TT = dyn_cast<TypedefType>(Ty)) {
    if (!ofFunction(TT->getDecl()))
      return T; // a file-scope typedef names the same type everywhere after it
    return Requalified(rebuild(Ctx, TT->desugar()));
  }
  // Spellings that are evaluated where they are written: always replaced by their type.
  if (isa<TypeOfExprType, TypeOfType, AutoType, DecltypeType>(Ty)) {
    QualType Inner = Ty->getLocallyUnqualifiedSingleStepDesugaredType();
    if (Inner.getTypePtr() == Ty)
      return QualType(); // not deduced
    return Requalified(rebuild(Ctx, Inner));
  }
  if (const auto *PT = dyn_cast<PointerType>(Ty)) {
    QualType P = rebuild(Ctx, PT->getPointeeType());
    if (P.isNull() || P == PT->getPointeeType())
      return P.isNull() ? P : T;
    return Requalified(Ctx.getPointerType(P));
  }
  if (isa<VariableArrayType>(Ty))
    return QualType(); // its size is an expression of the function
  if (const auto *AT = dyn_cast<ArrayType>(Ty)) {
    QualType E = rebuild(Ctx, AT->getElementType());
    if (E.isNull() || E == AT->getElementType())
      return E.isNull() ? E : T;
    if (const auto *CAT = dyn_cast<ConstantArrayType>(AT))
      return Requalified(Ctx.getConstantArrayType(E, CAT->getSize(), nullptr,
                                                  CAT->getSizeModifier(),
                                                  CAT->getIndexTypeCVRQualifiers()));
    if (const auto *IAT = dyn_cast<IncompleteArrayType>(AT))
      return Requalified(Ctx.getIncompleteArrayType(E, IAT->getSizeModifier(),
                                                    IAT->getIndexTypeCVRQualifiers()));
    return QualType();
  }
  if (const auto *FPT = dyn_cast<FunctionProtoType>(Ty)) {
    QualType R = rebuild(Ctx, FPT->getReturnType());
    bool Changed = R != FPT->getReturnType();
    std::vector<QualType> Params;
    for (QualType P : FPT->getParamTypes()) {
      Params.push_back(rebuild(Ctx, P));
      if (Params.back().isNull())
        return QualType();
      Changed |= Params.back() != P;
    }
    if (R.isNull() || !Changed)
      return R.isNull() ? R : T;
    return Requalified(Ctx.getFunctionType(R, Params, FPT->getExtProtoInfo()));
  }
  if (const auto *FT = dyn_cast<FunctionNoProtoType>(Ty)) {
    QualType R = rebuild(Ctx, FT->getReturnType());
    if (R.isNull() || R == FT->getReturnType())
      return R.isNull() ? R : T;
    return Requalified(Ctx.getFunctionNoProtoType(R, FT->getExtInfo()));
  }
  if (const auto *AT = dyn_cast<AtomicType>(Ty)) {
    QualType V = rebuild(Ctx, AT->getValueType());
    if (V.isNull() || V == AT->getValueType())
      return V.isNull() ? V : T;
    return Requalified(Ctx.getAtomicType(V));
  }
  if (const auto *Tag = dyn_cast<TagType>(Ty)) {
    const TagDecl *D = Tag->getDecl();
    if (ofFunction(D) || (!D->getIdentifier() && !D->getTypedefNameForAnonDecl()))
      return QualType();
    if (const TypedefNameDecl *TD = D->getTypedefNameForAnonDecl(); TD && ofFunction(TD))
      return QualType();
    return T;
  }
  // Other sugar (parentheses, attributes, `struct S`, a decayed parameter): kept as
  // written when what it wraps is, else the rebuilt type it stands for.
  QualType Inner = Ty->getLocallyUnqualifiedSingleStepDesugaredType();
  if (Inner.getTypePtr() == Ty)
    return T; // builtin, complex, vector types
  QualType R = rebuild(Ctx, Inner);
  if (R.isNull() || R == Inner)
    return R.isNull() ? R : T;
  return Requalified(R);
}

} // namespace

QualType fileScopeType(const ASTContext &Ctx, QualType T) { return rebuild(Ctx, T); }

std::string spellAtFileScope(const ASTContext &Ctx, QualType T, llvm::StringRef Name) {
  QualType F = fileScopeType(Ctx, T);
  PrintingPolicy Policy(Ctx.getLangOpts());
  std::string Out;
  llvm::raw_string_ostream OS(Out);
  (F.isNull() ? T : F).print(OS, Policy, Name);
  return OS.str();
}

} // namespace ppios
