#include "SideEffects.h"

#include <algorithm>

#include "IoCallTable.h"

#include "clang/AST/Attr.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "llvm/ADT/StringSwitch.h"

using namespace clang;

namespace ppios {

namespace {

// libc's output calls: -1 for those that write to stdout or stderr, else the argument
// that is the stream they write to; -2 for any other function. A %n conversion, the one
// way printf stores through an argument, is not considered (no program relies on it, and
// _FORTIFY_SOURCE refuses it in a writable format).
int outputStreamArg(llvm::StringRef Name) {
  return llvm::StringSwitch<int>(Name)
      .Cases("printf", "vprintf", "puts", "putchar", "perror", "__printf_chk", -1)
      .Cases("fprintf", "vfprintf", "fflush", "__fprintf_chk", "__vfprintf_chk", 0)
      .Cases("fputs", "fputc", "putc", 1)
      .Default(-2);
}

// libc and compiler builtins the PT may call. -1: pure; otherwise a mask of the pointer
// arguments the function stores through (the PT must pass its own memory there).
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

} // namespace

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
  } else if (Callee->hasBody(Definition)) {
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
    Result.Why = "calls '" + Callee->getNameAsString() + "', whose side effects are unknown";
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

  bool VisitBinaryOperator(BinaryOperator *BO) {
    if (BO->isAssignmentOp())
      noteStore(BO->getLHS());
    return true;
  }
  bool VisitUnaryOperator(UnaryOperator *UO) {
    if (UO->isIncrementDecrementOp())
      noteStore(UO->getSubExpr());
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
    for (unsigned I = 0; I < Call->getNumArgs() && I < 32; ++I)
      if (E.StoredArgs & (1u << I))
        noteArgumentStore(Call->getArg(I));
    return true;
  }

private:
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
    if (!VD->hasGlobalStorage() || VD->getType().isConstQualified() ||
        VD->getType()->isFunctionType())
      return;
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
  void notePointerStore(const Expr *Pointer) {
    if (const auto *DRE = dyn_cast<DeclRefExpr>(Pointer->IgnoreParenCasts()))
      if (const auto *PVD = dyn_cast<ParmVarDecl>(DRE->getDecl())) {
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
};
} // namespace

void SideEffectOracle::seed(const FunctionDecl *Callee, const CalleeEffect &Effect) {
  Cache[Callee->getCanonicalDecl()] = Effect;
}

CalleeEffect SideEffectOracle::analyzeBody(const FunctionDecl *FD) {
  BodyScanner Scanner(*this, FD);
  Scanner.TraverseStmt(FD->getBody());
  return Scanner.Result;
}

} // namespace ppios
