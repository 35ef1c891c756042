#include "Transformer.h"

#include "IoCallTable.h"
#include "PrefetchPlanner.h"
#include "PrefetchThreadEmitter.h"
#include "SideEffects.h"
#include "SourceText.h"
#include "StatementUnits.h"

#include "clang/AST/ASTConsumer.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Lex/PPCallbacks.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/Rewrite/Core/Rewriter.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace clang;

namespace ppios {

namespace {

// Where the last #include of the main file ends: the runtime header goes after it, so the
// user's feature-test macros and headers come first.
class IncludeTracker : public PPCallbacks {
public:
  IncludeTracker(const SourceManager &SM, SourceLocation &Last) : SM(SM), Last(Last) {}
  void InclusionDirective(SourceLocation HashLoc, const Token &, StringRef, bool,
                          CharSourceRange FilenameRange, OptionalFileEntryRef, StringRef,
                          StringRef, const Module *, SrcMgr::CharacteristicKind) override {
    if (SM.isWrittenInMainFile(HashLoc))
      Last = FilenameRange.getEnd();
  }

private:
  const SourceManager &SM;
  SourceLocation &Last;
};

struct FoundCall {
  const CallExpr *Call;
  const IoCallInfo *Info;
  const FunctionDecl *Function;
};

class IoCallCollector : public RecursiveASTVisitor<IoCallCollector> {
public:
  explicit IoCallCollector(const SourceManager &SM) : SM(SM) {}
  std::vector<FoundCall> Calls;
  const FunctionDecl *Main = nullptr;

  bool TraverseFunctionDecl(FunctionDecl *FD) {
    if (!FD->hasBody() || !SM.isWrittenInMainFile(SM.getExpansionLoc(FD->getBeginLoc())))
      return true;
    if (FD->isMain())
      Main = FD;
    Current = FD;
    RecursiveASTVisitor::TraverseFunctionDecl(FD);
    Current = nullptr;
    return true;
  }
  bool VisitCallExpr(CallExpr *Call) {
    if (!Current)
      return true;
    if (const IoCallInfo *Info = IoCallTable::lookup(Call))
      Calls.push_back({Call, Info, Current});
    return true;
  }

private:
  const SourceManager &SM;
  const FunctionDecl *Current = nullptr;
};

class TransformConsumer : public ASTConsumer {
public:
  TransformConsumer(CompilerInstance &CI, const TransformOptions &Options,
                    TransformResult &Result, SourceLocation &LastInclude)
      : CI(CI), Options(Options), Result(Result), LastInclude(LastInclude) {}

  void HandleTranslationUnit(ASTContext &Ctx) override {
    SourceManager &SM = Ctx.getSourceManager();
    DiagnosticsEngine &Diags = CI.getDiagnostics();
    if (Diags.hasErrorOccurred())
      return;
    IoCallCollector Collector(SM);
    Collector.TraverseDecl(Ctx.getTranslationUnitDecl());
    bool AnyRead = false;
    for (const FoundCall &F : Collector.Calls)
      AnyRead |= F.Info->Kind == IoKind::Read;
    Result.Source = SM.getBufferData(SM.getMainFileID()).str();
    if (!AnyRead)
      return;

    Rewriter R(SM, Ctx.getLangOpts());
    SourceText Text(SM, Ctx.getLangOpts());
    // MT: every I/O call becomes the runtime's drop-in replacement.
    for (const FoundCall &F : Collector.Calls) {
      if (!IoCallTable::renamedInMainThread(*F.Info))
        continue;
      SourceLocation Callee = F.Call->getCallee()->getBeginLoc();
      // A call written in a macro argument (SHOW("x", read(...))) is spelled in the file.
      if (Callee.isMacroID() && SM.isMacroArgExpansion(Callee) &&
          SM.isWrittenInMainFile(SM.getSpellingLoc(Callee)))
        Callee = SM.getSpellingLoc(Callee);
      if (Callee.isMacroID()) {
        report(Diags, DiagnosticsEngine::Warning, Callee,
               std::string("'") + F.Info->Name +
                   "' is called through a macro; ppios-cc leaves it to the C library");
        continue;
      }
      R.ReplaceText(Callee, static_cast<unsigned>(strlen(F.Info->Name)),
                    std::string("ppios_") + F.Info->Name);
    }

    // PT: the prefetch thread of main().
    std::vector<std::pair<const CallExpr *, std::string>> Missed;
    std::vector<const CallExpr *> Prefetched;
    SideEffectOracle Oracle;
    std::string Failure;
    if (Collector.Main) {
      FunctionUnits Units(Ctx, Collector.Main, Oracle);
      PrefetchPlanner Plan(Units);
      bool Planned = Plan.plan();
      PrefetchThreadEmitter Emitter(Text, Units, Plan);
      if (Planned && !Emitter.emit()) {
        Planned = false;
        Failure = Emitter.why();
      }
      for (const ReadDecision &D : Plan.decisions()) {
        if (Planned && D.Prefetched)
          Prefetched.push_back(D.Site.Call);
        else
          Missed.push_back({D.Site.Call, D.Prefetched ? "the prefetch thread cannot be built: " +
                                                            Failure
                                                      : D.Reason});
      }
      if (Planned) {
        const FunctionDecl *Main = Collector.Main;
        SourceLocation Before = Main->getBeginLoc();
        if (const RawComment *Comment = Ctx.getRawCommentForDeclNoCache(Main))
          Before = Comment->getBeginLoc();
        R.InsertTextBefore(Before, Emitter.threadDefinition());
        R.InsertTextAfter(SM.getLocForStartOfFile(SM.getMainFileID())
                              .getLocWithOffset(Emitter.startOffset()),
                          Emitter.startBlock());
        for (const Unit *U : Plan.approximateSequence())
          report(Diags, DiagnosticsEngine::Remark, U->S->getBeginLoc(),
                 "prefetch sequence numbers after this statement are estimates: it performs "
                 "I/O a number of times the prefetch thread cannot compute");
      }
    }
    for (const FoundCall &F : Collector.Calls) {
      if (F.Info->Kind != IoKind::Read || F.Function == Collector.Main)
        continue;
      Missed.push_back({F.Call, "it is in '" + F.Function->getNameAsString() +
                                    "'; only the reads of main() are pre-executed"});
    }
    if (!Collector.Main)
      for (auto &M : Missed)
        M.second += " (this file has no main())";
    for (const auto &[Call, Why] : Missed)
      reportMissed(Diags, Call->getBeginLoc(), Why);
    if (Options.ReportPrefetched)
      for (const CallExpr *Call : Prefetched)
        report(Diags, DiagnosticsEngine::Remark, Call->getBeginLoc(),
               "read prefetched by the prefetch thread");

    std::string Include = "\n#include <ppios/ppios.h> /* added by ppios-cc */\n";
    if (LastInclude.isValid()) {
      unsigned Offset = SM.getFileOffset(SM.getExpansionLoc(LastInclude));
      StringRef Buf = SM.getBufferData(SM.getMainFileID());
      size_t EOL = Buf.find('\n', Offset);
      R.InsertTextAfter(SM.getLocForStartOfFile(SM.getMainFileID())
                            .getLocWithOffset(EOL == StringRef::npos ? Buf.size() : EOL + 1),
                        Include.substr(1));
    } else {
      R.InsertTextBefore(SM.getLocForStartOfFile(SM.getMainFileID()), Include.substr(1));
    }
    if (const RewriteBuffer *Buf = R.getRewriteBufferFor(SM.getMainFileID()))
      Result.Source = std::string(Buf->begin(), Buf->end());
    Result.Changed = true;
  }

private:
  void report(DiagnosticsEngine &Diags, DiagnosticsEngine::Level Level, SourceLocation Loc,
              const std::string &Message) {
    unsigned ID = Diags.getCustomDiagID(Level, "%0");
    Diags.Report(Loc, ID) << Message;
  }
  void reportMissed(DiagnosticsEngine &Diags, SourceLocation Loc, const std::string &Why) {
    DiagnosticsEngine::Level Level = DiagnosticsEngine::Remark;
    switch (Options.Missed) {
    case TransformOptions::Severity::Ignore:
      return;
    case TransformOptions::Severity::Remark:
      Level = DiagnosticsEngine::Remark;
      break;
    case TransformOptions::Severity::Warning:
      Level = DiagnosticsEngine::Warning;
      break;
    case TransformOptions::Severity::Error:
      Level = DiagnosticsEngine::Error;
      break;
    }
    report(Diags, Level, Loc, "read not prefetched: " + Why + " [-Rppios-missed]");
  }

  CompilerInstance &CI;
  const TransformOptions &Options;
  TransformResult &Result;
  SourceLocation &LastInclude;
};

class TransformAction : public ASTFrontendAction {
public:
  TransformAction(const TransformOptions &Options, TransformResult &Result)
      : Options(Options), Result(Result) {}

  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance &CI, StringRef) override {
    CI.getPreprocessor().addPPCallbacks(
        std::make_unique<IncludeTracker>(CI.getSourceManager(), LastInclude));
    return std::make_unique<TransformConsumer>(CI, Options, Result, LastInclude);
  }

private:
  const TransformOptions &Options;
  TransformResult &Result;
  SourceLocation LastInclude;
};

} // namespace

TransformResult transformFile(const std::string &Path, const std::vector<std::string> &Args,
                              const TransformOptions &Options) {
  TransformResult Result;
  auto Code = llvm::MemoryBuffer::getFile(Path);
  if (!Code) {
    llvm::errs() << "ppios-cc: error: cannot read " << Path << ": " << Code.getError().message()
                 << "\n";
    return Result;
  }
  bool Ok = tooling::runToolOnCodeWithArgs(std::make_unique<TransformAction>(Options, Result),
                                           (*Code)->getBuffer(), Args, Path, "clang");
  Result.Success = Ok;
  return Result;
}

} // namespace ppios
