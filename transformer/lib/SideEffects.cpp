#include "SideEffects.h"

#include <algorithm>

#include "IoCallTable.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Attr.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/AST/Stmt.h"
#include "clang/Basic/SourceManager.h"
#include "llvm/ADT/StringSwitch.h"

using namespace clang;

namespace ppios {

namespace {

// libc's output calls: -1 for those that write to stdout or stderr, else the argument
// that is the stream they write to; -2 for any other function. What a %n conversion
// stores through is callStores's to add, per call.
int outputStreamArg(llvm::StringRef Name) {
  return llvm::StringSwitch<int>(Name)
      .Cases("printf", "vprintf", "puts", "putchar", "perror", "__printf_chk", -1)
      .Cases("fprintf", "vfprintf", "fflush", "__fprintf_chk", "__vfprintf_chk", 0)
      .Cases("fputs", "fputc", "putc", 1)
      .Default(-2);
}

// libc and compiler builtins the PT may call. -1: pure; otherwise a mask of the pointer
// arguments the function stores through (the PT must pass its own memory there). The
// formatted ones (snprintf, sprintf, vsnprintf) name only their destination here: the
// arguments a %n conversion stores through depend on the call's format (callStores).
// Nothing is here that stores anywhere else: errno is the calling thread's own.
int libraryEffect(llvm::StringRef Name) {
  return llvm::StringSwitch<int>(Name)
      .Cases("strlen", "strnlen", "strcmp", "strncmp", "strcasecmp", "strncasecmp", -1)
      .Cases("strchr", "strrchr", "strstr", "memchr", "memcmp", "strspn", "strcspn", -1)
      .Cases("atoi", "atol", "atoll", "atof", "abs", "labs", "llabs", -1)
      .Cases("fabs", "sqrt", "pow", "floor", "ceil", "round", "lround", "llround", -1)
      .Cases("log", "log2", "log10", "exp", "fmin", "fmax", "fmod", -1)
      .Cases("isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", -1)
      .Cases("toupper", "tolower", "getenv", "malloc", "calloc", -1)
      .Cases("__builtin_expect", "__builtin_constant_p", "__builtin_strlen", -1)
      .Cases("snprintf", "sprintf", "vsnprintf", "memcpy", "memmove", "memset", 1)
      .Cases("strcpy", "strncpy", "strcat", "strncat", "__builtin_memcpy", 1)
      .Cases("__builtin_memset", "__builtin_snprintf", "__builtin___snprintf_chk", 1)
      .Cases("__builtin___memcpy_chk", "__builtin___memset_chk", "__builtin___strcpy_chk", 1)
      .Cases("stat", "fstat", "lstat", "stat64", "fstat64", 2)
      // The end pointer (argument 1, often NULL) is stored through.
      .Cases("strtol", "strtoll", "strtoul", "strtoull", "strtod", "strtof", 2)
      .Cases("__builtin_mul_overflow", "__builtin_add_overflow", "__builtin_sub_overflow", 4)
      .Default(0);
}

const Expr *strip(const Expr *E) { return E->IgnoreParenImpCasts(); }

// A formatted output function: the index of its format argument, and whether the values
// of its conversions come in a va_list. Format is -1 for any other function. Clang puts a
// format attribute on libc's declarations and on its builtins; the names are a backstop.
struct FormatFunction {
  int Format = -1;
  bool VaList = false;
};
FormatFunction formatFunction(const FunctionDecl *FD) {
  for (const auto *A : FD->specific_attrs<FormatAttr>()) {
    llvm::StringRef Kind = A->getType() ? A->getType()->getName() : "";
    if (Kind == "printf" || Kind == "gnu_printf" || Kind == "__printf__" ||
        Kind == "__gnu_printf__")
      return {A->getFormatIdx() - 1, A->getFirstArg() == 0};
  }
  if (!FD->getIdentifier())
    return {};
  llvm::StringRef Name = FD->getName();
  Name.consume_front("__builtin_");
  return llvm::StringSwitch<FormatFunction>(Name)
      .Case("printf", {0, false})
      .Cases("fprintf", "sprintf", "dprintf", {1, false})
      .Case("vprintf", {0, true})
      .Cases("vfprintf", "vsprintf", "vdprintf", {1, true})
      .Case("snprintf", {2, false})
      .Case("vsnprintf", {2, true})
      .Case("__printf_chk", {1, false})
      .Case("__fprintf_chk", {2, false})
      .Case("__vprintf_chk", {1, true})
      .Case("__vfprintf_chk", {2, true})
      .Case("__sprintf_chk", {3, false})
      .Case("__vsprintf_chk", {3, true})
      .Case("__snprintf_chk", {4, false})
      .Case("__vsnprintf_chk", {4, true})
      .Default({});
}

// Whether a printf format has a %n conversion (any flags, width, precision, position and
// length: %n, %ln, %1$hhn).
bool storesCount(llvm::StringRef Format) {
  for (size_t I = 0; I < Format.size(); ++I) {
    if (Format[I] != '%')
      continue;
    ++I;
    while (I < Format.size() && Format[I] != '\0' &&
           llvm::StringRef("0123456789$#-+ '.*hlLqjztI").contains(Format[I]))
      ++I;
    if (I < Format.size() && Format[I] == 'n')
      return true;
  }
  return false;
}

// The size expressions of the variable-length arrays in T: through pointers and arrays
// (the canonical type: typedefs and typeof are looked through; a VLA keeps its size
// expression there). A function type's parameters are not evaluated.
void vlaSizes(QualType T, llvm::SmallVectorImpl<const Expr *> &Out) {
  if (T.isNull())
    return;
  const Type *Ty = T.getCanonicalType().getTypePtr();
  while (Ty && Ty->isVariablyModifiedType()) {
    if (const auto *VAT = dyn_cast<VariableArrayType>(Ty)) {
      if (VAT->getSizeExpr())
        Out.push_back(VAT->getSizeExpr());
      Ty = VAT->getElementType().getTypePtr();
    } else if (const auto *AT = dyn_cast<ArrayType>(Ty)) {
      Ty = AT->getElementType().getTypePtr();
    } else if (const auto *PT = dyn_cast<PointerType>(Ty)) {
      Ty = PT->getPointeeType().getTypePtr();
    } else {
      return;
    }
  }
}

} // namespace

NodeEffect nodeEffect(const Stmt *S) {
  switch (S->getStmtClass()) {
  // Statements: control, and declarations (what a declaration evaluates, its initializers
  // and sizes, are its children and sizeExpressions; its cleanup function is the walker's).
  case Stmt::CompoundStmtClass:
  case Stmt::NullStmtClass:
  case Stmt::IfStmtClass:
  case Stmt::ForStmtClass:
  case Stmt::WhileStmtClass:
  case Stmt::DoStmtClass:
  case Stmt::SwitchStmtClass:
  case Stmt::CaseStmtClass:
  case Stmt::DefaultStmtClass:
  case Stmt::BreakStmtClass:
  case Stmt::ContinueStmtClass:
  case Stmt::ReturnStmtClass:
  case Stmt::GotoStmtClass:
  case Stmt::LabelStmtClass:
  case Stmt::AttributedStmtClass:
  case Stmt::DeclStmtClass:
  // Expressions that compute a value or name an object, and store nothing themselves.
  case Stmt::DeclRefExprClass:
  case Stmt::IntegerLiteralClass:
  case Stmt::FloatingLiteralClass:
  case Stmt::CharacterLiteralClass:
  case Stmt::StringLiteralClass:
  case Stmt::ImaginaryLiteralClass:
  case Stmt::FixedPointLiteralClass:
  case Stmt::GNUNullExprClass:
  case Stmt::PredefinedExprClass:
  case Stmt::SourceLocExprClass:
  case Stmt::ParenExprClass:
  case Stmt::ConditionalOperatorClass:
  case Stmt::BinaryConditionalOperatorClass:
  case Stmt::OpaqueValueExprClass:
  case Stmt::ImplicitCastExprClass:
  case Stmt::CStyleCastExprClass:
  case Stmt::MemberExprClass:
  case Stmt::ArraySubscriptExprClass:
  case Stmt::ExtVectorElementExprClass:
  case Stmt::InitListExprClass:
  case Stmt::ImplicitValueInitExprClass:
  case Stmt::DesignatedInitExprClass:
  case Stmt::DesignatedInitUpdateExprClass:
  case Stmt::NoInitExprClass:
  case Stmt::CompoundLiteralExprClass:
  case Stmt::StmtExprClass:
  case Stmt::ChooseExprClass:
  case Stmt::GenericSelectionExprClass:
  case Stmt::UnaryExprOrTypeTraitExprClass:
  case Stmt::TypeTraitExprClass:
  case Stmt::OffsetOfExprClass:
  case Stmt::ConstantExprClass:
  case Stmt::ExprWithCleanupsClass:
  case Stmt::ShuffleVectorExprClass:
  case Stmt::ConvertVectorExprClass:
  case Stmt::AddrLabelExprClass:
    return NodeEffect::None;
  case Stmt::UnaryOperatorClass:
    return cast<UnaryOperator>(S)->isIncrementDecrementOp() ? NodeEffect::Stores
                                                             : NodeEffect::None;
  case Stmt::BinaryOperatorClass:
  case Stmt::CompoundAssignOperatorClass:
    return cast<BinaryOperator>(S)->isAssignmentOp() ? NodeEffect::Stores : NodeEffect::None;
  case Stmt::AtomicExprClass:
  case Stmt::VAArgExprClass:
    return NodeEffect::Stores;
  case Stmt::CallExprClass:
    return NodeEffect::Calls;
  case Stmt::GCCAsmStmtClass:
  case Stmt::MSAsmStmtClass:
    return NodeEffect::Asm;
  default:
    // A block literal, a pseudo-object (__builtin_dump_struct), a computed goto, OpenMP,
    // Objective-C, C++, a recovery node, or a kind a later clang adds.
    return NodeEffect::Unknown;
  }
}

NodeStores nodeStores(const Stmt *S) {
  NodeStores Out;
  if (const auto *BO = dyn_cast<BinaryOperator>(S)) {
    if (BO->isAssignmentOp())
      Out.LValues.push_back(BO->getLHS());
  } else if (const auto *UO = dyn_cast<UnaryOperator>(S)) {
    if (UO->isIncrementDecrementOp())
      Out.LValues.push_back(UO->getSubExpr());
  } else if (const auto *VA = dyn_cast<VAArgExpr>(S)) {
    // va_arg advances the list: x86-64's va_list is an array (a parameter of that type is
    // a pointer to the caller's), others a pointer or a struct stored as a whole.
    const Expr *List = VA->getSubExpr();
    QualType T = List->IgnoreParenImpCasts()->getType();
    if (T->isArrayType() || (T->isPointerType() && T->getPointeeType()->isRecordType()))
      Out.Through.push_back(List);
    else
      Out.LValues.push_back(List);
  } else if (const auto *AE = dyn_cast<AtomicExpr>(S)) {
    // The object, and the pointers an operation returns a value through (the generic
    // __atomic_load's and __atomic_exchange's result, a compare-exchange's expected value);
    // an operation not named here stores through every pointer operand it has.
    switch (AE->getOp()) {
    case AtomicExpr::AO__c11_atomic_load:
    case AtomicExpr::AO__atomic_load_n:
    case AtomicExpr::AO__opencl_atomic_load:
    case AtomicExpr::AO__hip_atomic_load:
      break;
    case AtomicExpr::AO__atomic_load:
      Out.Through.push_back(AE->getVal1());
      break;
    case AtomicExpr::AO__atomic_exchange:
      Out.Through.push_back(AE->getPtr());
      Out.Through.push_back(AE->getVal2());
      break;
    case AtomicExpr::AO__atomic_compare_exchange:
    case AtomicExpr::AO__atomic_compare_exchange_n:
    case AtomicExpr::AO__c11_atomic_compare_exchange_strong:
    case AtomicExpr::AO__c11_atomic_compare_exchange_weak:
    case AtomicExpr::AO__opencl_atomic_compare_exchange_strong:
    case AtomicExpr::AO__opencl_atomic_compare_exchange_weak:
    case AtomicExpr::AO__hip_atomic_compare_exchange_strong:
    case AtomicExpr::AO__hip_atomic_compare_exchange_weak:
      Out.Through.push_back(AE->getPtr());
      Out.Through.push_back(AE->getVal1());
      break;
    case AtomicExpr::AO__c11_atomic_init:
    case AtomicExpr::AO__opencl_atomic_init:
    case AtomicExpr::AO__c11_atomic_store:
    case AtomicExpr::AO__atomic_store:
    case AtomicExpr::AO__atomic_store_n:
    case AtomicExpr::AO__c11_atomic_exchange:
    case AtomicExpr::AO__atomic_exchange_n:
      Out.Through.push_back(AE->getPtr());
      break;
    default:
      Out.Through.push_back(AE->getPtr());
      for (unsigned I = 1; I < AE->getNumSubExprs(); ++I)
        if (const Expr *E = AE->getSubExprs()[I]; E && E->getType()->isPointerType())
          Out.Through.push_back(E);
      break;
    }
  }
  return Out;
}

void sizeExpressions(const Stmt *S, llvm::SmallVectorImpl<const Expr *> &Out) {
  if (const auto *CE = dyn_cast<ExplicitCastExpr>(S))
    vlaSizes(CE->getTypeAsWritten(), Out);
  else if (const auto *CL = dyn_cast<CompoundLiteralExpr>(S))
    vlaSizes(CL->getType(), Out);
  else if (const auto *UE = dyn_cast<UnaryExprOrTypeTraitExpr>(S))
    vlaSizes(UE->getTypeOfArgument(), Out);
  else if (const auto *VA = dyn_cast<VAArgExpr>(S))
    vlaSizes(VA->getWrittenTypeInfo() ? VA->getWrittenTypeInfo()->getType() : VA->getType(), Out);
  else if (const auto *DS = dyn_cast<DeclStmt>(S))
    for (const Decl *D : DS->decls()) {
      if (const auto *VD = dyn_cast<VarDecl>(D))
        vlaSizes(VD->getType(), Out);
      else if (const auto *TD = dyn_cast<TypedefNameDecl>(D))
        vlaSizes(TD->getUnderlyingType(), Out);
    }
}

bool operandsEvaluated(const Stmt *S) {
  const auto *UE = dyn_cast<UnaryExprOrTypeTraitExpr>(S);
  return !UE || UE->getTypeOfArgument()->isVariablyModifiedType();
}

std::string describeNode(const Stmt *S, const SourceManager &SM) {
  if (const auto *AE = dyn_cast<AtomicExpr>(S)) {
    // The builtin as the file spells it (<stdatomic.h>'s macros expand to __c11_atomic_*).
    const char *P = SM.getCharacterData(SM.getSpellingLoc(AE->getBuiltinLoc()));
    size_t N = 0;
    while (P && (isalnum(static_cast<unsigned char>(P[N])) || P[N] == '_'))
      ++N;
    return N ? std::string(P, N) : std::string("an atomic operation");
  }
  if (isa<VAArgExpr>(S))
    return "va_arg";
  return S->getStmtClassName();
}

CallStores callStores(const CallExpr *Call, const CalleeEffect &Effect) {
  CallStores R;
  R.Args = Effect.StoredArgs;
  const FunctionDecl *FD = Call->getDirectCallee();
  if (!FD)
    return R;
  FormatFunction F = formatFunction(FD);
  if (F.Format < 0 || F.Format >= static_cast<int>(Call->getNumArgs()))
    return R;
  const auto *Literal = dyn_cast<StringLiteral>(Call->getArg(F.Format)->IgnoreParenCasts());
  if (Literal && Literal->getCharByteWidth() == 1 && !storesCount(Literal->getString()))
    return R;
  // A format the PT cannot read, or one with %n: every pointer it is given may be one a
  // %n conversion stores through.
  std::string Name = FD->getNameAsString();
  if (F.VaList) {
    R.Known = false;
    R.Why = std::string("passes '") + Name + "' " +
            (Literal ? "a format with %n" : "a format that is not a string literal") +
            " and the values of its conversions in a va_list, through which it may store";
    return R;
  }
  for (unsigned I = F.Format + 1; I < Call->getNumArgs(); ++I)
    if (Call->getArg(I)->IgnoreParenImpCasts()->getType()->isPointerType() ||
        Call->getArg(I)->getType()->isPointerType()) {
      if (I >= 32) {
        R.Known = false;
        R.Why = "passes '" + Name + "' more than 32 arguments, any of which its format may store through";
        return R;
      }
      R.Args |= 1u << I;
    }
  return R;
}

std::string replaceableDefinition(const FunctionDecl *Definition) {
  for (const FunctionDecl *R : Definition->redecls())
    if (R->hasAttr<WeakAttr>() || R->hasAttr<WeakRefAttr>() || R->hasAttr<WeakImportAttr>())
      return "is weak (another file's definition may run instead)";
  if (Definition->isInlined() &&
      Definition->getASTContext().GetGVALinkageForFunction(Definition) == GVA_AvailableExternally)
    return "is inline only (a call may run another file's definition instead)";
  return "";
}

StoreTarget classifyStore(const Expr *LValue) {
  StoreTarget T;
  const Expr *E = strip(LValue);
  while (true) {
    if (const auto *DRE = dyn_cast<DeclRefExpr>(E)) {
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl())) {
        T.Target = StoreTarget::Variable;
        T.Var = VD;
      }
      return T;
    }
    if (const auto *ME = dyn_cast<MemberExpr>(E)) {
      if (ME->isArrow()) {
        T.Target = StoreTarget::ThroughPointer;
        T.Pointer = strip(ME->getBase());
        return T;
      }
      E = strip(ME->getBase());
      continue;
    }
    if (const auto *ASE = dyn_cast<ArraySubscriptExpr>(E)) {
      const Expr *Base = ASE->getBase()->IgnoreParens();
      // An array decays to a pointer here: look through the decay to the array itself.
      if (const auto *ICE = dyn_cast<ImplicitCastExpr>(Base))
        if (ICE->getCastKind() == CK_ArrayToPointerDecay) {
          E = strip(ICE->getSubExpr());
          continue;
        }
      T.Target = StoreTarget::ThroughPointer;
      T.Pointer = strip(Base);
      return T;
    }
    if (const auto *UO = dyn_cast<UnaryOperator>(E)) {
      if (UO->getOpcode() == UO_Deref) {
        T.Target = StoreTarget::ThroughPointer;
        T.Pointer = strip(UO->getSubExpr());
      }
      return T;
    }
    return T;
  }
}

namespace {
// The local variable `v` of an argument `&v`.
const VarDecl *addressedLocal(const Expr *Arg) {
  const auto *UO = dyn_cast<UnaryOperator>(Arg->IgnoreParenCasts());
  if (!UO || UO->getOpcode() != UO_AddrOf)
    return nullptr;
  const auto *DRE = dyn_cast<DeclRefExpr>(UO->getSubExpr()->IgnoreParens());
  const auto *VD = DRE ? dyn_cast<VarDecl>(DRE->getDecl()) : nullptr;
  return VD && VD->hasLocalStorage() ? VD : nullptr;
}
} // namespace

const VarDecl *ptOwnStatus(const Expr *Arg) {
  const VarDecl *VD = addressedLocal(Arg);
  return VD && VD->getType()->isRecordType() ? VD : nullptr;
}

const VarDecl *ptOwnScalar(const Expr *Arg) {
  const VarDecl *VD = addressedLocal(Arg);
  return VD && VD->getType()->isArithmeticType() ? VD : nullptr;
}

bool isNullPointer(const Expr *Arg) {
  const Expr *E = Arg->IgnoreParenCasts();
  if (isa<GNUNullExpr>(E))
    return true;
  const auto *IL = dyn_cast<IntegerLiteral>(E);
  return IL && IL->getValue() == 0;
}

const VarDecl *addressedVariable(const Expr *Arg) {
  const Expr *E = Arg->IgnoreParenCasts();
  if (const auto *UO = dyn_cast<UnaryOperator>(E))
    if (UO->getOpcode() == UO_AddrOf) {
      StoreTarget T = classifyStore(UO->getSubExpr());
      return T.Target == StoreTarget::Variable ? T.Var : nullptr;
    }
  if (const auto *DRE = dyn_cast<DeclRefExpr>(E))
    if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
      if (VD->getType()->isArrayType())
        return VD;
  return nullptr;
}

CalleeEffect SideEffectOracle::classify(const FunctionDecl *Callee) {
  CalleeEffect Result;
  if (!Callee) {
    Result.Why = "calls through a function pointer";
    Result.StoresKnown = false;
    return Result;
  }
  Callee = Callee->getCanonicalDecl();
  auto It = Cache.find(Callee);
  if (It != Cache.end())
    return It->second;
  // Recursion is treated as unsafe: the entry is in place while the body is analyzed.
  Result.Why = "calls '" + Callee->getNameAsString() + "' recursively";
  Result.StoresKnown = false;
  Cache[Callee] = Result;

  const FunctionDecl *Definition = nullptr;
  // The body here may not be what a call runs (replaceableDefinition): then the function
  // is what its name says, a libc function of the tables, or unknown.
  std::string Replaceable;
  if (IoCallTable::lookup(Callee->getName().empty() ? "" : Callee->getName()) &&
      !(Callee->hasBody(Definition) && !Callee->isInlined())) {
    Result.Why = "makes the I/O call '" + Callee->getNameAsString() + "'";
    const IoCallInfo &Info = *IoCallTable::lookup(Callee->getName());
    Result.StoresKnown = true;
    for (int Arg : {Info.StatusArg, Info.OutArg, Info.HandleIsOut ? Info.HandleArg : -1})
      if (Arg >= 0 && Info.Kind != IoKind::Write)
        Result.StoredArgs |= 1u << Arg;
    for (unsigned Arg = 0; Arg < 32; ++Arg)
      if (IoCallTable::isDataDestination(Info, Arg))
        Result.StoredArgs |= 1u << Arg;
    if (Info.Kind == IoKind::Write && Info.StatusArg >= 0)
      Result.StoredArgs |= 1u << Info.StatusArg;
  } else if (Callee->hasBody(Definition) &&
             (Replaceable = replaceableDefinition(Definition)).empty()) {
    Result = analyzeBody(Definition);
  } else if (int Stream = Callee->getIdentifier() ? outputStreamArg(Callee->getName()) : -2;
             Stream != -2) {
    // Output (printf of a file name): the PT never runs it, but it changes none of the
    // program's memory its arguments reach, except the stream it writes to.
    Result.Why = "calls '" + Callee->getNameAsString() + "', which writes output";
    Result.StoresKnown = true;
    if (Stream >= 0)
      Result.StoredArgs = 1u << Stream;
  } else if (int Mask = Callee->getIdentifier() ? libraryEffect(Callee->getName()) : 0) {
    if (Mask == -1) {
      Result.Effect = CalleeEffect::Pure;
    } else {
      Result.Effect = CalleeEffect::StoresThroughArgs;
      Result.StoredArgs = static_cast<unsigned>(Mask);
    }
    Result.Why.clear();
  } else {
    Result.Why = "calls '" + Callee->getNameAsString() + "', " +
                 (Replaceable.empty() ? "whose side effects are unknown"
                                      : "whose definition here " + Replaceable +
                                            ", so its side effects are unknown");
    Result.StoresKnown = false;
  }
  Cache[Callee] = Result;
  return Result;
}

namespace {
// Looks at every store and call of a function body.
class BodyScanner : public RecursiveASTVisitor<BodyScanner> {
public:
  BodyScanner(SideEffectOracle &Oracle, const FunctionDecl *FD) : Oracle(Oracle), FD(FD) {
    Result.Effect = CalleeEffect::Pure;
  }
  CalleeEffect Result;

  // Every node: what it stores itself (assignments, ++/--, atomics, va_arg), and a kind
  // nobody listed (nodeEffect), which may store or call anything.
  bool VisitStmt(Stmt *S) {
    switch (nodeEffect(S)) {
    case NodeEffect::Stores: {
      NodeStores Stores = nodeStores(S);
      for (const Expr *LValue : Stores.LValues)
        noteStore(LValue);
      for (const Expr *Pointer : Stores.Through)
        noteArgumentStore(Pointer);
      break;
    }
    case NodeEffect::Unknown:
      fail(calls() + "has " + describeNode(S, FD->getASTContext().getSourceManager()) +
           ", an expression whose stores and calls are not checked");
      Result.StoresKnown = false;
      break;
    case NodeEffect::None:
    case NodeEffect::Calls: // VisitCallExpr
    case NodeEffect::Asm:   // VisitAsmStmt
      break;
    }
    return true;
  }
  bool VisitUnaryOperator(UnaryOperator *UO) {
    if (UO->getOpcode() == UO_AddrOf) {
      StoreTarget T = classifyStore(UO->getSubExpr());
      if (T.Target == StoreTarget::Variable)
        noteGlobalStored(T.Var);
    }
    return true;
  }
  bool VisitVarDecl(VarDecl *VD) {
    // A constant one (a table, a marker string) is as pure as a literal.
    if (VD->isStaticLocal() && !VD->getType().isConstant(VD->getASTContext()))
      fail(calls() + "has a static local variable");
    // The cleanup function runs when the variable goes out of scope, called with its
    // address: a call like any other (free on a block of the PT's would abort it).
    if (const auto *A = VD->getAttr<CleanupAttr>()) {
      CalleeEffect E = Oracle.classify(A->getFunctionDecl());
      if (E.Effect == CalleeEffect::Unsafe) {
        fail(calls() + "has a variable with the cleanup function '" +
             A->getFunctionDecl()->getNameAsString() + "'");
        Result.StoresKnown &= E.StoresKnown;
      }
    }
    return true;
  }
  // Inline assembly may store anywhere ("+m"(global), a clobbered "memory").
  bool VisitAsmStmt(AsmStmt *) {
    fail(calls() + "has inline assembly");
    Result.StoresKnown = false;
    return true;
  }
  bool VisitDeclRefExpr(DeclRefExpr *DRE) {
    if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
      noteGlobalRead(VD);
    return true;
  }
  bool VisitCallExpr(CallExpr *Call) {
    CalleeEffect E = Oracle.classify(Call->getDirectCallee());
    for (const VarDecl *VD : E.GlobalsRead)
      noteGlobalRead(VD);
    for (const VarDecl *VD : E.GlobalsStored)
      noteGlobalStored(VD);
    if (Result.ReadsGlobalPointer.empty())
      Result.ReadsGlobalPointer = E.ReadsGlobalPointer;
    if (E.Effect == CalleeEffect::Unsafe) {
      fail(calls() + E.Why);
      // A callee that may store anywhere reaches the caller's memory only through the
      // pointers it gets: &local (MPI_Get_count(&st, MPI_BYTE, &n)) is harmless.
      if (!E.StoresKnown)
        for (const Expr *Arg : Call->arguments())
          if (mayReachParameter(Arg))
            Result.StoresKnown = false;
    }
    CallStores Stores = callStores(Call, E);
    if (!Stores.Known) {
      fail(calls() + Stores.Why);
      Result.StoresKnown = false;
    }
    for (unsigned I = 0; I < Call->getNumArgs() && I < 32; ++I)
      if (Stores.Args & (1u << I))
        noteArgumentStore(Call->getArg(I));
    return true;
  }

  // The pointer parameters the body points at other memory than the caller's argument
  // (see notePointerStore), each with the line that does.
  void findRepointed(const Stmt *Body) {
    if (!Body)
      return;
    const SourceManager &SM = FD->getASTContext().getSourceManager();
    auto Note = [&](const ParmVarDecl *P, const Stmt *At, const char *How) {
      if (!Repointed.count(P))
        Repointed[P] = std::string(How) + " at line " +
                       std::to_string(SM.getPresumedLineNumber(At->getBeginLoc()));
    };
    llvm::SmallVector<const Stmt *, 32> Work{Body};
    while (!Work.empty()) {
      const Stmt *S = Work.pop_back_val();
      if (nodeEffect(S) == NodeEffect::Stores) {
        NodeStores Stores = nodeStores(S);
        for (const Expr *LValue : Stores.LValues)
          if (const ParmVarDecl *P = pointerParameter(LValue); P && !movesItself(S, P))
            Note(P, S, "sets it");
        for (const Expr *Pointer : Stores.Through)
          if (const auto *P = dyn_cast_or_null<ParmVarDecl>(addressedVariable(Pointer)))
            Note(P, S, "sets it");
      }
      // `&p`: anything may set it through that (a callee, a pointer to pointer).
      if (const auto *UO = dyn_cast<UnaryOperator>(S); UO && UO->getOpcode() == UO_AddrOf)
        if (const ParmVarDecl *P = pointerParameter(UO->getSubExpr()))
          Note(P, S, "takes its address");
      for (const Stmt *Child : S->children())
        if (Child)
          Work.push_back(Child);
      llvm::SmallVector<const Expr *, 2> Sizes;
      sizeExpressions(S, Sizes);
      Work.append(Sizes.begin(), Sizes.end());
    }
  }

private:
  // The pointer parameter an lvalue is, if it is one.
  static const ParmVarDecl *pointerParameter(const Expr *LValue) {
    const auto *DRE = dyn_cast<DeclRefExpr>(LValue->IgnoreParenImpCasts());
    const auto *P = DRE ? dyn_cast<ParmVarDecl>(DRE->getDecl()) : nullptr;
    return P && P->getType()->isPointerType() ? P : nullptr;
  }
  // A store to P that only moves it within the object it points to: `p++`, `p -= n`,
  // `p = p + n`, `p = &p[n]`.
  static bool movesItself(const Stmt *S, const ParmVarDecl *P) {
    if (const auto *UO = dyn_cast<UnaryOperator>(S))
      return UO->isIncrementDecrementOp();
    const auto *BO = dyn_cast<BinaryOperator>(S);
    if (!BO)
      return false;
    if (BO->getOpcode() == BO_AddAssign || BO->getOpcode() == BO_SubAssign)
      return true;
    if (BO->getOpcode() != BO_Assign)
      return false;
    const Expr *RHS = BO->getRHS()->IgnoreParenCasts();
    if (const auto *Sum = dyn_cast<BinaryOperator>(RHS);
        Sum && (Sum->getOpcode() == BO_Add || Sum->getOpcode() == BO_Sub))
      RHS = (Sum->getLHS()->getType()->isPointerType() ? Sum->getLHS() : Sum->getRHS())
                ->IgnoreParenCasts();
    else if (const auto *Addr = dyn_cast<UnaryOperator>(RHS); Addr && Addr->getOpcode() == UO_AddrOf)
      if (const auto *ASE = dyn_cast<ArraySubscriptExpr>(Addr->getSubExpr()->IgnoreParens()))
        RHS = ASE->getBase()->IgnoreParenCasts();
    return pointerParameter(RHS) == P;
  }
  // Whether a pointer argument may point into memory a parameter points to: `&p` of a
  // pointer parameter, or any expression with a pointer variable in it (C adjusts array
  // parameters to pointers; &local and local arrays are harmless).
  static bool mayReachParameter(const Expr *Arg) {
    if (!Arg->getType()->isPointerType())
      return false;
    if (const VarDecl *VD = addressedVariable(Arg))
      return isa<ParmVarDecl>(VD) && VD->getType()->isPointerType();
    llvm::SmallVector<const Stmt *, 8> Work{Arg};
    while (!Work.empty()) {
      const Stmt *S = Work.pop_back_val();
      if (const auto *DRE = dyn_cast<DeclRefExpr>(S))
        if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
          if (VD->getType()->isPointerType())
            return true;
      for (const Stmt *Child : S->children())
        if (Child)
          Work.push_back(Child);
    }
    return false;
  }
  void noteGlobalRead(const VarDecl *VD) {
    if (!VD->hasGlobalStorage() || VD->getType()->isFunctionType())
      return;
    // A constant never changes; but a constant pointer to memory that does
    // (`static long *const slot = &counter;`) is read through all the same.
    if (VD->getType().isConstQualified()) {
      QualType T = VD->getType();
      if (T->isPointerType() && !T->getPointeeType().isConstQualified() &&
          Result.ReadsGlobalPointer.empty())
        Result.ReadsGlobalPointer = VD->getNameAsString();
      return;
    }
    if (std::find(Result.GlobalsRead.begin(), Result.GlobalsRead.end(), VD) ==
        Result.GlobalsRead.end())
      Result.GlobalsRead.push_back(VD);
    if (VD->getType()->isPointerType() && Result.ReadsGlobalPointer.empty())
      Result.ReadsGlobalPointer = VD->getNameAsString();
  }
  void noteGlobalStored(const VarDecl *VD) {
    if (VD->hasGlobalStorage() &&
        std::find(Result.GlobalsStored.begin(), Result.GlobalsStored.end(), VD) ==
            Result.GlobalsStored.end())
      Result.GlobalsStored.push_back(VD);
  }
  // Reasons are verb phrases about the statement that calls FD ("calls 'f', which stores
  // to global 'g'"), so that they read right after "a condition that" or "which".
  std::string calls() const { return "calls '" + FD->getNameAsString() + "', which "; }
  void fail(const std::string &Why) {
    if (Result.Effect != CalleeEffect::Unsafe) {
      Result.Effect = CalleeEffect::Unsafe;
      Result.Why = Why;
    }
  }
  // A store through pointer parameter i is fine for the caller to check; anything else
  // (globals, pointers of unknown origin) makes the function unsafe for the PT.
  // A parameter the body points elsewhere (findRepointed) is no longer the caller's
  // argument: what is stored through it may be any memory the function can reach.
  void notePointerStore(const Expr *Pointer) {
    if (const auto *DRE = dyn_cast<DeclRefExpr>(Pointer->IgnoreParenCasts()))
      if (const auto *PVD = dyn_cast<ParmVarDecl>(DRE->getDecl())) {
        if (auto It = Repointed.find(PVD); It != Repointed.end()) {
          fail(calls() + "stores through its parameter '" + PVD->getNameAsString() +
               "', which it points at other memory than the caller's argument (it " +
               It->second + ")");
          Result.StoresKnown = false;
          return;
        }
        unsigned Index = PVD->getFunctionScopeIndex();
        if (Index < 32) {
          Result.StoredArgs |= 1u << Index;
          if (Result.Effect == CalleeEffect::Pure)
            Result.Effect = CalleeEffect::StoresThroughArgs;
          return;
        }
      }
    fail(calls() + "stores through a pointer of unknown origin");
    Result.StoresKnown = false;
  }
  void noteStore(const Expr *LValue) {
    StoreTarget T = classifyStore(LValue);
    if (T.Target == StoreTarget::Variable) {
      noteGlobalStored(T.Var);
      if (!T.Var->hasLocalStorage())
        fail(calls() + "stores to global '" + T.Var->getNameAsString() + "'");
    } else if (T.Target == StoreTarget::ThroughPointer) {
      notePointerStore(T.Pointer);
    } else {
      fail(calls() + "stores to an unknown location");
      Result.StoresKnown = false;
    }
  }
  void noteArgumentStore(const Expr *Arg) {
    if (isNullPointer(Arg))
      return; // strtol(s, NULL, 10): nothing is stored
    if (const VarDecl *VD = addressedVariable(Arg)) {
      noteGlobalStored(VD);
      if (!VD->hasLocalStorage())
        fail(calls() + "stores to global '" + VD->getNameAsString() + "'");
      return;
    }
    notePointerStore(Arg);
  }

  SideEffectOracle &Oracle;
  const FunctionDecl *FD;
  llvm::DenseMap<const ParmVarDecl *, std::string> Repointed;
};
} // namespace

void SideEffectOracle::seed(const FunctionDecl *Callee, const CalleeEffect &Effect) {
  Cache[Callee->getCanonicalDecl()] = Effect;
}

CalleeEffect SideEffectOracle::analyzeBody(const FunctionDecl *FD) {
  BodyScanner Scanner(*this, FD);
  Scanner.findRepointed(FD->getBody());
  Scanner.TraverseStmt(FD->getBody());
  return Scanner.Result;
}

} // namespace ppios
