#include "SourceText.h"

#include "clang/AST/Stmt.h"
#include "clang/Lex/Lexer.h"
#include <algorithm>

using namespace clang;

namespace ppios {

SourceText::SourceText(const SourceManager &SM, const LangOptions &LO)
    : SM(SM), LO(LO), Buffer(SM.getBufferData(SM.getMainFileID())) {}

// Where the text at Loc is written in the file: a macro argument's token where the user
// wrote it (`CHECK(pread(...))`), a token of a macro's definition at that macro's
// invocation (the first or last token of it, for End), through any nesting.
SourceLocation SourceText::written(SourceLocation Loc, bool End) const {
  while (Loc.isMacroID()) {
    if (SM.isMacroArgExpansion(Loc)) {
      Loc = SM.getImmediateSpellingLoc(Loc);
    } else {
      CharSourceRange Range = SM.getImmediateExpansionRange(Loc);
      Loc = End ? Range.getEnd() : Range.getBegin();
    }
  }
  return Loc;
}

bool SourceText::spelledInFile(SourceLocation Loc) const { return spelledInMainFile(SM, Loc); }

bool spelledInMainFile(const SourceManager &SM, SourceLocation Loc) {
  while (Loc.isMacroID()) {
    if (!SM.isMacroArgExpansion(Loc))
      return false;
    Loc = SM.getImmediateSpellingLoc(Loc);
  }
  return SM.isWrittenInMainFile(Loc);
}

unsigned SourceText::offset(SourceLocation Loc) const {
  return SM.getFileOffset(written(Loc, /*End=*/false));
}

std::string SourceText::location(SourceLocation Loc) const {
  PresumedLoc P = SM.getPresumedLoc(written(Loc, /*End=*/false));
  if (P.isInvalid())
    return "";
  return std::string(P.getFilename()) + ":" + std::to_string(P.getLine()) + ":" +
         std::to_string(P.getColumn());
}

unsigned SourceText::tokenEnd(SourceLocation Loc) const {
  return SM.getFileOffset(Lexer::getLocForEndOfToken(written(Loc, /*End=*/true), 0, SM, LO));
}

std::pair<unsigned, unsigned> SourceText::statementRange(const Stmt *S) const {
  unsigned Begin = offset(S->getBeginLoc());
  unsigned End = tokenEnd(S->getEndLoc());
  SourceLocation Last = written(S->getEndLoc(), /*End=*/true);
  if (std::optional<Token> Next = Lexer::findNextToken(Last, SM, LO))
    if (Next->is(tok::semi) && !isa<CompoundStmt>(S))
      End = SM.getFileOffset(Next->getEndLoc());
  return {Begin, End};
}

std::string SourceText::text(SourceRange Range) const {
  unsigned Begin = offset(Range.getBegin());
  unsigned End = tokenEnd(Range.getEnd());
  return End >= Begin ? Buffer.substr(Begin, End - Begin).str() : std::string();
}

unsigned SourceText::lineStart(unsigned Offset) const {
  size_t NL = Buffer.substr(0, Offset).rfind('\n');
  return NL == llvm::StringRef::npos ? 0 : static_cast<unsigned>(NL + 1);
}

std::string SourceText::indentation(unsigned Offset) const {
  unsigned Start = lineStart(Offset);
  unsigned End = Start;
  while (End < Buffer.size() && (Buffer[End] == ' ' || Buffer[End] == '\t'))
    ++End;
  return Buffer.substr(Start, End - Start).str();
}

std::string EditList::render(llvm::StringRef Buffer, unsigned Begin, unsigned End) const {
  std::vector<const Edit *> Inside;
  for (const Edit &E : Edits)
    if (E.Begin >= Begin && E.End <= End)
      Inside.push_back(&E);
  // At one offset, insertions come before a replacement that starts there (they belong
  // in front of it, and were not part of what it was computed from).
  std::stable_sort(Inside.begin(), Inside.end(), [](const Edit *A, const Edit *B) {
    if (A->Begin != B->Begin)
      return A->Begin < B->Begin;
    bool AInserts = A->Begin == A->End, BInserts = B->Begin == B->End;
    if (AInserts != BInserts)
      return AInserts;
    return A->End > B->End;
  });
  std::string Out;
  unsigned Pos = Begin;
  for (const Edit *E : Inside) {
    if (E->Begin < Pos)
      continue;
    Out += Buffer.substr(Pos, E->Begin - Pos);
    Out += E->Text;
    Pos = E->End;
  }
  Out += Buffer.substr(Pos, End - Pos);
  return Out;
}

} // namespace ppios
