// See PrefetchThreadEmitter.h: the finished plan (ThreadPlan.h) rendered as text.
#include "PrefetchThreadEmitter.h"
#include "FileScopeType.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Attr.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/PrettyPrinter.h"
#include "clang/AST/Stmt.h"
#include "clang/AST/TypeLoc.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace clang;

namespace ppios {

namespace {

// The runtime's calls that pass handles around are named by the handle's kind:
// ppios_pt_reopen_<suffix>, ppios_mt_handoff_<suffix>, ppios_pt_take_<suffix>.
const char *handleSuffix(IoInterface Interface) {
  return Interface == IoInterface::Posix   ? "fd"
         : Interface == IoInterface::Stdio ? "stream"
                                           : "MPI_File";
}

bool isMpiFileType(QualType T) { return T.getUnqualifiedType().getAsString() == "MPI_File"; }


// The PT's sequence counter: a local of the thread function, or in a clone the caller's,
// reached through the pointer parameter ppios_seq.
std::string countStatement(const std::string &Seq, unsigned N, const std::string &Note) {
  std::string S = N == 1 ? "++" + Seq + ";" : Seq + " += " + std::to_string(N) + ";";
  return S + " /* " + Note + " */";
}

// The PT's streams can be NULL where the MT's are not (ppios_pt_fopen never creates a file).
} // namespace

// fseeko/ftello through the runtime's declarations: under -std=c99 <stdio.h> declares
// neither, and an implicit declaration would truncate offsets to int. Like all the text
// ppios-cc writes, the helpers name nothing but the runtime's, the C library's and their
// own ppios_* identifiers (parameters too): they follow the program's macros (`#define n
// 16` would otherwise rewrite a parameter n).
const char *const StdioHelpers =
    "/* ppios-cc: the prefetch thread's stdio calls, safe on a stream it could not open. */\n"
    "#define PPIOS_CC_HELPER static __attribute__((__unused__))\n"
    "PPIOS_CC_HELPER int ppios_cc_fseek(FILE *ppios_f, long ppios_o, int ppios_w) {\n"
    "  return ppios_f ? fseek(ppios_f, ppios_o, ppios_w) : -1;\n"
    "}\n"
    "PPIOS_CC_HELPER int ppios_cc_fseeko(FILE *ppios_f, off_t ppios_o, int ppios_w) {\n"
    "  return ppios_f ? ppios_fseeko(ppios_f, ppios_o, ppios_w) : -1;\n"
    "}\n"
    "PPIOS_CC_HELPER long ppios_cc_ftell(FILE *ppios_f) { return ppios_f ? ftell(ppios_f) : -1; }\n"
    "PPIOS_CC_HELPER off_t ppios_cc_ftello(FILE *ppios_f) {\n"
    "  return ppios_f ? ppios_ftello(ppios_f) : -1;\n"
    "}\n"
    "PPIOS_CC_HELPER int ppios_cc_feof(FILE *ppios_f) { return ppios_f ? feof(ppios_f) : 1; }\n"
    "PPIOS_CC_HELPER int ppios_cc_ferror(FILE *ppios_f) { return ppios_f ? ferror(ppios_f) : 0; }\n"
    "PPIOS_CC_HELPER void ppios_cc_rewind(FILE *ppios_f) { if (ppios_f) rewind(ppios_f); }\n"
    "PPIOS_CC_HELPER int ppios_cc_pt_fclose(FILE *ppios_f) {\n"
    "  return ppios_f ? ppios_pt_fclose(ppios_f) : -1;\n"
    "}\n"
    "PPIOS_CC_HELPER size_t ppios_cc_prefetch_fread(size_t ppios_s, size_t ppios_n, FILE *ppios_f,\n"
    "                                               ppios_seq_t ppios_q, unsigned ppios_fl,\n"
    "                                               const char *ppios_at) {\n"
    "  return ppios_f ? ppios_prefetch_fread(ppios_s, ppios_n, ppios_f, ppios_q, ppios_fl, ppios_at)\n"
    "                 : 0;\n"
    "}\n"
    "PPIOS_CC_HELPER size_t ppios_cc_prefetch_fread_copy(void *ppios_b, size_t ppios_s, size_t ppios_n,\n"
    "                                                    FILE *ppios_f, ppios_seq_t ppios_q,\n"
    "                                                    unsigned ppios_fl, const char *ppios_at) {\n"
    "  return ppios_f ? ppios_prefetch_fread_copy(ppios_b, ppios_s, ppios_n, ppios_f, ppios_q,\n"
    "                                             ppios_fl, ppios_at)\n"
    "                 : 0;\n"
    "}\n"
    "PPIOS_CC_HELPER char *ppios_cc_prefetch_fgets(int ppios_n, FILE *ppios_f, ppios_seq_t ppios_q,\n"
    "                                              unsigned ppios_fl, const char *ppios_at) {\n"
    "  return ppios_f ? ppios_prefetch_fgets(ppios_n, ppios_f, ppios_q, ppios_fl, ppios_at) : NULL;\n"
    "}\n"
    "PPIOS_CC_HELPER char *ppios_cc_prefetch_fgets_copy(char *ppios_b, int ppios_n, FILE *ppios_f,\n"
    "                                                   ppios_seq_t ppios_q, unsigned ppios_fl,\n"
    "                                                   const char *ppios_at) {\n"
    "  return ppios_f ? ppios_prefetch_fgets_copy(ppios_b, ppios_n, ppios_f, ppios_q, ppios_fl,\n"
    "                                             ppios_at)\n"
    "                 : NULL;\n"
    "}\n"
    "PPIOS_CC_HELPER ssize_t ppios_cc_prefetch_getline(FILE *ppios_f, ppios_seq_t ppios_q,\n"
    "                                                  unsigned ppios_fl, const char *ppios_at) {\n"
    "  return ppios_f ? ppios_prefetch_getline(ppios_f, ppios_q, ppios_fl, ppios_at) : -1;\n"
    "}\n"
    "PPIOS_CC_HELPER ssize_t ppios_cc_prefetch_getdelim(int ppios_d, FILE *ppios_f, ppios_seq_t ppios_q,\n"
    "                                                   unsigned ppios_fl, const char *ppios_at) {\n"
    "  return ppios_f ? ppios_prefetch_getdelim(ppios_d, ppios_f, ppios_q, ppios_fl, ppios_at) : -1;\n"
    "}\n\n";

// The file-name copy of the start block (IoCallPlan::CapturePath).
static const char *const CopyString =
    "static void ppios_cc_copy_string(char *ppios_to, size_t ppios_size, const char *ppios_from) {\n"
    "  size_t ppios_n = 0;\n"
    "  if (ppios_from != NULL)\n"
    "    for (; ppios_n + 1 < ppios_size && ppios_from[ppios_n] != '\\0'; ++ppios_n)\n"
    "      ppios_to[ppios_n] = ppios_from[ppios_n];\n"
    "  ppios_to[ppios_n] = '\\0';\n"
    "}\n\n";

// The PT's own names that may also be the program's: its context, counter and argument,
// the context's fields. One the program uses (a local `long ppios_seq`) is ppios_pt_<rest>
// instead; a program name starting with ppios_pt_ gets the file no thread at all (see
// Transformer.cpp), so that one is free.
static bool ownName(llvm::StringRef Name) {
  if (Name == "ppios_seq" || Name == "ppios_ctx" || Name == "ppios_arg" || Name == "ppios_seq0")
    return true;
  return Name.consume_front("ppios_path") && !Name.empty() &&
         Name.find_first_not_of("0123456789") == llvm::StringRef::npos;
}

bool PrefetchThreadEmitter::renamesOwnName(llvm::StringRef Name) { return ownName(Name); }

std::string PrefetchThreadEmitter::own(const std::string &Base) const {
  if (!ProgramNames || !ProgramNames->count(Base))
    return Base;
  return "ppios_pt_" + Base.substr(std::string("ppios_").size());
}

PrefetchThreadEmitter::PrefetchThreadEmitter(const SourceText &Text, const FunctionUnits &Units,
                                             const ThreadPlan &Plan)
    : Text(Text), Units(Units), Plan(Plan) {
  Fn = Units.function()->getNameAsString();
}

// A call to a function with a clone: ppios_pt_<name>(same arguments, 0 for those the clone
// does not use, the sequence counter).
void PrefetchThreadEmitter::editCloneCall(const CloneCallPlan &C) {
  const CallExpr *Call = C.Call;
  Edits.replace(Text.offset(Call->getCallee()->getBeginLoc()),
                Text.tokenEnd(Call->getCallee()->getEndLoc()), C.Name);
  for (unsigned I : C.ZeroArgs) {
    const Expr *Arg = Call->getArg(I);
    Edits.replace(Text.offset(Arg->getBeginLoc()), Text.tokenEnd(Arg->getEndLoc()), "0");
  }
  Edits.insert(Text.offset(Call->getRParenLoc()),
               (Call->getNumArgs() ? ", " : "") + SeqPointer);
}

// The calls the PT keeps from a statement it cannot run: its prefetched reads and active
// clone calls, in source order, then a count of its other transfers.
std::string PrefetchThreadEmitter::keptCalls(const Unit &U) {
  std::vector<std::pair<unsigned, std::string>> Kept;
  // `if (c1 && !(c2)) call;` when the call runs only in some arm of the statement.
  auto Guarded = [&](const std::vector<ArmGuard> &Guards, const std::string &Call) {
    std::string Cond;
    for (const ArmGuard &G : Guards)
      Cond += std::string(Cond.empty() ? "" : " && ") + (G.Negate ? "!" : "") + "(" +
              Edits.render(Text.buffer(), Text.offset(G.Cond->getBeginLoc()),
                           Text.tokenEnd(G.Cond->getEndLoc())) +
              ")";
    return Cond.empty() ? Call + ";" : "if (" + Cond + ") " + Call + ";";
  };
  for (const IoCallSite &Site : U.IoCalls) {
    const IoCallPlan *D = Plan.call(Site.Call);
    if (D && D->Prefetched)
      Kept.push_back({Text.offset(Site.Call->getBeginLoc()), Guarded(D->Guards, renderCall(Site))});
  }
  for (const CloneCallPlan &C : Plan.unit(U).CloneCalls) {
    editCloneCall(C);
    Kept.push_back({Text.offset(C.Call->getBeginLoc()),
                    Guarded(C.Guards, Edits.render(Text.buffer(),
                                                   Text.offset(C.Call->getBeginLoc()),
                                                   Text.tokenEnd(C.Call->getEndLoc())))});
  }
  std::sort(Kept.begin(), Kept.end());
  std::string Out;
  for (const auto &K : Kept)
    Out += (Out.empty() ? "" : " ") + K.second;
  return Out;
}

// VD declared as the PT's own, wherever the declaration stands (FileScopeType.h): without
// qualifiers (the PT assigns it), an MPI file as the runtime's token.
std::string PrefetchThreadEmitter::declare(const VarDecl *VD) {
  ASTContext &Ctx = VD->getASTContext();
  QualType T = fileScopeType(Ctx, VD->getType());
  if (T.isNull())
    T = VD->getType();
  if (T->isArrayType()) {
    Qualifiers Quals;
    T = Ctx.getUnqualifiedArrayType(T, Quals);
  } else {
    T = T.getUnqualifiedType();
  }
  if (isMpiFileType(T))
    return "ppios_pt_mpi_file " + VD->getNameAsString();
  return spellAtFileScope(Ctx, T, VD->getName());
}

// A declaration of VD as the PT's own: zeroed (a static local stays static, which zeroes
// it without using the PT's stack), and marked used. A big local is its heap block,
// declared at the function's entry: zeroed here.
std::string PrefetchThreadEmitter::ownDeclaration(const VarDecl *VD) {
  if (const HeapLocal *H = Plan.heapLocal(VD)) {
    if (!H->Sized)
      return "__builtin_memset(" + H->Name + ", 0, sizeof *" + H->Name + ");";
    // A variable-length array: its sizes are evaluated once, by the typedef, as by the
    // program's declaration; ppios_pt_vla resizes the function's one block for it.
    std::string Type = heapName(*H, "ppios_pt_ht");
    PrintingPolicy Policy(VD->getASTContext().getLangOpts());
    std::string Typedef;
    llvm::raw_string_ostream OS(Typedef);
    Qualifiers Quals;
    VD->getASTContext().getUnqualifiedArrayType(VD->getType(), Quals).print(OS, Policy, Type);
    return "typedef " + OS.str() + "; " + Type + " *" + H->Name + " = ppios_pt_vla(&" +
           heapName(*H, "ppios_pt_hs") + ", sizeof(" + Type + "));";
  }
  std::string Name = VD->getNameAsString();
  if (VD->isStaticLocal())
    return "static " + declare(VD) + "; (void)" + Name + ";";
  return declare(VD) + "; __builtin_memset(&" + Name + ", 0, sizeof " + Name + "); (void)" +
         Name + ";";
}

// The PT gets file names as copies taken when it starts, never pointers into MT memory
// (where the plan says so: IoCallPlan::CapturePath).
std::string PrefetchThreadEmitter::pathArgument(const IoCallSite &Site) {
  const IoCallPlan *P = Plan.call(Site.Call);
  if (!P || !P->CapturePath)
    return "";
  const Expr *Path = Site.Call->getArg(Site.Info->PathArg);
  std::string Field = own("ppios_path" + std::to_string(Paths.size()));
  Paths.push_back({Field, Text.text(Path->getSourceRange())});
  return CtxName + "->" + Field;
}

void PrefetchThreadEmitter::editCall(const IoCallSite &Site) {
  const CallExpr *Call = Site.Call;
  const IoCallInfo &Info = *Site.Info;
  unsigned CalleeBegin = Text.offset(Call->getCallee()->getBeginLoc());
  unsigned CalleeEnd = Text.tokenEnd(Call->getCallee()->getEndLoc());
  auto DropArg = [&](int Index) {
    if (Index < 0 || Index >= static_cast<int>(Call->getNumArgs()))
      return;
    unsigned N = Call->getNumArgs();
    if (static_cast<unsigned>(Index) + 1 < N)
      Edits.replace(Text.offset(Call->getArg(Index)->getBeginLoc()),
                    Text.offset(Call->getArg(Index + 1)->getBeginLoc()), "");
    else if (Index > 0)
      Edits.replace(Text.tokenEnd(Call->getArg(Index - 1)->getEndLoc()),
                    Text.tokenEnd(Call->getArg(Index)->getEndLoc()), "");
  };
  const IoCallPlan *D = Plan.call(Call);
  if (Info.Kind == IoKind::Read) {
    if (!D || !D->Prefetched) {
      Edits.replace(Text.offset(Call->getBeginLoc()), Text.tokenEnd(Call->getEndLoc()),
                    "(++" + Seq + ", -1) /* " + std::string(Info.Name) + ": not prefetched */");
      return;
    }
    Edits.replace(CalleeBegin, CalleeEnd,
                  // (a variadic runtime call takes a NULL stream itself)
                  std::string(Info.Interface == IoInterface::Stdio && !Info.Formatted
                                  ? "ppios_cc_prefetch_"
                                  : "ppios_prefetch_") +
                      Info.Name + (D->Copy ? "_copy" : ""));
    UsesStdio |= Info.Interface == IoInterface::Stdio;
    if (!D->Copy)
      DropArg(Info.BufferArg);
    DropArg(Info.DropArgs[0]);
    DropArg(Info.DropArgs[1]);
    // A formatted read's destinations the PT does not assign: the call suppresses that
    // conversion (a null pointer). A call that assigns nothing is not scanned at all: the
    // runtime speculates (ppios_prefetch_fscanf).
    for (unsigned I : D->NullDestinations)
      Edits.replace(Text.offset(Call->getArg(I)->getBeginLoc()),
                    Text.tokenEnd(Call->getArg(I)->getEndLoc()), "(void *)0");
    // An MPI read's status that is not the PT's own: the MT's memory is never written.
    if (D->IgnoreStatus) {
      const Expr *Status = Call->getArg(Info.StatusArg);
      Edits.replace(Text.offset(Status->getBeginLoc()), Text.tokenEnd(Status->getEndLoc()),
                    "MPI_STATUS_IGNORE");
    }
    std::string Flags;
    for (auto [Bit, Name] : {std::pair<unsigned, const char *>{0x1u, "PPIOS_PF_AFTER_WRITE"},
                             {0x2u, "PPIOS_PF_AFTER_SYNC"}})
      if (D->Flags & Bit)
        Flags += (Flags.empty() ? "" : " | ") + std::string(Name);
    // The call-site id: where the user wrote this read (a string literal, which lives as
    // long as the process, as the runtime needs).
    std::string Site = "\"";
    for (char C : Text.location(Call->getBeginLoc())) {
      if (static_cast<unsigned char>(C) < 0x20)
        continue;
      if (C == '"' || C == '\\')
        Site += '\\';
      Site += C;
    }
    // After the last argument, or, for a variadic formatted read, after its handle.
    const std::string Numbering =
        "++" + Seq + ", " + (Flags.empty() ? "0" : Flags) + ", " + Site + "\"";
    if (Info.Formatted)
      Edits.insert(Text.tokenEnd(Call->getArg(Info.HandleArg)->getEndLoc()), ", " + Numbering);
    else
      Edits.insert(Text.offset(Call->getRParenLoc()), ", " + Numbering);
    return;
  }
  if (Info.Kind == IoKind::Write) {
    Edits.replace(Text.offset(Call->getBeginLoc()), Text.tokenEnd(Call->getEndLoc()),
                  "(++" + Seq + ", -1)");
    return;
  }
  // The PT's streams may be NULL where the MT's are not (the PT never creates files), so
  // its stdio calls go through NULL-safe helpers.
  if (Info.Interface == IoInterface::Stdio && Info.Kind != IoKind::Open) {
    UsesStdio = true;
    Edits.replace(CalleeBegin, CalleeEnd,
                  std::string(Info.Kind == IoKind::Close ? "ppios_cc_pt_" : "ppios_cc_") +
                      Info.Name);
    return;
  }
  if (Info.Action == PtAction::RenamePt) {
    Edits.replace(CalleeBegin, CalleeEnd, std::string("ppios_pt_") + Info.Name);
    DropArg(Info.DropArgs[0]);
    DropArg(Info.DropArgs[1]);
    if (Info.PathArg >= 0) {
      std::string Path = pathArgument(Site);
      if (!Path.empty()) {
        const Expr *Arg = Call->getArg(Info.PathArg);
        Edits.replace(Text.offset(Arg->getBeginLoc()), Text.tokenEnd(Arg->getEndLoc()), Path);
      }
    }
  }
}

std::string PrefetchThreadEmitter::renderCall(const IoCallSite &Site) {
  editCall(Site);
  return Edits.render(Text.buffer(), Text.offset(Site.Call->getBeginLoc()),
                      Text.tokenEnd(Site.Call->getEndLoc()));
}

void PrefetchThreadEmitter::removeUnit(const Unit &U, const std::string &Replacement) {
  auto [Begin, End] = Text.statementRange(U.S);
  bool InBlock = !U.Parent || U.Parent->UnitKind == Unit::Block;
  // A loop body the PT runs nothing of keeps its braces: the loop's poll goes inside.
  const auto *Body = dyn_cast<CompoundStmt>(U.S);
  if (Replacement.empty() && !InBlock && Body && !Body->getLBracLoc().isMacroID() &&
      !Body->getRBracLoc().isMacroID()) {
    Edits.replace(Text.offset(Body->getLBracLoc()) + 1, Text.offset(Body->getRBracLoc()), "");
    return;
  }
  if (!Replacement.empty() || !InBlock) {
    Edits.replace(Begin, End, Replacement.empty() ? "{}" : Replacement);
    return;
  }
  // Remove whole lines when the statement is alone on them.
  llvm::StringRef Buf = Text.buffer();
  unsigned LineBegin = Text.lineStart(Begin);
  bool AloneBefore = Buf.substr(LineBegin, Begin - LineBegin).trim().empty();
  unsigned After = End;
  while (After < Buf.size() && (Buf[After] == ' ' || Buf[After] == '\t'))
    ++After;
  // A comment after the statement on its line goes with it.
  if (Buf.substr(After).startswith("//")) {
    After = Buf.find('\n', After);
    if (After == llvm::StringRef::npos)
      After = Buf.size();
  } else if (Buf.substr(After).startswith("/*")) {
    size_t Close = Buf.find("*/", After);
    size_t NL = Buf.find('\n', After);
    if (Close != llvm::StringRef::npos && (NL == llvm::StringRef::npos || Close < NL)) {
      After = Close + 2;
      while (After < Buf.size() && (Buf[After] == ' ' || Buf[After] == '\t'))
        ++After;
    }
  }
  if (AloneBefore && (After == Buf.size() || Buf[After] == '\n')) {
    Begin = LineBegin;
    End = After < Buf.size() ? After + 1 : After;
  }
  Edits.replace(Begin, End, "");
}

// U as its plan says (UnitPlan::Form).
void PrefetchThreadEmitter::emitUnit(const Unit &U) {
  const UnitPlan &P = Plan.unit(U);
  switch (P.Form) {
  case UnitPlan::Outside:
  case UnitPlan::Jump:
    return;
  case UnitPlan::Counted:
    removeUnit(U, countStatement(Seq, P.Count,
                                 "line " + std::to_string(Text.line(U.S->getBeginLoc())) +
                                     ": I/O the prefetch thread cannot follow, "
                                     "assumed to run once"));
    return;
  case UnitPlan::Dropped:
    removeUnit(U, U.Labeled ? ";" : ""); // `case 1: ;`: the switch's labels stay
    return;
  case UnitPlan::TakesHandles:
    emitTakes(U, P.Takes);
    return;
  case UnitPlan::Block:
    for (const Unit *Child : U.Children)
      emitUnit(*Child);
    return;
  case UnitPlan::Header:
    for (const Expr *C : P.Speculated)
      Edits.replace(Text.offset(C->getBeginLoc()), Text.tokenEnd(C->getEndLoc()),
                    "1 /* speculated: the loop goes on past " + P.SpeculatedWhy + " */");
    for (const IoCallSite &Site : U.IoCalls)
      editCall(Site);
    for (const Unit *Child : U.Children)
      emitUnit(*Child);
    return;
  case UnitPlan::Exit: {
    auto [Begin, End] = Text.statementRange(U.S);
    Edits.replace(Begin, End, programExitCall(U.S)
                                  ? "ppios_pt_exit(); /* the program ends here: so does the "
                                    "prefetch thread */"
                                  : "ppios_pt_exit(); /* main() goes to its cleanup, where it "
                                    "reads nothing: the prefetch thread ends */");
    return;
  }
  case UnitPlan::Return: {
    // The PT returns nothing; what a returned expression pre-executes runs first.
    std::string Replacement = P.KeepsCalls ? keptCalls(U) : "";
    if (P.Count)
      Replacement += (Replacement.empty() ? "" : " ") +
                     countStatement(Seq, P.Count, "not run by the prefetch thread");
    auto [Begin, End] = Text.statementRange(U.S);
    Edits.replace(Begin, End, Replacement.empty() ? "return;" : "{ " + Replacement + " return; }");
    return;
  }
  case UnitPlan::CountOnly:
  case UnitPlan::Declares:
  case UnitPlan::KeptCalls:
  case UnitPlan::AsWritten:
    break;
  }
  // A declaration the PT does not run as written still declares what it names.
  std::string Declared;
  for (const VarDecl *VD : P.Declared)
    Declared += ownDeclaration(VD) + " ";
  std::string Count =
      P.Count ? countStatement(Seq, P.Count, P.CountNames + ": not run by the prefetch thread") : "";
  if (P.Form == UnitPlan::CountOnly) {
    removeUnit(U, Declared + Count);
    return;
  }
  if (P.Form == UnitPlan::Declares) {
    Declared.pop_back();
    removeUnit(U, Declared);
    return;
  }
  if (P.Form == UnitPlan::KeptCalls) {
    // Only the prefetches of this statement can run in the PT.
    std::string Replacement = Declared + keptCalls(U);
    if (P.Count)
      Replacement += " " + Count;
    // Several calls where one statement stands (`for (...) s += f(i) + g(i);`): a block.
    if (U.Parent && U.Parent->UnitKind != Unit::Block && !Replacement.empty())
      Replacement = "{ " + Replacement + " }";
    removeUnit(U, Replacement);
    return;
  }
  for (const IoCallSite &Site : U.IoCalls)
    editCall(Site);
  for (const CloneCallPlan &C : P.CloneCalls)
    editCloneCall(C);
  const auto *DS = dyn_cast<DeclStmt>(U.S);
  if (!DS)
    return;
  std::string Unused;
  for (const Decl *D : DS->decls())
    if (const auto *VD = dyn_cast<VarDecl>(D)) {
      // The PT's copy of the declaration has no program cleanup function (the runtime
      // frees the PT's blocks when it ends).
      if (const auto *A = VD->getAttr<CleanupAttr>(); A && llvm::is_contained(P.StripCleanup, VD))
        Edits.replace(Text.offset(A->getRange().getBegin()), Text.tokenEnd(A->getRange().getEnd()),
                      "__unused__");
      // MPI_File variables of the PT are ppios_pt_mpi_file.
      if (isMpiFileType(VD->getType()) && VD->getTypeSourceInfo()) {
        SourceRange R = VD->getTypeSourceInfo()->getTypeLoc().getSourceRange();
        Edits.replace(Text.offset(R.getBegin()), Text.tokenEnd(R.getEnd()), "ppios_pt_mpi_file");
      }
      if (llvm::is_contained(P.Unused, VD))
        Unused += " (void)" + VD->getNameAsString() + ";";
    }
  if (!Unused.empty())
    Edits.insert(Text.statementRange(U.S).second, Unused);
}

// The handles the MT hands over at U: the PT takes them where U stands, and the MT's
// handoff calls go right after U.
void PrefetchThreadEmitter::emitTakes(const Unit &U, const std::vector<HandoffTake> &Handoffs) {
  std::string Line = std::to_string(Text.line(U.S->getBeginLoc()));
  auto [Begin, End] = Text.statementRange(U.S);
  std::string Takes;
  for (const HandoffTake &H : Handoffs) {
    const char *Iface = handleSuffix(H.Interface);
    std::string Name = H.Var->getNameAsString(), Slot = std::to_string(H.Slot);
    const auto *DS = dyn_cast<DeclStmt>(U.S);
    bool Declares = DS && DS->isSingleDecl() && DS->getSingleDecl() == H.Var;
    // `int n = 0, out = open(...)`: every variable it declares is the PT's own.
    if (DS && !DS->isSingleDecl() && Takes.empty())
      for (const Decl *Dc : DS->decls())
        if (const auto *VD = dyn_cast<VarDecl>(Dc))
          Takes += (Takes.empty() ? "" : " ") + ownDeclaration(VD);
    // A global handle: the PT's is its shadow.
    Takes += (Takes.empty() ? "" : " ") +
             (H.Global ? shadowName(H.Var) : Declares ? declare(H.Var) : Name) +
             " = ppios_pt_take_" + Iface + "(" + Slot + ");";
    MtHandoffs.push_back({End, "\n" + Text.indentation(Begin) + "if (ppios_linked()) ppios_mt_handoff_" + Iface +
                                   "(" + Slot + ", " + Name +
                                   "); /* ppios-cc: for the prefetch thread */"});
  }
  Edits.replace(Begin, End,
                Takes + " /* line " + Line + " sets " +
                    (Handoffs.size() == 1 ? "it" : "them") +
                    ": the main thread hands " + (Handoffs.size() == 1 ? "it" : "them") +
                    " over */");
}

// A clone: the whole function, entered with its own parameters and the caller's counter.
bool PrefetchThreadEmitter::emitClone() {
  const FunctionDecl *FD = Units.function();
  std::string Params;
  for (const ParmVarDecl *P : FD->parameters())
    Params += declare(P) + ", ";
  const auto *Body = cast<CompoundStmt>(FD->getBody());
  std::string Text_ = Edits.render(Text.buffer(), Text.offset(Body->getLBracLoc()) + 1,
                                   Text.offset(Body->getRBracLoc()));
  CloneSignature = "__attribute__((__unused__)) void ppios_pt_" + Fn + "(" + Params +
                   "ppios_seq_t *" + SeqPointer + ")";
  CloneBody = "{" + heapDeclarations(" ", "") + Text_ + "}";
  Definition = cloneDefinition(/*External=*/false);
  return true;
}

std::string PrefetchThreadEmitter::clonePrototype(bool External) const {
  return (External ? "" : "static ") + CloneSignature + ";";
}

std::string PrefetchThreadEmitter::cloneDefinition(bool External) const {
  return "/* ppios-cc: the prefetch-thread clone of " + Fn + "(): its statements that "
         "decide which reads\n * happen, with reads pre-executed as ppios_prefetch_* "
         "calls numbered on the caller's\n * counter " + Seq + ", and nothing else. */\n" +
         (External ? "" : "static ") + CloneSignature + " " + CloneBody + "\n";
}

// Every loop the PT runs polls the runtime once per iteration, so that the PT stops at
// once when the program ends or prefetching is switched off, whatever the loop's condition
// (a condition the PT cannot compute is dropped, leaving an endless loop). Added last:
// insertions added after the other edits are never part of what those were computed from.
void PrefetchThreadEmitter::addLoopPolls() {
  std::string Poll;
  auto Plain = [](const Stmt *St) {
    return St && !St->getBeginLoc().isMacroID() && !St->getEndLoc().isMacroID();
  };
  auto IntoBody = [&](const Stmt *Body) {
    if (!Plain(Body))
      return false;
    if (const auto *CS = dyn_cast<CompoundStmt>(Body)) {
      Edits.insert(Text.offset(CS->getLBracLoc()) + 1, std::string(" ") + Poll + ";");
      return true;
    }
    auto [Begin, End] = Text.statementRange(Body);
    Edits.insert(Begin, std::string("{ ") + Poll + "; ");
    Edits.insert(End, " }");
    return true;
  };
  for (const auto &Owned : Units.all()) {
    const Unit &U = *Owned;
    UnitPlan::PollKind Kind = Plan.unit(U).LoopPoll;
    if (Kind == UnitPlan::NoPoll)
      continue;
    // Past an exit it cannot evaluate, the PT stays within a window of the MT.
    Poll = Kind == UnitPlan::Speculate ? "ppios_pt_speculate(" + Seq + ")" : "ppios_pt_poll()";
    if (const auto *FS = dyn_cast<ForStmt>(U.S)) {
      // In the increment: the body may be a statement the PT replaces.
      if (const Expr *Inc = FS->getInc()) {
        if (Plain(Inc))
          Edits.insert(Text.tokenEnd(Inc->getEndLoc()), std::string(", ") + Poll);
      } else if (!FS->getRParenLoc().isMacroID()) {
        Edits.insert(Text.offset(FS->getRParenLoc()), " " + Poll);
      }
    } else if (const auto *WS = dyn_cast<WhileStmt>(U.S)) {
      IntoBody(WS->getBody());
    } else if (const auto *DS = dyn_cast<DoStmt>(U.S)) {
      IntoBody(DS->getBody());
    }
  }
}

// The PT's own memory accesses must be safe whatever values it computes with (data that
// another process has not written yet, a guard the PT could not evaluate, a loop it runs
// past an exit): the checks the plan puts on subscripts and pointers (BoundGuard) escape
// when out of bounds, and the PT allocates through the runtime, within PPIOS_CACHE_MB
// (ppios_pt_malloc escapes instead of returning NULL). Added last, like the polls.
void PrefetchThreadEmitter::addMemoryGuards() {
  // A unit's own text: the header of a control unit, the whole of any other.
  auto Parts = [](const Unit &U) {
    if (U.isControl())
      return headerParts(U.S);
    return U.UnitKind == Unit::Block ? std::vector<const Stmt *>{} : std::vector<const Stmt *>{U.S};
  };
  // Each check wraps a range of the text: `check(` in front, `, ...)` behind. Nested and
  // equal ranges (a macro's argument checked for two arrays) must pair up: fronts from the
  // outermost in, backs from the innermost out.
  struct Wrap {
    unsigned Begin, End;
    std::string Front, Back;
  };
  std::vector<Wrap> Wraps;
  for (const auto &Owned : Units.all()) {
    const Unit &U = *Owned;
    const UnitPlan &P = Plan.unit(U);
    if (!P.Guarded)
      continue;
    for (const BoundGuard &G : P.Bounds) {
      const Expr *At = G.Index ? G.Index : G.Pointer;
      Wrap W{Text.offset(At->getBeginLoc()), Text.tokenEnd(At->getEndLoc()), "", ""};
      if (G.GuardKind == BoundGuard::Elements) {
        W.Front = "ppios_pt_index(";
        W.Back = ", " + std::to_string(G.Count) + ")";
      } else {
        // The block's pointer as the PT's text names it (a variable-length array is its
        // heap block), and the check of its element.
        const HeapLocal *H = Plan.heapLocal(G.Base);
        std::string Base = H ? "(*" + H->Name + ")" : G.Base->getNameAsString();
        std::string Check =
            G.GuardKind == BoundGuard::Block ? "ppios_pt_block_index(" : "ppios_pt_object_index(";
        if (G.Index) {
          W.Front = Check + Base + ", ";
          W.Back = ", sizeof *" + Base + ")";
        } else {
          W.Front = "(";
          W.Back = " + " + Check + Base + ", 0, sizeof *" + Base + "))";
        }
      }
      if (std::none_of(Wraps.begin(), Wraps.end(), [&](const Wrap &O) {
            return O.Begin == W.Begin && O.End == W.End && O.Front == W.Front && O.Back == W.Back;
          }))
        Wraps.push_back(W);
    }
    // Allocations through the runtime.
    llvm::SmallVector<const Stmt *, 16> Work;
    for (const Stmt *Part : Parts(U))
      if (Part)
        Work.push_back(Part);
    while (!Work.empty()) {
      const Stmt *St = Work.pop_back_val();
      for (const Stmt *Child : St->children())
        if (Child)
          Work.push_back(Child);
      const auto *Call = dyn_cast<CallExpr>(St);
      if (!Call || St->getBeginLoc().isMacroID() || St->getEndLoc().isMacroID())
        continue;
      const FunctionDecl *Callee = Call->getDirectCallee();
      const Expr *Name = Call->getCallee()->IgnoreParenImpCasts();
      if (Callee && Callee->getIdentifier() && !Name->getBeginLoc().isMacroID()) {
        StringRef N = Callee->getName();
        if (N == "malloc" || N == "calloc" || N == "realloc" || N == "free")
          Edits.replace(Text.offset(Name->getBeginLoc()), Text.tokenEnd(Name->getEndLoc()),
                        "ppios_pt_" + N.str());
      }
    }
  }
  std::vector<size_t> Order(Wraps.size());
  for (size_t I = 0; I < Order.size(); ++I)
    Order[I] = I;
  std::stable_sort(Order.begin(), Order.end(), [&](size_t A, size_t B) {
    return Wraps[A].Begin != Wraps[B].Begin ? Wraps[A].Begin < Wraps[B].Begin
                                            : Wraps[A].End > Wraps[B].End;
  });
  for (size_t I : Order)
    Edits.insert(Wraps[I].Begin, Wraps[I].Front);
  std::stable_sort(Order.begin(), Order.end(), [&](size_t A, size_t B) {
    if (Wraps[A].End != Wraps[B].End)
      return Wraps[A].End < Wraps[B].End;
    if (Wraps[A].Begin != Wraps[B].Begin)
      return Wraps[A].Begin > Wraps[B].Begin;
    return A > B;
  });
  for (size_t I : Order)
    Edits.insert(Wraps[I].End, Wraps[I].Back);
}

// Big locals are heap blocks (HeapLocal): every name of one in the PT's text is (*block),
// which has the array's type (sizeof, &, decay all work as on the variable). The plan
// placed only locals whose every name is spelled in the file.
void PrefetchThreadEmitter::renameHeapLocals() {
  if (Plan.HeapLocals.empty())
    return;
  forEachStmtIn(Units.function()->getBody(), [&](const Stmt *St) {
    if (const auto *DRE = dyn_cast<DeclRefExpr>(St))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
        if (const HeapLocal *H = Plan.heapLocal(VD))
          Edits.replace(Text.offset(DRE->getLocation()), Text.tokenEnd(DRE->getLocation()),
                        "(*" + H->Name + ")");
  });
}

// The name of one of H's companions: its slot, its type.
std::string PrefetchThreadEmitter::heapName(const HeapLocal &H, const char *Prefix) {
  return Prefix + H.Name.substr(std::string("ppios_pt_h").size());
}

// The heap blocks of the function's big locals, declared at its entry: one block each,
// allocated at the first entry and kept in a static slot (a clone called in a loop would
// otherwise allocate one per call until the budget runs out; no clone is recursive, and
// the PT runs once per process). ppios_pt_calloc escapes beyond PPIOS_CACHE_MB; the
// runtime frees the blocks when the PT ends.
std::string PrefetchThreadEmitter::heapDeclarations(const std::string &Before,
                                                    const std::string &After) const {
  std::string Out;
  for (const HeapLocal &H : Plan.HeapLocals) {
    std::string Slot = heapName(H, "ppios_pt_hs");
    if (H.Sized) {  // allocated where it is declared (ownDeclaration)
      Out += Before + "static void *" + Slot + ";" + After;
      continue;
    }
    ASTContext &Ctx = H.Var->getASTContext();
    QualType T = fileScopeType(Ctx, H.Var->getType());
    if (T.isNull())
      T = H.Var->getType();
    Qualifiers Quals;
    T = T->isArrayType() ? Ctx.getUnqualifiedArrayType(T, Quals) : T.getUnqualifiedType();
    std::string Pointer = spellAtFileScope(Ctx, Ctx.getPointerType(T), H.Name);
    Out += Before + "static void *" + Slot + "; " + Pointer + " = " + Slot + " ? " + Slot +
           " : (" + Slot + " = ppios_pt_calloc(1, sizeof *" + H.Name + "));" + After;
  }
  return Out;
}

void PrefetchThreadEmitter::renameGlobalHandles() {
  if (Plan.GlobalHandles.empty())
    return;
  llvm::SmallVector<const Stmt *, 16> Work{Units.function()->getBody()};
  while (!Work.empty()) {
    const Stmt *St = Work.pop_back_val();
    if (const auto *DRE = dyn_cast<DeclRefExpr>(St))
      if (const auto *VD = dyn_cast<VarDecl>(DRE->getDecl()))
        if (Plan.isGlobalHandle(VD) && Text.spelledInFile(DRE->getLocation()))
          Edits.replace(Text.offset(DRE->getLocation()), Text.tokenEnd(DRE->getLocation()),
                        shadowName(VD));
    for (const Stmt *Child : St->children())
      if (Child)
        Work.push_back(Child);
  }
}

bool PrefetchThreadEmitter::emit() {
  const auto &Top = Units.topLevel();
  int S = Plan.Start;
  if (!Plan.Unbuildable.empty()) {
    Why = Plan.Unbuildable;
    return false;
  }
  CtxName = own("ppios_ctx");
  std::string SeqName = own("ppios_seq"), ArgName = own("ppios_arg"), Seq0 = own("ppios_seq0");
  Seq = Plan.Clone ? "*" + SeqName : SeqName;
  SeqPointer = Plan.Clone ? SeqName : "&" + SeqName;

  // Global handles: every reference of the PT is to its shadow; big locals are heap
  // blocks. First, so that the edits computed from renderings include them.
  renameGlobalHandles();
  renameHeapLocals();
  // Body: the user's statements from the start point to the end of the function.
  for (int I = S; I < static_cast<int>(Top.size()); ++I)
    emitUnit(*Top[I]);
  addLoopPolls();
  addMemoryGuards();
  std::string Body;
  if (Plan.Clone)
    return emitClone();
  if (S < static_cast<int>(Top.size())) {
    // From the start of the line, unless something else precedes the statement there
    // (main's opening brace, an earlier statement): statements are copied, not lines.
    unsigned Begin = Text.statementRange(Top[S]->S).first;
    unsigned LineBegin = Text.lineStart(Begin);
    if (Text.buffer().substr(LineBegin, Begin - LineBegin).trim().empty())
      Begin = LineBegin;
    else
      Body = "  ";
    unsigned End = Text.offset(cast<CompoundStmt>(Units.function()->getBody())->getRBracLoc());
    Body += Edits.render(Text.buffer(), Begin, End);
  }

  // Prologue: captured values, then the descriptors the MT opened before the start.
  std::string Indent = "  ";
  std::string Prologue = heapDeclarations(Indent, "\n");
  for (const VarDecl *VD : Plan.Captured) {
    std::string Name = VD->getNameAsString();
    if (Plan.isGlobalHandle(VD)) {
      // Reopened by the start block into the context; the PT's is the shadow.
      Prologue += Indent + shadowName(VD) + " = " + CtxName + "->" + Name + ";\n";
      continue;
    }
    Prologue += Indent + declare(VD) + ";\n" + Indent + "__builtin_memcpy(&" + Name +
                ", &" + CtxName + "->" + Name + ", sizeof " + Name + ");\n";
  }
  // Locals declared before the start whose values the PT does not need but which its
  // statements name (C89 style: `int i, fd;` at the top, set after the start): declared,
  // zeroed, so that the thread compiles and never reads an indeterminate value.
  for (const VarDecl *VD : Plan.PrologueDeclared) {
    if (Plan.heapLocal(VD))
      continue; // its block, zeroed, is declared at the entry
    std::string Own = ownDeclaration(VD);
    if (!VD->isStaticLocal()) // one line for the declaration, one for its value
      Own.replace(Own.find("; ") + 1, 1, "\n" + Indent);
    Prologue += Indent + Own + "\n";
  }
  // The MT's start block gives the PT's copies of its handles handles of their own.
  std::vector<std::string> Reopens;
  for (const ReopenedHandle &H : Plan.Reopened) {
    std::string Name = H.Var->getNameAsString();
    if (H.Field)
      Name += "." + H.Field->getNameAsString();
    Reopens.push_back(CtxName + "." + Name + " = ppios_pt_reopen_" +
                      handleSuffix(H.Interface) + "(" + Name + ");");
  }

  // The context the MT fills in. ppios_seq0: the transfers the MT has started when it
  // starts the PT, counted by the runtime (exact, where counting the statements before
  // the start would have to guess how often their loops and branches ran).
  std::string Struct = "struct ppios_pt_ctx_" + Fn + " {\n  ppios_seq_t " + Seq0 + ";\n";
  for (const VarDecl *VD : Plan.Captured)
    Struct += "  " + declare(VD) + ";\n";
  for (const PathCapture &P : Paths)
    Struct += "  char " + P.Field + "[4096];\n";
  Struct += "};\n";
  // The functions main() declares only in its blocks, which the thread function (written
  // before main()) calls.
  std::string Prototypes;
  for (const FunctionDecl *FD : Plan.BlockFunctions)
    Prototypes += spellAtFileScope(FD->getASTContext(), FD->getType(), FD->getName()) +
                  "; /* declared in a block of " + Fn + "() */\n";
  if (!Prototypes.empty())
    Prototypes += "\n";

  Definition =
      "/* ppios-cc: the prefetch thread of " + Fn + "(). It runs the statements of " + Fn +
      "() that decide\n * which reads happen, starting from the values the main thread "
      "computed before\n * starting it, and pre-executes each read as a ppios_prefetch_* call "
      "numbered like\n * the main thread's I/O. It has no side effects: it counts writes "
      "instead of doing them. */\n" +
      Struct + "\n" +
      (Paths.empty() ? std::string() : std::string(CopyString)) +
      (UsesStdio && !HelpersProvided ? StdioHelpers : std::string()) + Prototypes +
      "static void ppios_pt_" + Fn + "(void *" + ArgName + ") {\n"
      "  const struct ppios_pt_ctx_" + Fn + " *" + CtxName + " = " + ArgName + ";\n"
      "  ppios_seq_t " + SeqName + " = " + CtxName + "->" + Seq0 + ";\n" +
      "  (void)" + CtxName + ";\n" + Prologue + Body + "}\n\n";

  // The MT's side, right after the last statement the PT depends on.
  std::string In;
  if (S > 0) {
    StartAt = Text.statementRange(Top[S - 1]->S).second;
    In = Text.indentation(Text.offset(Top[S - 1]->S->getBeginLoc()));
  } else {
    const auto *Body = cast<CompoundStmt>(Units.function()->getBody());
    StartAt = Text.offset(Body->getLBracLoc()) + 1;
    In = "  ";
  }
  // Only with libppios linked (a plain mpicc link of this object runs the original).
  Start = "\n" + In + "if (ppios_linked()) { /* ppios-cc: start the prefetch thread of " + Fn + "() */\n";
  const std::string &C = CtxName;
  Start += In + "  struct ppios_pt_ctx_" + Fn + " " + C + ";\n";
  Start += In + "  __builtin_memset(&" + C + ", 0, sizeof " + C + ");\n";
  for (const VarDecl *VD : Plan.Captured) {
    std::string Name = VD->getNameAsString();
    bool Reopened = false;
    for (const ReopenedHandle &H : Plan.Reopened)
      Reopened |= H.Var == VD && !H.Field;
    // (A `register` variable has no address: its value is assigned.)
    if (!Reopened && VD->getStorageClass() == SC_Register && !VD->getType()->isArrayType())
      Start += In + "  " + C + "." + Name + " = " + Name + ";\n";
    else if (!Reopened)
      Start += In + "  __builtin_memcpy(&" + C + "." + Name + ", &" + Name + ", sizeof " + C +
               "." + Name + ");\n";
  }
  for (const PathCapture &P : Paths)
    Start += In + "  ppios_cc_copy_string(" + C + "." + P.Field + ", sizeof " + C + "." +
             P.Field + ", " + P.Expression + ");\n";
  for (const std::string &R : Reopens)
    Start += In + "  " + R + "\n";
  Start += In + "  " + C + "." + Seq0 + " = ppios_mt_seq();\n";
  Start += In + "  ppios_pt_start(ppios_pt_" + Fn + ", &" + C + ", sizeof " + C + ");\n";
  Start += In + "}";
  return true;
}

} // namespace ppios
