// The transformation of one C file: MT calls renamed to the runtime's, the prefetch thread
// of main(), and the prefetch-thread clones of the functions main() reaches reads through.
//
// Clones (same file). Every function of the file that leads to reads, directly or through
// calls, is planned callees first (a call cycle gets no clone) as if the PT entered it at
// its first statement: the same slicer as for main() (PrefetchPlanner with AsClone); reads
// become ppios_prefetch_* calls, writes, output and MPI go but are counted, and the clone
// ppios_pt_<name>(original parameters, ppios_seq_t *ppios_seq) numbers its reads on the
// caller's counter. Its CloneSummary says what each parameter is to it: unused (the caller
// passes 0), a value, a descriptor (the caller passes its PT's own), or a pointer it reads
// through (the caller must pass memory the PT owns: a struct it copied at the start or
// declared itself; pointers inside such structs must be descriptors or strings). A call in
// the PT's slice is pre-executed through the clone only if every argument qualifies;
// otherwise the reads below it get a remark saying why. A clone never stores outside its
// locals, and reads globals in place only if they are static, not volatile, changed by no
// function but main() and not after the PT starts. A struct field is a descriptor when the
// file (the program, at a link) only ever sets it from an open; the MT's start block gives
// the PT's copy of a struct its own handles (ppios_pt_reopen_*). Clones are written after
// their functions (prototypes after earlier declarations) and only when main()'s PT reaches them.
//
// Global handles. A file-scope descriptor (int fd, FILE *, MPI_File; static, or at a
// whole-program link extern and declared by no other unit) that the program only sets
// from opens, closes or NULL/-1, whose address is only taken for MPI_File_open/close, and
// whose setters are called directly and not recursively (FileFacts::finishGlobals), is
// never touched by the PT: the file gets a shadow `static ... ppios_pt_g_<name>` (after the
// runtime header, invalid at first), and every PT reference, in main()'s PT and in clones,
// is renamed to it. A main() statement that sets it (directly, or through a call whose
// side-effect summary lists it in GlobalsStored) is like any handle's: before the start,
// the start block reopens it into the context and the PT copies that into the shadow;
// after, a top-level statement the PT does not run hands it over (the take goes to the
// shadow); in a loop or a condition it gets a remark. Clones read through shadows freely
// (CloneSummary::GlobalHandles); a caller whose shadow may be stale does not call them.
//
// Other translation units (transformProgram, ppios-cc's link step). The units are parsed
// in rounds; each round exports, by name, what the others need: the clone summaries of its
// extern functions, their side effects, and which struct fields it sets from opens only. A
// unit imports them for the functions it only declares, so its PT calls ppios_pt_<name>
// of the unit that defines <name> (exported clones have external linkage). Rounds repeat
// until the exports stop changing (a chain of calls through k units needs k rounds); only
// the last one reports remarks. A field is a descriptor field only if no unit sets it to
// anything but an open's result.
#include "Transformer.h"

#include "FileScopeType.h"
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
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Lex/Lexer.h"
#include "clang/Lex/PPCallbacks.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

using namespace clang;

namespace ppios {

namespace {

// Where the last #include of the main file ends: the runtime header goes after it, so the
// user's feature-test macros and headers come first. Also lists the user headers entered.
class IncludeTracker : public PPCallbacks {
public:
  IncludeTracker(const SourceManager &SM, SourceLocation &Last, std::vector<std::string> &Files)
      : SM(SM), Last(Last), Files(Files) {}
  void InclusionDirective(SourceLocation HashLoc, const Token &, StringRef, bool,
                          CharSourceRange FilenameRange, OptionalFileEntryRef, StringRef,
                          StringRef, const Module *, SrcMgr::CharacteristicKind) override {
    if (SM.isWrittenInMainFile(HashLoc))
      Last = FilenameRange.getEnd();
  }
  void FileChanged(SourceLocation Loc, FileChangeReason Reason, SrcMgr::CharacteristicKind Kind,
                   FileID) override {
    if (Reason != EnterFile || Kind != SrcMgr::C_User)
      return;
    FileID ID = SM.getFileID(Loc);
    if (ID == SM.getMainFileID())
      return;
    if (OptionalFileEntryRef File = SM.getFileEntryRefForID(ID)) {
      llvm::SmallString<256> Path(File->getName());
      llvm::sys::fs::make_absolute(Path);
      llvm::sys::path::remove_dots(Path, true);
      if (std::find(Files.begin(), Files.end(), Path.str()) == Files.end())
        Files.push_back(std::string(Path));
    }
  }

private:
  const SourceManager &SM;
  SourceLocation &Last;
  std::vector<std::string> &Files;
};

// What the units of one program tell each other (see the top of this file), by name.
struct ExportedFunction {
  CalleeEffect Effect;
  bool HasClone = false;
  std::vector<ParamRole> Params;
  std::vector<IoInterface> HandleInterfaces;
  int Score = 0;
  bool operator==(const ExportedFunction &O) const {
    return Effect.Effect == O.Effect.Effect && Effect.StoredArgs == O.Effect.StoredArgs &&
           Effect.ReadsGlobalPointer == O.Effect.ReadsGlobalPointer &&
           Effect.StoresKnown == O.Effect.StoresKnown && HasClone == O.HasClone &&
           Params == O.Params && HandleInterfaces == O.HandleInterfaces && Score == O.Score;
  }
};
struct ProgramFacts {
  std::map<std::string, ExportedFunction> Functions; // every unit's extern functions
  std::map<std::string, IoInterface> FieldOpens;     // "reader.fp": set from opens somewhere
  std::set<std::string> FieldOthers;                 // set to something else somewhere
  // Per name of a global with external linkage: how many units declare it (outside system
  // headers). One that only its defining unit names may be a global handle there.
  std::map<std::string, unsigned> GlobalNames;
  bool handleField(const std::string &Key, IoInterface &Iface) const {
    auto It = FieldOpens.find(Key);
    if (Key.empty() || It == FieldOpens.end() || FieldOthers.count(Key))
      return false;
    Iface = It->second;
    return true;
  }
};

// The name of a struct field across units: "<record>.<field>", empty for anonymous ones.
std::string fieldKey(const FieldDecl *F) {
  const RecordDecl *RD = F->getParent();
  std::string Record = RD->getName().str();
  if (Record.empty())
    if (const TypedefNameDecl *TD = RD->getTypedefNameForAnonDecl())
      Record = TD->getName().str();
  return Record.empty() ? "" : Record + "." + F->getName().str();
}

// The text ppios-cc adds to a file, as insertions at offsets of the original, rendered
// so that the original keeps its presumed name and line numbers: the output starts with
// #line 1 "<name as the compiler was given it>" and every insertion is followed by a #line
// directive naming the original line it resumes at. __FILE__, __LINE__, assert messages,
// diagnostics and debug line tables then see the file the user wrote. The insertions stay
// pieces of their own (SourcePiece::Generated), so that the driver can compile them apart.
class SourceInserts {
public:
  SourceInserts(const SourceManager &SM, const std::string &Name) : SM(SM), Name(Name) {}
  // At the same offset, insertions go in the order of their places, then in the order
  // they were made: the runtime's header first, then prototypes, then the rest.
  enum Place { Header, Prototype, Anywhere };
  // Text goes at Offset.
  void insert(unsigned Offset, std::string Text, Place P = Anywhere) {
    Inserts.push_back({Offset, P, Inserts.size(), std::move(Text)});
  }
  // Only the main file is rewritten: text at a location in a header is dropped.
  void insert(SourceLocation Loc, std::string Text, Place P = Anywhere) {
    SourceLocation At = SM.getExpansionLoc(Loc);
    if (SM.isWrittenInMainFile(At))
      insert(SM.getFileOffset(At), std::move(Text), P);
  }
  bool empty() const { return Inserts.empty(); }
  // The file in pieces: the user's text and, at each offset, the insertions made there.
  std::vector<SourcePiece> render() const {
    StringRef Buf = SM.getBufferData(SM.getMainFileID());
    std::vector<Insert> Sorted = Inserts;
    std::sort(Sorted.begin(), Sorted.end(), [](const Insert &A, const Insert &B) {
      return std::tie(A.Offset, A.Rank, A.Order) < std::tie(B.Offset, B.Rank, B.Order);
    });
    std::vector<SourcePiece> Pieces{{false, "#line 1 \"" + escaped(Name) + "\"\n"}};
    unsigned Pos = 0, Line = 1;
    for (size_t I = 0; I < Sorted.size(); ++I) {
      unsigned At = std::min<unsigned>(Sorted[I].Offset, Buf.size());
      Line += Buf.substr(Pos, At - Pos).count('\n');
      std::string &Before = Pieces.back().Text;
      Before += Buf.substr(Pos, At - Pos);
      Pos = At;
      if (!Before.empty() && Before.back() != '\n')
        Before += '\n';
      std::string Text = StringRef(Sorted[I].Text).ltrim('\n').str();
      if (!Text.empty() && Text.back() != '\n')
        Text += '\n';
      Pieces.push_back({true, std::move(Text)});
      Pieces.push_back({false, ""});
      if (I + 1 == Sorted.size() || Sorted[I + 1].Offset != Sorted[I].Offset)
        Pieces.back().Text = "#line " + std::to_string(Line) + "\n";
    }
    Pieces.back().Text += Buf.substr(Pos);
    return Pieces;
  }

private:
  struct Insert {
    unsigned Offset;
    Place Rank;
    size_t Order;
    std::string Text;
  };
  static std::string escaped(const std::string &S) {
    std::string Out;
    for (char C : S) {
      if (C == '\\' || C == '"')
        Out += '\\';
      Out += C;
    }
    return Out;
  }
  const SourceManager &SM;
  std::string Name;
  std::vector<Insert> Inserts;
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

  // Only definitions hold calls. A declaration inside a function (`long offset_of(int);`
  // in a block of main()) leaves the scan of that function going on: Current is restored,
  // never cleared.
  bool TraverseFunctionDecl(FunctionDecl *FD) {
    if (!FD->doesThisDeclarationHaveABody() ||
        !SM.isWrittenInMainFile(SM.getExpansionLoc(FD->getBeginLoc())))
      return true;
    if (FD->isMain())
      Main = FD;
    const FunctionDecl *Outer = Current;
    Current = FD;
    RecursiveASTVisitor::TraverseFunctionDecl(FD);
    Current = Outer;
    return true;
  }
  bool VisitCallExpr(CallExpr *Call) {
    if (!Current)
      return true;
    if (const IoCallInfo *Info = IoCallTable::lookup(Call))
      Calls.push_back({Call, Info, Current});
    else if (const FunctionDecl *Callee = Call->getDirectCallee();
             Callee && Callee->getIdentifier() && !Callee->hasBody())
      if (const char *Why = IoCallTable::unhandledReadReason(Callee->getName()))
        UnhandledReads.push_back(
            {Call, "'" + Callee->getNameAsString() + "' is " + std::string(Why)});
    return true;
  }
  // Reads ppios-cc knows it leaves alone, each with its remark's reason.
  std::vector<std::pair<const CallExpr *, std::string>> UnhandledReads;

private:
  const SourceManager &SM;
  const FunctionDecl *Current = nullptr;
};

// The names starting with ppios_ (or PPIOS_) that the program declares or defines as
// macros, outside system headers (the runtime's header is one), each with where it first
// appears. The generated code's own names start with ppios_: the PT's locals among them
// are renamed (PrefetchThreadEmitter::renamesOwnName); any other is reserved, a name of
// the runtime or of the generated helpers, and the file gets no prefetch thread. Of the
// PPIOS_ names only the macros the generated code and the runtime's header define are
// reserved (a program's include guard PPIOS_..._H is not).
class ProgramNames : public RecursiveASTVisitor<ProgramNames> {
public:
  ProgramNames(const SourceManager &SM) : SM(SM) {}
  std::map<std::string, SourceLocation> Names;

  void collect(ASTContext &Ctx, Preprocessor &PP) {
    TraverseDecl(Ctx.getTranslationUnitDecl());
    for (const auto &M : PP.macros())
      for (const MacroDirective *MD = PP.getLocalMacroDirectiveHistory(M.first); MD;
           MD = MD->getPrevious())
        if (isa<DefMacroDirective>(MD))
          add(M.first->getName(), MD->getLocation());
  }
  bool VisitNamedDecl(NamedDecl *ND) {
    // Fields and labels have namespaces of their own, which the generated code never adds to.
    if (ND->getIdentifier() && !ND->isImplicit() && !isa<FieldDecl, LabelDecl>(ND))
      add(ND->getName(), ND->getLocation());
    return true;
  }
  std::set<std::string> all() const {
    std::set<std::string> Out;
    for (const auto &N : Names)
      Out.insert(N.first);
    return Out;
  }
  // The first of them the generated code cannot rename its own around, if any.
  std::optional<std::pair<std::string, SourceLocation>> conflict() const {
    std::optional<std::pair<std::string, SourceLocation>> First;
    for (const auto &[Name, Loc] : Names)
      if (reserved(Name) &&
          (!First || SM.isBeforeInTranslationUnit(Loc, First->second)))
        First = std::make_pair(Name, Loc);
    return First;
  }

private:
  static bool reserved(StringRef Name) {
    if (Name.startswith("ppios_"))
      return !PrefetchThreadEmitter::renamesOwnName(Name);
    return Name.startswith("PPIOS_CC_") || Name.startswith("PPIOS_PF_") ||
           Name.startswith("PPIOS_PT_") || Name == "PPIOS_API" || Name == "PPIOS_NORETURN" ||
           Name == "PPIOS_PPIOS_H";
  }
  void add(StringRef Name, SourceLocation Loc) {
    if (!Name.startswith("ppios_") && !Name.startswith("PPIOS_"))
      return;
    if (Loc.isValid() && SM.isInSystemHeader(SM.getExpansionLoc(Loc)))
      return;
    auto It = Names.find(Name.str());
    if (It == Names.end() ||
        (Loc.isValid() && It->second.isValid() && SM.isBeforeInTranslationUnit(Loc, It->second)))
      Names[Name.str()] = Loc;
  }
  const SourceManager &SM;
};

// Facts about the file for clones: descriptor fields (assigned only from opens), globals
// that functions other than main() change (or whose address is taken), and the call graph.
class FileFacts : public RecursiveASTVisitor<FileFacts> {
public:
  FileFacts(const SourceManager &SM, TranslationUnitFacts &Facts) : SM(SM), Facts(Facts) {}
  llvm::DenseMap<const FunctionDecl *, std::vector<const FunctionDecl *>> Callees;
  std::vector<const FunctionDecl *> Defined; // source order

  bool TraverseFunctionDecl(FunctionDecl *FD) {
    if (!FD->hasBody() || !FD->isThisDeclarationADefinition() ||
        !SM.isWrittenInMainFile(SM.getExpansionLoc(FD->getBeginLoc())))
      return true;
    Defined.push_back(FD);
    const FunctionDecl *Outer = Current;
    Current = FD;
    RecursiveASTVisitor::TraverseFunctionDecl(FD);
    Current = Outer;
    return true;
  }
  // sizeof and _Alignof evaluate nothing, unless their operand's type is variably
  // modified (sizeof(double[f()]) calls f).
  bool TraverseUnaryExprOrTypeTraitExpr(UnaryExprOrTypeTraitExpr *E) {
    return !operandsEvaluated(E) || RecursiveASTVisitor::TraverseUnaryExprOrTypeTraitExpr(E);
  }
  // Stores no assignment shows: atomic builtins, va_arg (nodeStores).
  bool VisitStmt(Stmt *S) {
    if (isa<BinaryOperator>(S) || isa<UnaryOperator>(S) || nodeEffect(S) != NodeEffect::Stores)
      return true;
    NodeStores Stores = nodeStores(S);
    for (const Expr *LValue : Stores.LValues)
      globalStore(LValue);
    for (const Expr *Pointer : Stores.Through)
      if (const VarDecl *VD = addressedVariable(Pointer))
        globalStored(VD);
    return true;
  }
  bool VisitCallExpr(CallExpr *Call) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (Current && !Current->isMain() && isMpiSynchronization(Call))
      Facts.SynchronizesOutsideMain = true;
    if (Current && Callee) {
      const FunctionDecl *Def = nullptr;
      if (Callee->hasBody(Def) && SM.isWrittenInMainFile(SM.getExpansionLoc(Def->getBeginLoc())))
        Callees[Current].push_back(Def);
    }
    const IoCallInfo *Info = IoCallTable::lookup(Call);
    // MPI_File_open(..., &g.fh) sets the field to a file, MPI_File_close(&g.fh) to
    // MPI_FILE_NULL: both keep it a descriptor field.
    if (Info && (Info->Kind == IoKind::Open || Info->Kind == IoKind::Close) && Info->HandleIsOut &&
        Info->HandleArg < static_cast<int>(Call->getNumArgs()))
      if (const auto *UO = dyn_cast<UnaryOperator>(Call->getArg(Info->HandleArg)->IgnoreParenImpCasts()))
        if (const auto *ME = dyn_cast<MemberExpr>(UO->getSubExpr()->IgnoreParenImpCasts())) {
          OpenOut.insert(ME);
          if (Info->Kind == IoKind::Open)
            candidate(ME, Info->Interface);
        }
    // MPI_File_open(..., &fh) of a global: a global handle (MPI_File_close(&fh) keeps it one).
    if (Info && (Info->Kind == IoKind::Open || Info->Kind == IoKind::Close) && Info->HandleIsOut &&
        Info->HandleArg < static_cast<int>(Call->getNumArgs()))
      if (const auto *UO = dyn_cast<UnaryOperator>(Call->getArg(Info->HandleArg)->IgnoreParenImpCasts()))
        if (UO->getOpcode() == UO_AddrOf)
          if (const VarDecl *G = fileGlobal(UO->getSubExpr())) {
            GlobalOpenOut.insert(UO);
            globalSet(G, Info->Kind == IoKind::Open ? Info->Interface : std::optional<IoInterface>(),
                      "");
          }
    if (Callee)
      ++DirectCalls[Callee->getCanonicalDecl()];
    return true;
  }
  bool VisitDeclRefExpr(DeclRefExpr *DRE) {
    if (const auto *FD = dyn_cast<FunctionDecl>(DRE->getDecl()))
      ++FunctionRefs[FD->getCanonicalDecl()];
    if (const VarDecl *G = fileGlobal(DRE))
      if (!spelledInMainFile(SM, DRE->getLocation()))
        GlobalProblems.insert({G, "it is named inside a macro definition"});
    return true;
  }
  bool VisitBinaryOperator(BinaryOperator *BO) {
    if (!BO->isAssignmentOp())
      return true;
    const Expr *LHS = BO->getLHS()->IgnoreParenImpCasts();
    if (const auto *ME = dyn_cast<MemberExpr>(LHS)) {
      const auto *Call = dyn_cast<CallExpr>(BO->getRHS()->IgnoreParenCasts());
      const IoCallInfo *Info = Call ? IoCallTable::lookup(Call) : nullptr;
      if (BO->getOpcode() == BO_Assign && Info && Info->Kind == IoKind::Open && !Info->HandleIsOut)
        candidate(ME, Info->Interface);
      else
        disqualify(ME);
    }
    if (const VarDecl *G = fileGlobal(LHS)) {
      const auto *Call = dyn_cast<CallExpr>(BO->getRHS()->IgnoreParenCasts());
      const IoCallInfo *Info = Call ? IoCallTable::lookup(Call) : nullptr;
      if (BO->getOpcode() == BO_Assign && Info && Info->Kind == IoKind::Open && !Info->HandleIsOut)
        globalSet(G, Info->Interface, "");
      else if (BO->getOpcode() == BO_Assign && closedValue(BO->getRHS()))
        globalSet(G, std::nullopt, ""); // `df = NULL;` `fd = -1;` after a close
      else
        globalSet(G, std::nullopt, "line " + line(BO) + " sets it to something other than an open's result");
    }
    globalStore(BO->getLHS());
    return true;
  }
  bool VisitUnaryOperator(UnaryOperator *UO) {
    const Expr *Sub = UO->getSubExpr()->IgnoreParenImpCasts();
    if (UO->isIncrementDecrementOp()) {
      if (const auto *ME = dyn_cast<MemberExpr>(Sub))
        disqualify(ME);
      if (const VarDecl *G = fileGlobal(Sub))
        globalSet(G, std::nullopt, "line " + line(UO) + " changes it arithmetically");
      globalStore(Sub);
    }
    if (UO->getOpcode() == UO_AddrOf) {
      if (const auto *ME = dyn_cast<MemberExpr>(Sub))
        AddressTaken.push_back(ME);
      if (const VarDecl *G = fileGlobal(Sub)) {
        GlobalAddressTaken.push_back({UO, G});
        if (std::find(GlobalOrder.begin(), GlobalOrder.end(), G) == GlobalOrder.end())
          GlobalOrder.push_back(G);
      }
      // A global whose address is taken may change anywhere.
      StoreTarget T = classifyStore(Sub);
      if (T.Target == StoreTarget::Variable && T.Var->hasGlobalStorage())
        Facts.GlobalsWrittenOutsideMain.insert(T.Var);
    }
    return true;
  }
  bool VisitInitListExpr(InitListExpr *ILE) {
    if (const RecordDecl *RD = ILE->getType()->getAsRecordDecl())
      for (const FieldDecl *F : RD->fields())
        Disqualified.insert(F);
    return true;
  }
  bool VisitMemberExpr(MemberExpr *ME) {
    if (const auto *F = dyn_cast<FieldDecl>(ME->getMemberDecl()))
      Seen.insert(F);
    return true;
  }
  bool VisitFieldDecl(FieldDecl *F) {
    Seen.insert(F);
    return true;
  }
  bool VisitVarDecl(VarDecl *VD) {
    if (VD->isFileVarDecl() && VD->hasExternalFormalLinkage() && VD->getIdentifier() &&
        !SM.isInSystemHeader(SM.getExpansionLoc(VD->getLocation())))
      ExternNames.insert(VD->getName().str());
    return true;
  }
  // Alone, a field is a descriptor field if this file sets it from opens only; in a
  // program, if no unit sets it otherwise (Out collects this unit's part, In is the whole).
  void finish(ProgramFacts *Out, const ProgramFacts *In) {
    for (const MemberExpr *ME : AddressTaken)
      if (!OpenOut.count(ME))
        disqualify(ME);
    if (Out) {
      for (const std::string &Name : ExternNames)
        ++Out->GlobalNames[Name];
      for (const auto &[F, Iface] : Candidates) {
        std::string Key = fieldKey(F);
        auto It = Out->FieldOpens.find(Key);
        if (It != Out->FieldOpens.end() && It->second != Iface)
          Out->FieldOthers.insert(Key);
        Out->FieldOpens[Key] = Iface;
      }
      for (const FieldDecl *F : Disqualified)
        Out->FieldOthers.insert(fieldKey(F));
      for (const FieldDecl *F : Mixed)
        Out->FieldOthers.insert(fieldKey(F));
    }
    if (In) {
      for (const FieldDecl *F : Seen) {
        IoInterface Iface;
        if (In->handleField(fieldKey(F), Iface))
          Facts.HandleFields[F] = Iface;
      }
      return;
    }
    for (const auto &[F, Iface] : Candidates)
      if (!Disqualified.count(F) && !Mixed.count(F))
        Facts.HandleFields[F] = Iface;
  }
  llvm::DenseSet<const FieldDecl *> Seen;

  // Global handles (see TranslationUnitFacts): static variables of this file, of the type
  // of their interface's descriptor, set by nothing but opens and closes, whose address is
  // only taken for those, named only in the file's own text, and set only by functions
  // called directly and not recursively (the side-effect summaries then say which calls
  // set them). OnCycle: the functions on call cycles.
  // In is what the units of a program say (an extern global is a global handle only if no
  // other unit declares it), null for a file compiled alone.
  void finishGlobals(const llvm::DenseSet<const FunctionDecl *> &OnCycle, const ProgramFacts *In) {
    for (const auto &[UO, G] : GlobalAddressTaken)
      if (!GlobalOpenOut.count(UO))
        GlobalProblems.insert({G, "its address is taken at line " + line(UO)});
    for (const VarDecl *G : GlobalOrder) {
      auto Iface = GlobalIface.find(G);
      std::string Why;
      auto P = GlobalProblems.find(G);
      if (P != GlobalProblems.end())
        Why = P->second;
      else if (Iface == GlobalIface.end())
        Why = "it is only closed, never opened";
      else if (G->getMostRecentDecl() != G)
        Why = "it is declared more than once";
      else if (G->isExternallyVisible() && !In)
        Why = "it is not static (other files may set it; linking with ppios-cc checks them)";
      else if (G->isExternallyVisible() && !onlyHere(G, *In))
        Why = "it is not static and another file of the program declares it";
      else if (G->getType().isVolatileQualified() || !descriptorType(G->getType(), Iface->second))
        Why = "its type is not its interface's descriptor type";
      for (const FunctionDecl *FD : Setters[G]) {
        if (!Why.empty())
          break;
        if (OnCycle.count(FD))
          Why = "'" + FD->getNameAsString() + "', which sets it, is recursive";
        else if (!FD->isMain() && FunctionRefs[FD->getCanonicalDecl()] > DirectCalls[FD->getCanonicalDecl()])
          Why = "'" + FD->getNameAsString() + "', which sets it, is called through a pointer";
      }
      if (Why.empty())
        Facts.GlobalHandles[G] = Iface->second;
      else
        Facts.GlobalHandleProblems[G] = Why;
    }
  }

private:
  bool onlyHere(const VarDecl *G, const ProgramFacts &In) const {
    auto It = In.GlobalNames.find(G->getName().str());
    return G->hasDefinition() != VarDecl::DeclarationOnly && It != In.GlobalNames.end() &&
           It->second == 1 && ExternNames.count(G->getName().str());
  }
  static bool descriptorType(QualType T, IoInterface Iface) {
    T = T.getUnqualifiedType();
    switch (Iface) {
    case IoInterface::Posix:
      return T->isSpecificBuiltinType(BuiltinType::Int);
    case IoInterface::Stdio:
      return T->isPointerType() && T->getPointeeType().getUnqualifiedType().getAsString() == "FILE";
    case IoInterface::MpiIo:
      return T.getAsString() == "MPI_File";
    case IoInterface::Mpi:
      return false;
    }
    return false;
  }
  // NULL, or a negative integer constant: what a closed handle is set to.
  bool closedValue(const Expr *E) const {
    if (!Current)
      return false;
    ASTContext &Ctx = Current->getASTContext();
    if (E->getType()->isPointerType() || E->IgnoreParenCasts()->getType()->isPointerType())
      return E->isNullPointerConstant(Ctx, Expr::NPC_ValueDependentIsNotNull) !=
             Expr::NPCK_NotNull;
    if (std::optional<llvm::APSInt> V = E->getIntegerConstantExpr(Ctx))
      return V->isNegative();
    return false;
  }
  std::string line(const Stmt *S) const {
    return std::to_string(SM.getPresumedLineNumber(S->getBeginLoc()));
  }
  // A variable of this file's scope (not a static local) that `E` names.
  const VarDecl *fileGlobal(const Expr *E) const {
    const auto *DRE = dyn_cast<DeclRefExpr>(E->IgnoreParenImpCasts());
    const auto *VD = DRE ? dyn_cast<VarDecl>(DRE->getDecl()) : nullptr;
    if (!VD || !VD->hasGlobalStorage() || VD->isStaticLocal() || !VD->isFileVarDecl())
      return nullptr;
    if (!SM.isWrittenInMainFile(SM.getExpansionLoc(VD->getLocation())))
      return nullptr;
    return VD->getCanonicalDecl();
  }
  // G set from an open of Iface, a close (no interface), or otherwise (Why).
  void globalSet(const VarDecl *G, std::optional<IoInterface> Iface, const std::string &Why) {
    if (std::find(GlobalOrder.begin(), GlobalOrder.end(), G) == GlobalOrder.end())
      GlobalOrder.push_back(G);
    if (Current)
      Setters[G].insert(Current);
    if (!Why.empty()) {
      GlobalProblems.insert({G, Why});
      return;
    }
    if (!Iface)
      return;
    auto It = GlobalIface.find(G);
    if (It != GlobalIface.end() && It->second != *Iface)
      GlobalProblems.insert({G, "it is opened through two interfaces"});
    GlobalIface[G] = *Iface;
  }
  std::vector<const VarDecl *> GlobalOrder;
  llvm::DenseMap<const VarDecl *, IoInterface> GlobalIface;
  std::map<const VarDecl *, std::string> GlobalProblems; // the first problem met
  llvm::DenseMap<const VarDecl *, std::set<const FunctionDecl *>> Setters;
  llvm::DenseSet<const UnaryOperator *> GlobalOpenOut;
  std::vector<std::pair<const UnaryOperator *, const VarDecl *>> GlobalAddressTaken;
  llvm::DenseMap<const FunctionDecl *, unsigned> FunctionRefs, DirectCalls;
  std::set<std::string> ExternNames;

  void candidate(const MemberExpr *ME, IoInterface Iface) {
    const auto *F = dyn_cast<FieldDecl>(ME->getMemberDecl());
    if (!F)
      return;
    Seen.insert(F);
    auto It = Candidates.find(F);
    if (It != Candidates.end() && It->second != Iface)
      Mixed.insert(F);
    Candidates[F] = Iface;
  }
  void disqualify(const MemberExpr *ME) {
    if (const auto *F = dyn_cast<FieldDecl>(ME->getMemberDecl()))
      Disqualified.insert(F);
  }
  void globalStore(const Expr *LValue) {
    StoreTarget T = classifyStore(LValue);
    if (T.Target == StoreTarget::Variable)
      globalStored(T.Var);
  }
  void globalStored(const VarDecl *VD) {
    if (Current && !Current->isMain() && VD->hasGlobalStorage())
      Facts.GlobalsWrittenOutsideMain.insert(VD);
  }

  const SourceManager &SM;
  TranslationUnitFacts &Facts;
  const FunctionDecl *Current = nullptr;
  llvm::DenseMap<const FieldDecl *, IoInterface> Candidates;
  llvm::DenseSet<const FieldDecl *> Disqualified, Mixed;
  llvm::DenseSet<const MemberExpr *> OpenOut;
  std::vector<const MemberExpr *> AddressTaken;
};

// The prefetch-thread clone of one function (see the top of this file).
struct ClonePlan {
  const FunctionDecl *Function;
  std::unique_ptr<FunctionUnits> Units;
  std::unique_ptr<PrefetchPlanner> Planner;
  std::unique_ptr<PrefetchThreadEmitter> Emitter;
  bool Emitted = false;
  bool Reached = false;
  bool Exported = false; // program mode: other units call it (external linkage)
  std::string Why;
};

// What the passes of TransformConsumer know about one translation unit (see
// HandleTranslationUnit for their order).
struct UnitState {
  explicit UnitState(ASTContext &Ctx)
      : Ctx(Ctx), SM(Ctx.getSourceManager()), Text(SM, Ctx.getLangOpts()), Collector(SM) {}
  ASTContext &Ctx;
  SourceManager &SM;
  SourceText Text;
  // findIoCalls: the file's I/O calls and main().
  IoCallCollector Collector;
  bool AnyRead = false;
  SideEffectOracle Oracle;
  TranslationUnitFacts Facts;
  // importOtherUnits (program mode): clones other units export, with their prototypes.
  llvm::DenseMap<const FunctionDecl *, std::string> ImportedClones;
  // planClones: a clone plan for every function of the file that leads to reads.
  std::vector<std::unique_ptr<ClonePlan>> Clones;
  llvm::DenseMap<const FunctionDecl *, ClonePlan *> CloneOf;
  bool CloneStdio = false;
  // planMainThread: main()'s prefetch thread.
  std::unique_ptr<FunctionUnits> MainUnits;
  std::unique_ptr<PrefetchPlanner> MainPlan;
  std::unique_ptr<PrefetchThreadEmitter> MainEmitter;
  std::vector<const PrefetchPlanner *> Roots; // whose clone calls the emitted code makes
  // reachClones: prototypes of other units' clones the emitted code calls.
  std::set<std::string> Prototypes;
  // The program's ppios_ names (ProgramNames): the emitters rename their own around them.
  std::set<std::string> ProgramNames;
  // Every pass: the reads, prefetched or not (with the reason).
  std::vector<std::pair<const CallExpr *, std::string>> Missed;
  std::vector<const CallExpr *> Prefetched;
};

class TransformConsumer : public ASTConsumer {
public:
  TransformConsumer(CompilerInstance &CI, const TransformOptions &Options,
                    TransformResult &Result, SourceLocation &LastInclude,
                    const ProgramFacts *Import, ProgramFacts *Export, bool Quiet)
      : CI(CI), Options(Options), Result(Result), LastInclude(LastInclude), Import(Import),
        Export(Export), Quiet(Quiet) {}

  // The passes over one translation unit, in order; each reads what the ones before left
  // in the UnitState and adds its own result.
  void HandleTranslationUnit(ASTContext &Ctx) override {
    if (CI.getDiagnostics().hasErrorOccurred())
      return;
    UnitState U(Ctx);
    Result.Pieces = {{false, U.SM.getBufferData(U.SM.getMainFileID()).str()}};
    findIoCalls(U);
    for (const auto &[Call, Why] : U.Collector.UnhandledReads)
      reportMissed(CI.getDiagnostics(), Call->getBeginLoc(), Why);
    if (!takeProgramNames(U))
      return;
    importOtherUnits(U);
    if (!U.AnyRead && !Export)
      return;
    // The MT's text is kept as written (its I/O reaches the runtime at link time, see
    // runtime/include/ppios/interpose.def); only the prefetch thread and its glue are added.
    SourceInserts R(U.SM, Result.PresumedName);
    if (U.Collector.Main || Import || Export)
      planClones(Ctx, U, U.Clones, U.CloneOf);
    if (Export)
      exportFunctions(Ctx, U.Oracle, U.Facts, U.Clones);
    if (!U.AnyRead)
      return;
    for (const auto &C : U.Clones)
      U.CloneStdio |= C->Emitted && C->Emitter->usesStdio();
    // The planners whose clone calls the emitted code makes: main()'s PT and, in a program,
    // the exported clones.
    for (const auto &C : U.Clones)
      if (C->Exported) {
        C->Reached = true;
        U.Roots.push_back(C->Planner.get());
      }
    if (U.Collector.Main)
      planMainThread(U, R);
    reachClones(U);
    insertClones(Ctx, R, U.Clones);
    judgeHelperReads(U);
    reportReads(U);
    R.insert(includeOffset(U), headerText(U), SourceInserts::Header);
    Result.Pieces = R.render();
    Result.Changed = true;
  }

private:
  // The program's ppios_ names. One that is not a PT local the emitters rename (a runtime
  // call's name, a generated helper's, a macro of the runtime's header) would change what
  // the generated code means: the file gets no prefetch thread, and each read says why.
  bool takeProgramNames(UnitState &U) {
    ProgramNames Names(U.SM);
    Names.collect(U.Ctx, CI.getPreprocessor());
    U.ProgramNames = Names.all();
    std::optional<std::pair<std::string, SourceLocation>> Conflict = Names.conflict();
    if (!Conflict)
      return true;
    std::string Where;
    if (Conflict->second.isValid() && U.SM.isWrittenInMainFile(U.SM.getExpansionLoc(Conflict->second)))
      Where = " (line " + std::to_string(U.SM.getPresumedLineNumber(
                              U.SM.getExpansionLoc(Conflict->second))) + ")";
    for (const FoundCall &F : U.Collector.Calls)
      if (F.Info->Kind == IoKind::Read)
        reportMissed(CI.getDiagnostics(), F.Call->getBeginLoc(),
                     "the program names '" + Conflict->first + "'" + Where +
                         ", a name of ppios-cc's generated code (names starting with ppios_ "
                         "are reserved for it): the file gets no prefetch thread");
    return false;
  }

  void findIoCalls(UnitState &U) {
    U.Collector.TraverseDecl(U.Ctx.getTranslationUnitDecl());
    for (const FoundCall &F : U.Collector.Calls)
      U.AnyRead |= F.Info->Kind == IoKind::Read;
  }

  // Program mode: what the other units say about the functions this one only declares.
  void importOtherUnits(UnitState &U) {
    if (!Import)
      return;
    for (const Decl *D : U.Ctx.getTranslationUnitDecl()->decls()) {
      const auto *FD = dyn_cast<FunctionDecl>(D);
      if (!FD || FD->hasBody() || !FD->getIdentifier() || !FD->isExternallyVisible())
        continue;
      auto It = Import->Functions.find(FD->getName().str());
      if (It == Import->Functions.end())
        continue;
      const ExportedFunction &E = It->second;
      U.Oracle.seed(FD, E.Effect);
      if (!E.HasClone || E.Params.size() != FD->getNumParams() || FD->isVariadic())
        continue;
      CloneSummary S;
      S.Name = "ppios_pt_" + FD->getName().str();
      S.Params = E.Params;
      S.HandleInterfaces = E.HandleInterfaces;
      S.Score = E.Score;
      U.Facts.Clones[FD->getCanonicalDecl()] = S;
      // Types only: no parameter name for the program's macros to rewrite.
      std::string Proto = "void " + S.Name + "(";
      for (const ParmVarDecl *P : FD->parameters())
        Proto += spellAtFileScope(U.Ctx, P->getType(), "") + ", ";
      U.ImportedClones[FD->getCanonicalDecl()] = Proto + "ppios_seq_t *);";
      U.AnyRead = true; // its calls may lead to reads
    }
  }

  // A call into another file whose reads the PT does not pre-execute from here.
  static void missedInOtherFile(UnitState &U, const CloneCallDecision &C, const std::string &Why) {
    U.Missed.push_back({C.Call, "the reads of '" + C.Callee->getNameAsString() +
                                    "' (another file) are not pre-executed" + Why});
  }

  // main()'s prefetch thread: planned, emitted, and its definition, start block and
  // handoffs inserted; its reads judged.
  void planMainThread(UnitState &U, SourceInserts &R) {
    DiagnosticsEngine &Diags = CI.getDiagnostics();
    U.MainUnits = std::make_unique<FunctionUnits>(U.Ctx, U.Collector.Main, U.Oracle);
    U.MainPlan = std::make_unique<PrefetchPlanner>(*U.MainUnits, &U.Facts, /*AsClone=*/false);
    PrefetchPlanner &Plan = *U.MainPlan;
    bool Planned = Plan.plan();
    U.MainEmitter = std::make_unique<PrefetchThreadEmitter>(U.Text, *U.MainUnits, Plan.threadPlan());
    PrefetchThreadEmitter &Emitter = *U.MainEmitter;
    Emitter.setProgramNames(&U.ProgramNames);
    if (U.CloneStdio)
      Emitter.setStdioHelpersProvided();
    std::string Failure;
    if (Planned && !Emitter.emit()) {
      Planned = false;
      Failure = Emitter.why();
    }
    for (const ReadDecision &D : Plan.decisions()) {
      if (Planned && D.Prefetched)
        U.Prefetched.push_back(D.Site.Call);
      else
        U.Missed.push_back({D.Site.Call, D.Prefetched
                                             ? "the prefetch thread cannot be built: " + Failure
                                             : D.Reason});
    }
    if (!Planned) {
      // Name the call's own problem when it has one: that is what left main() with
      // nothing to prefetch.
      for (const CloneCallDecision &C : Plan.cloneCalls()) {
        std::string Why = C.Reason.empty()
                              ? std::string("main() gets no prefetch thread")
                              : "the call at line " +
                                    std::to_string(U.SM.getPresumedLineNumber(C.Call->getBeginLoc())) +
                                    ": " + C.Reason;
        if (U.ImportedClones.count(C.Callee))
          missedInOtherFile(U, C, " (" + Why + ")");
        auto It = U.CloneOf.find(C.Callee);
        if (It != U.CloneOf.end() && It->second->Why.empty())
          It->second->Why = Why;
      }
      return;
    }
    R.insert(functionStart(U.Ctx, U.Collector.Main), Emitter.threadDefinition());
    R.insert(Emitter.startOffset(), Emitter.startBlock());
    for (const auto &[Offset, Call] : Emitter.handoffs())
      R.insert(Offset, Call);
    for (const Unit *Approximate : Plan.approximateSequence())
      report(Diags, DiagnosticsEngine::Remark, Approximate->S->getBeginLoc(),
             "prefetch sequence numbers after this statement are estimates: it performs "
             "I/O a number of times the prefetch thread cannot compute");
    U.Roots.push_back(&Plan);
  }

  // The clones the roots reach through active calls, transitively; calls into other
  // units need the callee's prototype here.
  void reachClones(UnitState &U) {
    std::vector<const PrefetchPlanner *> Work = U.Roots;
    while (!Work.empty()) {
      const PrefetchPlanner *P = Work.back();
      Work.pop_back();
      for (const CloneCallDecision &C : P->cloneCalls()) {
        auto Imported = U.ImportedClones.find(C.Callee);
        if (Imported != U.ImportedClones.end()) {
          if (C.Active)
            U.Prototypes.insert(Imported->second);
          else
            missedInOtherFile(U, C, " from this call: " + C.Reason);
          continue;
        }
        auto It = U.CloneOf.find(C.Callee);
        if (It == U.CloneOf.end())
          continue;
        if (!C.Active) {
          if (It->second->Why.empty())
            It->second->Why =
                "the call at line " +
                std::to_string(U.SM.getPresumedLineNumber(C.Call->getBeginLoc())) + ": " +
                C.Reason;
          continue;
        }
        if (!It->second->Reached) {
          It->second->Reached = true;
          Work.push_back(It->second->Planner.get());
        }
      }
    }
  }

  // The reads in functions other than main(): prefetched if their clone is emitted and
  // reached, else the reason.
  void judgeHelperReads(UnitState &U) {
    for (const FoundCall &F : U.Collector.Calls) {
      if (F.Info->Kind != IoKind::Read || F.Function == U.Collector.Main)
        continue;
      auto It = U.CloneOf.find(F.Function);
      const ReadDecision *D =
          It != U.CloneOf.end() ? It->second->Planner->decisionFor(F.Call) : nullptr;
      std::string In = "it is in '" + F.Function->getNameAsString() + "'";
      if (!D) {
        U.Missed.push_back({F.Call, In + ", which the prefetch thread cannot pre-execute" +
                                        (U.Collector.Main ? std::string(" (recursion or no call "
                                                                        "from main())")
                                                          : std::string())});
      } else if (!D->Prefetched) {
        U.Missed.push_back({F.Call, D->Reason});
      } else if (!It->second->Emitted) {
        U.Missed.push_back({F.Call, In + ", whose clone cannot be built: " + It->second->Why});
      } else if (!It->second->Reached) {
        U.Missed.push_back({F.Call, In + ", which no call of the prefetch thread reaches" +
                                        (It->second->Why.empty() ? std::string()
                                                                 : " (" + It->second->Why + ")")});
      } else {
        U.Prefetched.push_back(F.Call);
      }
    }
  }

  void reportReads(UnitState &U) {
    DiagnosticsEngine &Diags = CI.getDiagnostics();
    if (!U.Collector.Main && !Import && !Export)
      for (auto &M : U.Missed)
        M.second += " (this file has no main(); linking it with ppios-cc pre-executes reads "
                    "other files' prefetch threads reach)";
    for (const auto &[Call, Why] : U.Missed)
      reportMissed(Diags, Call->getBeginLoc(), Why);
    if (Options.ReportPrefetched)
      for (const CallExpr *Call : U.Prefetched)
        report(Diags, DiagnosticsEngine::Remark, Call->getBeginLoc(),
               "read prefetched by the prefetch thread");
  }

  // What goes after the file's last #include: the runtime's header, the stdio helpers the
  // clones share, the PT's shadows of global handles, prototypes of other units' clones.
  std::string headerText(const UnitState &U) const {
    // PPIOS_CC_WEAK: the object also links without libppios, and then runs as the original
    // (see ppios.h).
    std::string Include =
        "#define PPIOS_CC_WEAK 1\n#include <ppios/ppios.h> /* added by ppios-cc */\n";
    if (U.CloneStdio)
      Include += StdioHelpers;
    // The PT's shadows of the file's global handles (see TranslationUnitFacts), in
    // declaration order: invalid until the start block or a handoff gives them a handle.
    std::vector<std::pair<const VarDecl *, IoInterface>> Shadows(U.Facts.GlobalHandles.begin(),
                                                                 U.Facts.GlobalHandles.end());
    std::sort(Shadows.begin(), Shadows.end(), [&](const auto &A, const auto &B) {
      return U.SM.isBeforeInTranslationUnit(A.first->getLocation(), B.first->getLocation());
    });
    if (!Shadows.empty())
      Include += "/* ppios-cc: the prefetch thread's own copies of global descriptors */\n";
    for (const auto &[G, Iface] : Shadows)
      Include += std::string("static __attribute__((__unused__)) ") +
                 (Iface == IoInterface::Posix   ? "int "
                  : Iface == IoInterface::Stdio ? "FILE *"
                                                : "MPI_File ") +
                 shadowName(G) + (Iface == IoInterface::Posix ? " = -1;\n" : " = 0;\n");
    if (!U.Prototypes.empty()) {
      Include += "/* ppios-cc: prefetch-thread clones of functions of other files */\n";
      for (const std::string &P : U.Prototypes)
        Include += P + "\n";
    }
    return Include;
  }

  // Right after the line of the file's last #include (the user's headers and feature-test
  // macros come first), or at the top.
  unsigned includeOffset(const UnitState &U) const {
    if (!LastInclude.isValid())
      return 0;
    unsigned Offset = U.SM.getFileOffset(U.SM.getExpansionLoc(LastInclude));
    StringRef Buf = U.SM.getBufferData(U.SM.getMainFileID());
    size_t EOL = Buf.find('\n', Offset);
    return EOL == StringRef::npos ? Buf.size() : EOL + 1;
  }

  // Plans a clone for every function of the file that leads to reads, callees first (a
  // caller needs its callees' summaries); functions on a call cycle get none.
  void planClones(ASTContext &Ctx, UnitState &U, std::vector<std::unique_ptr<ClonePlan>> &Clones,
                  llvm::DenseMap<const FunctionDecl *, ClonePlan *> &CloneOf) {
    SideEffectOracle &Oracle = U.Oracle;
    const SourceText &Text = U.Text;
    TranslationUnitFacts &Facts = U.Facts;
    FileFacts Scan(Ctx.getSourceManager(), Facts);
    Scan.TraverseDecl(Ctx.getTranslationUnitDecl());
    Scan.finish(Export, Import);
    std::vector<const FunctionDecl *> Order;
    llvm::DenseMap<const FunctionDecl *, int> State; // 1: on the stack, 2: done
    llvm::DenseSet<const FunctionDecl *> OnCycle;
    std::function<void(const FunctionDecl *)> Visit = [&](const FunctionDecl *FD) {
      State[FD] = 1;
      for (const FunctionDecl *Callee : Scan.Callees[FD]) {
        if (State[Callee] == 1) {
          OnCycle.insert(Callee);
          OnCycle.insert(FD);
        } else if (State[Callee] == 0) {
          Visit(Callee);
        }
      }
      State[FD] = 2;
      Order.push_back(FD);
    };
    for (const FunctionDecl *FD : Scan.Defined)
      if (State[FD] == 0)
        Visit(FD);
    Scan.finishGlobals(OnCycle, Import);
    for (const FunctionDecl *FD : Order) {
      if (FD->isMain() || OnCycle.count(FD) || FD->isVariadic() ||
          IoCallTable::lookup(FD->getName()) || FD->getName().startswith("ppios_"))
        continue;
      auto C = std::make_unique<ClonePlan>();
      C->Function = FD;
      C->Units = std::make_unique<FunctionUnits>(Ctx, FD, Oracle);
      C->Planner = std::make_unique<PrefetchPlanner>(*C->Units, &Facts, /*AsClone=*/true);
      bool Planned = C->Planner->plan();
      bool HasReads = !C->Planner->decisions().empty() || !C->Planner->cloneCalls().empty();
      if (!HasReads)
        continue;
      C->Emitter =
          std::make_unique<PrefetchThreadEmitter>(Text, *C->Units, C->Planner->threadPlan());
      C->Emitter->setProgramNames(&U.ProgramNames);
      // A body the linker may replace (a weak one, an inline-only one) is not what a call
      // runs: its clone would pre-execute other reads, and clash with the clone another
      // file exports for the definition that does run.
      std::string Replaceable = replaceableDefinition(FD);
      if (!Replaceable.empty())
        C->Why = "its definition here " + Replaceable;
      if (Planned && Replaceable.empty()) {
        C->Emitted = C->Emitter->emit();
        if (C->Emitted)
          Facts.Clones[FD->getCanonicalDecl()] = C->Planner->summarize();
        else
          C->Why = C->Emitter->why();
        // Other units may call the clone of an extern function, unless it reads globals
        // other units could change.
        if (C->Emitted && (Import || Export) && FD->isExternallyVisible()) {
          C->Exported = true;
          for (const VarDecl *G : Facts.Clones[FD->getCanonicalDecl()].Globals)
            C->Exported &= !G->isExternallyVisible();
          // Nor if it reads through a global handle: only this unit's main() keeps the
          // shadow current.
          C->Exported &= Facts.Clones[FD->getCanonicalDecl()].GlobalHandles.empty();
        }
      }
      CloneOf[FD->getCanonicalDecl()] = C.get();
      CloneOf[FD] = C.get();
      Clones.push_back(std::move(C));
    }
  }

  // Where generated text that precedes a function goes: before its comment, if any.
  static SourceLocation functionStart(ASTContext &Ctx, const FunctionDecl *FD) {
    if (const RawComment *Comment = Ctx.getRawCommentForDeclNoCache(FD))
      return Comment->getBeginLoc();
    return FD->getBeginLoc();
  }

  // Each reached clone goes right after the definition of its function (whose types and
  // globals it uses), with a prototype after the function's first declaration at file
  // scope when that comes earlier (callers may precede the definition). A function first
  // declared in a block of another function (`long offset_of(int);` in main()) gets the
  // prototype before that function, where the thread function of main() goes too: the
  // calls of the clone there precede every declaration of the program's.
  void insertClones(ASTContext &Ctx, SourceInserts &R,
                    std::vector<std::unique_ptr<ClonePlan>> &Clones) {
    SourceManager &SM = Ctx.getSourceManager();
    const LangOptions &LO = Ctx.getLangOpts();
    auto Earlier = [&](const FunctionDecl *A, const FunctionDecl *B) {
      return !B || SM.isBeforeInTranslationUnit(A->getLocation(), B->getLocation());
    };
    for (const auto &C : Clones) {
      if (!C->Emitted || !C->Reached)
        continue;
      const FunctionDecl *FD = C->Function;
      const auto *Body = cast<CompoundStmt>(FD->getBody());
      R.insert(SM.getExpansionLoc(Body->getRBracLoc()).getLocWithOffset(1),
               "\n" + C->Emitter->cloneDefinition(C->Exported));
      const FunctionDecl *First = nullptr, *InBlock = nullptr;
      for (const FunctionDecl *D : FD->redecls()) {
        if (!D->getLexicalDeclContext()->isFunctionOrMethod()) {
          if (Earlier(D, First))
            First = D;
        } else if (Earlier(D, InBlock)) {
          InBlock = D;
        }
      }
      if (InBlock && Earlier(InBlock, First)) {
        if (const auto *Around = dyn_cast<FunctionDecl>(InBlock->getLexicalDeclContext()))
          R.insert(functionStart(Ctx, Around),
                   C->Emitter->clonePrototype(C->Exported) + " /* " + FD->getNameAsString() +
                       "() is declared in a block of " + Around->getNameAsString() + "() */",
                   SourceInserts::Prototype);
        continue;
      }
      if (First && First != FD && !First->doesThisDeclarationHaveABody())
        if (std::optional<Token> Semi =
                Lexer::findNextToken(SM.getExpansionLoc(First->getEndLoc()), SM, LO))
          if (Semi->is(tok::semi))
            R.insert(Semi->getEndLoc(), C->Emitter->clonePrototype(C->Exported));
    }
  }

  // Program mode: this unit's extern functions, for the other units (see the top).
  void exportFunctions(ASTContext &Ctx, SideEffectOracle &Oracle, TranslationUnitFacts &Facts,
                       const std::vector<std::unique_ptr<ClonePlan>> &Clones) {
    const SourceManager &SM = Ctx.getSourceManager();
    for (const Decl *D : Ctx.getTranslationUnitDecl()->decls()) {
      const auto *FD = dyn_cast<FunctionDecl>(D);
      if (!FD || !FD->doesThisDeclarationHaveABody() || !FD->getIdentifier() ||
          !FD->isExternallyVisible() || FD->isMain() ||
          !SM.isWrittenInMainFile(SM.getExpansionLoc(FD->getBeginLoc())))
        continue;
      ExportedFunction E;
      E.Effect = Oracle.classify(FD);
      // Declarations of this unit's AST mean nothing to the others: what they need to
      // know of its globals is in ReadsGlobalPointer.
      E.Effect.GlobalsRead.clear();
      E.Effect.GlobalsStored.clear();
      for (const auto &C : Clones)
        if (C->Function == FD && C->Exported) {
          const CloneSummary &S = Facts.Clones[FD->getCanonicalDecl()];
          E.HasClone = true;
          E.Params = S.Params;
          E.HandleInterfaces = S.HandleInterfaces;
          E.Score = S.Score;
        }
      Export->Functions[FD->getName().str()] = E;
    }
  }

  void report(DiagnosticsEngine &Diags, DiagnosticsEngine::Level Level, SourceLocation Loc,
              const std::string &Message) {
    if (Quiet)
      return;
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
  const ProgramFacts *Import;
  ProgramFacts *Export;
  bool Quiet;
};

class TransformAction : public ASTFrontendAction {
public:
  TransformAction(const TransformOptions &Options, TransformResult &Result,
                  const ProgramFacts *Import = nullptr, ProgramFacts *Export = nullptr,
                  bool Quiet = false)
      : Options(Options), Result(Result), Import(Import), Export(Export), Quiet(Quiet) {}

  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance &CI, StringRef) override {
    CI.getPreprocessor().addPPCallbacks(
        std::make_unique<IncludeTracker>(CI.getSourceManager(), LastInclude, Result.Files));
    return std::make_unique<TransformConsumer>(CI, Options, Result, LastInclude, Import, Export,
                                               Quiet);
  }

private:
  const TransformOptions &Options;
  TransformResult &Result;
  const ProgramFacts *Import;
  ProgramFacts *Export;
  bool Quiet;
  SourceLocation LastInclude;
};

// Runs one frontend action like tooling's default, but without the "N errors generated."
// line: what clang reports is the driver's to show or not (see transformUnit).
class QuietToolAction : public tooling::ToolAction {
public:
  explicit QuietToolAction(std::unique_ptr<FrontendAction> Action) : Action(std::move(Action)) {}
  bool runInvocation(std::shared_ptr<CompilerInvocation> Invocation, FileManager *Files,
                     std::shared_ptr<PCHContainerOperations> PCH,
                     DiagnosticConsumer *Diags) override {
    CompilerInstance CI(std::move(PCH));
    CI.setInvocation(std::move(Invocation));
    CI.setFileManager(Files);
    CI.createDiagnostics(Diags, /*ShouldOwnClient=*/false);
    CI.createSourceManager(*Files);
    CI.setVerboseOutputStream(std::make_unique<llvm::raw_null_ostream>());
    bool Ok = CI.ExecuteAction(*Action);
    Files->clearStatCache();
    return Ok;
  }

private:
  std::unique_ptr<FrontendAction> Action;
};

} // namespace

namespace {
TransformResult transformUnit(const std::string &Path, const std::vector<std::string> &Args,
                              const TransformOptions &Options, const ProgramFacts *Import,
                              ProgramFacts *Export, bool Quiet) {
  TransformResult Result;
  Result.PresumedName = Path;
  if (!llvm::sys::fs::exists(Path)) {
    Result.Diagnostics = "ppios-cc: error: cannot read " + Path + "\n";
    return Result;
  }
  llvm::SmallString<256> Main(Path);
  llvm::sys::fs::make_absolute(Main);
  llvm::sys::path::remove_dots(Main, true);
  Result.Files.push_back(std::string(Main));
  // A round whose remarks are not shown shows no clang diagnostics either (the last
  // round, or the parse that fails, shows them).
  std::vector<std::string> CommandLine{"clang", "-fsyntax-only"};
  CommandLine.insert(CommandLine.end(), Args.begin(), Args.end());
  if (Quiet)
    CommandLine.push_back("-w");
  CommandLine.push_back(Path);
  // Diagnostics are held back: a file clang cannot parse is compiled without ppios-cc by
  // the driver, and then only the real compiler's diagnostics count.
  std::string Printed;
  llvm::raw_string_ostream PrintedOS(Printed);
  IntrusiveRefCntPtr<DiagnosticOptions> DiagOpts = new DiagnosticOptions();
  TextDiagnosticPrinter Printer(PrintedOS, DiagOpts.get());
  IntrusiveRefCntPtr<FileManager> Files(
      new FileManager(FileSystemOptions(), llvm::vfs::getRealFileSystem()));
  QuietToolAction Action(
      std::make_unique<TransformAction>(Options, Result, Import, Export, Quiet));
  tooling::ToolInvocation Invocation(CommandLine, &Action, Files.get(),
                                     std::make_shared<PCHContainerOperations>());
  Invocation.setDiagnosticConsumer(&Printer);
  bool Ok = Invocation.run() && !Printer.getNumErrors();
  PrintedOS.flush();
  Result.Diagnostics = Printed;
  Result.Success = Ok;
  return Result;
}
} // namespace

TransformResult transformFile(const std::string &Path, const std::vector<std::string> &Args,
                              const TransformOptions &Options) {
  return transformUnit(Path, Args, Options, nullptr, nullptr, false);
}

std::vector<TransformResult> transformProgram(const std::vector<ProgramUnit> &Units,
                                              const TransformOptions &Options) {
  // A unit is parsed in its own directory (its path and flags are relative to it).
  auto Transform = [&](const ProgramUnit &U, const ProgramFacts *Import, ProgramFacts *Export,
                       bool Quiet) {
    llvm::SmallString<256> Saved;
    llvm::sys::fs::current_path(Saved);
    if (!U.Directory.empty())
      llvm::sys::fs::set_current_path(U.Directory);
    TransformResult R = transformUnit(U.Path, U.Args, Options, Import, Export, Quiet);
    llvm::sys::fs::set_current_path(Saved);
    return R;
  };
  // Rounds until the exports are stable: a chain of calls through k units needs k rounds.
  // Only the last round reports (and it is the one whose sources are used).
  ProgramFacts Known;
  std::vector<TransformResult> Results;
  size_t MaxRounds = Units.size() + 1;
  for (size_t Round = 0; Round <= MaxRounds; ++Round) {
    bool Last = Round == MaxRounds;
    ProgramFacts Found;
    Results.clear();
    for (const ProgramUnit &U : Units) {
      Results.push_back(Transform(U, Round ? &Known : nullptr, &Found, /*Quiet=*/!Last));
      if (!Results.back().Success) {
        for (TransformResult &R : Results)
          R.Success = false;
        Results.resize(Units.size());
        return Results;
      }
    }
    if (Last)
      break;
    bool Stable = Round > 0 && Found.Functions == Known.Functions &&
                  Found.FieldOpens == Known.FieldOpens && Found.FieldOthers == Known.FieldOthers &&
                  Found.GlobalNames == Known.GlobalNames;
    Known = std::move(Found);
    if (Stable)
      MaxRounds = Round + 1; // one more, reporting
  }
  return Results;
}

} // namespace ppios
