// See PlannerSupport.h.
#include "PlannerSupport.h"
#include "FileScopeType.h"
#include "SourceText.h"

#include "clang/Basic/SourceManager.h"

#include <algorithm>

using namespace clang;

namespace ppios {
using namespace slicing;

namespace slicing {

bool isLocalMpiQuery(llvm::StringRef Name) {
  static const char *const Local[] = {
      "MPI_Comm_rank",  "MPI_Comm_size",       "MPI_Wtime",       "MPI_Wtick",
      "MPI_Get_count",  "MPI_Get_elements",    "MPI_Type_size",   "MPI_Initialized",
      "MPI_Finalized",  "MPI_Error_string",    "MPI_Error_class", "MPI_Get_processor_name",
      "MPI_Query_thread", "MPI_Is_thread_main", "MPI_Get_version", "MPI_Type_get_extent",
      "MPI_File_get_size", "MPI_File_get_position", "MPI_Get_address", "MPI_Comm_get_attr"};
  for (const char *L : Local)
    if (Name == L)
      return true;
  return false;
}

std::string quoted(const VarDecl *VD) { return "'" + VD->getNameAsString() + "'"; }

bool nameableAtFileScope(const ASTContext &Ctx, QualType T) {
  return !fileScopeType(Ctx, T).isNull();
}

bool nameableAsWritten(QualType T) {
  while (true) {
    if (const auto *TT = T->getAs<TypedefType>())
      if (TT->getDecl()->getDeclContext()->isFunctionOrMethod())
        return false;
    if (T->isPointerType()) {
      T = T->getPointeeType();
      continue;
    }
    if (T->isArrayType()) {
      if (T->isVariableArrayType())
        return false;
      T = QualType(T->getPointeeOrArrayElementType(), 0);
      continue;
    }
    break;
  }
  if (const TagDecl *Tag = T->getAsTagDecl())
    return !Tag->getDeclContext()->isFunctionOrMethod() && Tag->getIdentifier();
  return true;
}

static bool declaredInFunction(const Decl *D) {
  return D->getDeclContext()->isFunctionOrMethod();
}

void localTypesOf(QualType T, DeclSet &Out) {
  llvm::SmallVector<QualType, 4> Work{T};
  while (!Work.empty()) {
    QualType Q = Work.pop_back_val();
    if (Q.isNull())
      continue;
    const Type *Ty = Q.getTypePtr();
    if (const auto *TT = dyn_cast<TypedefType>(Ty)) {
      if (declaredInFunction(TT->getDecl()) && Out.insert(TT->getDecl()).second)
        Work.push_back(TT->getDecl()->getUnderlyingType());
    } else if (const auto *ET = dyn_cast<ElaboratedType>(Ty)) {
      Work.push_back(ET->getNamedType());
    } else if (const auto *Tag = dyn_cast<TagType>(Ty)) {
      if (declaredInFunction(Tag->getDecl()))
        Out.insert(Tag->getDecl());
    } else if (const auto *PT = dyn_cast<PointerType>(Ty)) {
      Work.push_back(PT->getPointeeType());
    } else if (const auto *AT = dyn_cast<ArrayType>(Ty)) {
      Work.push_back(AT->getElementType());
    } else if (const auto *PT = dyn_cast<ParenType>(Ty)) {
      Work.push_back(PT->getInnerType());
    } else if (const auto *AT = dyn_cast<AttributedType>(Ty)) {
      Work.push_back(AT->getModifiedType());
    } else if (const auto *DT = dyn_cast<DecayedType>(Ty)) {
      Work.push_back(DT->getOriginalType());
    } else if (const auto *FT = dyn_cast<FunctionType>(Ty)) {
      Work.push_back(FT->getReturnType());
      if (const auto *FPT = dyn_cast<FunctionProtoType>(FT))
        for (QualType P : FPT->getParamTypes())
          Work.push_back(P);
    }
  }
}

void localTypesIn(const Stmt *S, DeclSet &Out) {
  forEachStmtIn(S, [&](const Stmt *St) {
    if (const auto *DS = dyn_cast<DeclStmt>(St)) {
      for (const Decl *D : DS->decls())
        if (const auto *VD = dyn_cast<VarDecl>(D))
          localTypesOf(VD->getType(), Out);
    } else if (const auto *CE = dyn_cast<ExplicitCastExpr>(St)) {
      localTypesOf(CE->getTypeAsWritten(), Out);
    } else if (const auto *UE = dyn_cast<UnaryExprOrTypeTraitExpr>(St)) {
      if (UE->isArgumentType())
        localTypesOf(UE->getArgumentType(), Out);
    } else if (const auto *CL = dyn_cast<CompoundLiteralExpr>(St)) {
      localTypesOf(CL->getType(), Out);
    } else if (const auto *OE = dyn_cast<OffsetOfExpr>(St)) {
      localTypesOf(OE->getTypeSourceInfo()->getType(), Out);
    } else if (const auto *VA = dyn_cast<VAArgExpr>(St)) {
      localTypesOf(VA->getType(), Out);
    } else if (const auto *DRE = dyn_cast<DeclRefExpr>(St)) {
      if (const auto *EC = dyn_cast<EnumConstantDecl>(DRE->getDecl()))
        if (const auto *ED = dyn_cast<EnumDecl>(EC->getDeclContext()))
          if (declaredInFunction(ED))
            Out.insert(ED);
    }
  });
}

std::string describe(const Decl *D) {
  const SourceManager &SM = D->getASTContext().getSourceManager();
  std::string Line = std::to_string(SM.getPresumedLineNumber(D->getLocation()));
  if (const auto *VD = dyn_cast<VarDecl>(D))
    return quoted(VD);
  if (const auto *TD = dyn_cast<TypedefNameDecl>(D))
    return "type '" + TD->getNameAsString() + "'";
  if (const auto *Tag = dyn_cast<TagDecl>(D)) {
    if (Tag->getIdentifier())
      return "type '" + std::string(Tag->getKindName()) + " " + Tag->getNameAsString() + "'";
    if (const TypedefNameDecl *TD = Tag->getTypedefNameForAnonDecl())
      return "type '" + TD->getNameAsString() + "'";
    return "the " + std::string(Tag->isEnum() ? "enumeration" : "type") + " at line " + Line;
  }
  return "the declaration at line " + Line;
}

bool declarableInPt(const VarDecl *VD) {
  QualType T = VD->getType();
  return nameableAtFileScope(VD->getASTContext(), T) && !T->isIncompleteType() && !T->isVariablyModifiedType() &&
         !T->isFunctionType();
}

bool isMpiValueHandle(QualType T) {
  static const char *const Handles[] = {"MPI_Comm", "MPI_Datatype", "MPI_Info", "MPI_Group",
                                        "MPI_Op",   "MPI_Errhandler", "MPI_Request", "MPI_Win",
                                        "MPI_Message"};
  std::string Name = T.getUnqualifiedType().getAsString();
  for (const char *H : Handles)
    if (Name == H)
      return true;
  return false;
}

bool isStringPointer(QualType T) {
  while (T->isPointerType() || T->isArrayType()) {
    QualType Pointee = T->isPointerType() ? T->getPointeeType()
                                          : QualType(T->getPointeeOrArrayElementType(), 0);
    if (Pointee->isCharType())
      return true;
    T = Pointee;
  }
  return false;
}

// What an open's mode argument asks for: one of the stdio mode letters, or any of the
// POSIX / MPI-IO flag bits. A mode it cannot read (not a literal, not a constant) may.
static bool openModeAsks(const CallExpr *Call, const IoCallInfo &Info, const ASTContext &Ctx,
                         const char *StdioLetters, uint64_t PosixBits, uint64_t MpiBits) {
  if (!Info.WriteModeArg)
    return false;
  unsigned ModeArg = Info.Interface == IoInterface::MpiIo ? 2 : 1;
  if (Call->getNumArgs() <= ModeArg)
    return false;
  const Expr *Mode = Call->getArg(ModeArg)->IgnoreParenImpCasts();
  if (Info.Interface == IoInterface::Stdio) {
    if (const auto *SL = dyn_cast<StringLiteral>(Mode))
      return SL->getString().find_first_of(StdioLetters) != llvm::StringRef::npos;
    return true;
  }
  Expr::EvalResult Value;
  if (!Mode->EvaluateAsInt(Value, Ctx))
    return true;
  uint64_t Flags = Value.Val.getInt().getZExtValue();
  return (Flags & (Info.Interface == IoInterface::Posix ? PosixBits : MpiBits)) != 0;
}

bool openMayWrite(const CallExpr *Call, const IoCallInfo &Info, const ASTContext &Ctx) {
  // O_WRONLY | O_RDWR; Open MPI's MPI_MODE_WRONLY | MPI_MODE_RDWR.
  return openModeAsks(Call, Info, Ctx, "wa+", 3, 4 | 8);
}

bool openMayCreate(const CallExpr *Call, const IoCallInfo &Info, const ASTContext &Ctx) {
  // Linux's O_CREAT | O_TRUNC; Open MPI's MPI_MODE_CREATE.
  return openModeAsks(Call, Info, Ctx, "wa", 0100 | 01000, 1);
}

llvm::SmallVector<std::pair<unsigned, const VarDecl *>, 2>
cloneHandleArgs(const CallExpr *Call, const CloneSummary &Callee) {
  llvm::SmallVector<std::pair<unsigned, const VarDecl *>, 2> Args;
  for (unsigned I = 0; I < Call->getNumArgs() && I < Callee.Params.size(); ++I)
    if (Callee.Params[I] == ParamRole::Handle)
      if (const auto *DRE = dyn_cast<DeclRefExpr>(Call->getArg(I)->IgnoreParenImpCasts()))
        if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
          Args.push_back({I, VD});
  return Args;
}

unsigned countTransfers(const Unit &U) {
  unsigned N = 0;
  for (const IoCallSite &Site : U.IoCalls)
    N += IoCallTable::isTransfer(*Site.Info);
  for (const Unit *Child : U.Children)
    N += countTransfers(*Child);
  return N;
}

bool containsLoop(const Unit &U) {
  if (U.UnitKind == Unit::Loop)
    return true;
  for (const Unit *Child : U.Children)
    if (containsLoop(*Child))
      return true;
  return false;
}

const VarDecl *bufferOf(const IoCallSite &Site) {
  if (Site.Info->BufferArg < 0 || Site.Info->BufferArg >= (int)Site.Call->getNumArgs())
    return nullptr;
  const Expr *E = Site.Call->getArg(Site.Info->BufferArg)->IgnoreParenCasts();
  while (true) {
    if (const auto *UO = dyn_cast<UnaryOperator>(E))
      E = UO->getSubExpr()->IgnoreParenCasts();
    else if (const auto *BO = dyn_cast<BinaryOperator>(E))
      E = BO->getLHS()->IgnoreParenCasts();
    else
      break;
  }
  if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
    return dyn_cast<VarDecl>(DRE->getDecl());
  return nullptr;
}

bool hasCopyVariant(const IoCallInfo &Info) {
  llvm::StringRef Name = Info.Name;
  return Name == "read" || Name == "pread" || Name == "fread" || Name == "fgets" ||
         Name == "MPI_File_read_at" ||
         Name == "MPI_File_read_at_all";
}

bool contains(const Stmt *S, const Stmt *Target) {
  if (S == Target)
    return true;
  for (const Stmt *Child : S->children())
    if (Child && contains(Child, Target))
      return true;
  return false;
}

bool receivesResult(const Stmt *S, const VarDecl *VD, const CallExpr *Call) {
  if (VD->getInit() && contains(VD->getInit(), Call))
    return true;
  llvm::SmallVector<const Stmt *, 8> Work{S};
  while (!Work.empty()) {
    const Stmt *E = Work.pop_back_val();
    if (const auto *BO = dyn_cast<BinaryOperator>(E); BO && BO->isAssignmentOp())
      if (const auto *DRE = dyn_cast<DeclRefExpr>(BO->getLHS()->IgnoreParenImpCasts()))
        if (DRE->getDecl() == VD && contains(BO->getRHS(), Call))
          return true;
    for (const Stmt *Child : E->children())
      if (Child)
        Work.push_back(Child);
  }
  return false;
}

void varsIn(const Stmt *E, VarSet &Out) {
  llvm::SmallVector<const Stmt *, 8> Work{E};
  while (!Work.empty()) {
    const Stmt *S = Work.pop_back_val();
    if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
        Out.insert(VD);
    for (const Stmt *Child : S->children())
      if (Child)
        Work.push_back(Child);
  }
}

bool findArm(const Stmt *S, const Stmt *Target, std::vector<ArmGuard> &Out) {
  if (S == Target)
    return true;
  for (const Stmt *Child : S->children()) {
    if (!Child || !findArm(Child, Target, Out))
      continue;
    if (const auto *CO = dyn_cast<ConditionalOperator>(S)) {
      if (Child == CO->getTrueExpr())
        Out.push_back({CO->getCond(), false});
      else if (Child == CO->getFalseExpr())
        Out.push_back({CO->getCond(), true});
    } else if (const auto *BO = dyn_cast<BinaryOperator>(S)) {
      if (BO->isLogicalOp() && Child == BO->getRHS())
        Out.push_back({BO->getLHS(), BO->getOpcode() == BO_LOr});
    }
    return true;
  }
  return false;
}

bool belowSwitch(const Stmt *S, const Stmt *Target, bool InSwitch) {
  if (S == Target)
    return InSwitch;
  InSwitch |= isa<SwitchStmt>(S);
  for (const Stmt *Child : S->children())
    if (Child && belowSwitch(Child, Target, InSwitch))
      return true;
  return false;
}

void conjunctsOf(const Expr *E, llvm::SmallVectorImpl<const Expr *> &Out) {
  E = E->IgnoreParens();
  if (const auto *BO = dyn_cast<BinaryOperator>(E); BO && BO->getOpcode() == BO_LAnd) {
    conjunctsOf(BO->getLHS(), Out);
    conjunctsOf(BO->getRHS(), Out);
    return;
  }
  Out.push_back(E);
}

bool mentions(const Stmt *S, const VarDecl *VD) {
  if (!S)
    return false;
  if (const auto *DRE = dyn_cast<DeclRefExpr>(S); DRE && DRE->getDecl() == VD)
    return true;
  for (const Stmt *Child : S->children())
    if (mentions(Child, VD))
      return true;
  return false;
}

bool sideEffectFree(const Stmt *S) {
  if (isa<CallExpr>(S) || isa<StmtExpr>(S))
    return false;
  if (const auto *BO = dyn_cast<BinaryOperator>(S); BO && BO->isAssignmentOp())
    return false;
  if (const auto *UO = dyn_cast<UnaryOperator>(S); UO && UO->isIncrementDecrementOp())
    return false;
  for (const Stmt *Child : S->children())
    if (Child && !sideEffectFree(Child))
      return false;
  return true;
}

} // namespace slicing

} // namespace ppios
