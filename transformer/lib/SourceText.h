// Text of the main file and a list of non-overlapping replacements over it, rendered for
// any sub-range. The prefetch thread is built this way from the user's own text, so it keeps
// the user's names, layout and comments.
#ifndef PPIOS_TRANSFORMER_SOURCETEXT_H
#define PPIOS_TRANSFORMER_SOURCETEXT_H

#include "clang/Basic/LangOptions.h"
#include "clang/Basic/SourceLocation.h"
#include "clang/Basic/SourceManager.h"
#include <string>
#include <vector>

namespace clang {
class Stmt;
}

namespace ppios {

// See SourceText::spelledInFile.
bool spelledInMainFile(const clang::SourceManager &SM, clang::SourceLocation Loc);

class SourceText {
public:
  SourceText(const clang::SourceManager &SM, const clang::LangOptions &LO);

  // File offset of a location: a macro argument's token where it is written, any other
  // macro location at its expansion.
  unsigned offset(clang::SourceLocation Loc) const;
  // True if Loc is text of the main file as written: a file location, or a token of a macro
  // argument written there (through any number of macro arguments).
  bool spelledInFile(clang::SourceLocation Loc) const;
  // Offset just past the token at Loc.
  unsigned tokenEnd(clang::SourceLocation Loc) const;
  // [begin, end) of a statement, with its terminating ';' when it has one.
  std::pair<unsigned, unsigned> statementRange(const clang::Stmt *S) const;
  std::string text(clang::SourceRange Range) const;
  std::string text(unsigned Begin, unsigned End) const { return Buffer.substr(Begin, End - Begin).str(); }
  // Leading whitespace of the line holding Offset.
  std::string indentation(unsigned Offset) const;
  unsigned lineStart(unsigned Offset) const;
  unsigned line(clang::SourceLocation Loc) const { return SM.getPresumedLineNumber(Loc); }
  // "file:line:col" of the text at Loc where the user wrote it (see offset()), the file
  // as the compiler was given it: what a call-site id names (ppios.h, `site`).
  std::string location(clang::SourceLocation Loc) const;
  llvm::StringRef buffer() const { return Buffer; }

private:
  clang::SourceLocation written(clang::SourceLocation Loc, bool End) const;

  const clang::SourceManager &SM;
  const clang::LangOptions &LO;
  llvm::StringRef Buffer;
};

class EditList {
public:
  void replace(unsigned Begin, unsigned End, std::string Text) {
    Edits.push_back({Begin, End, std::move(Text)});
  }
  void insert(unsigned At, std::string Text) { replace(At, At, std::move(Text)); }
  // The text of [Begin, End) with every edit inside applied; an edit inside another one
  // is dropped (the outer one was computed from the rendering of the inner ones), so edits
  // added after the outer one was computed must not start where it starts unless they are
  // insertions, which are kept in front of it.
  std::string render(llvm::StringRef Buffer, unsigned Begin, unsigned End) const;

private:
  struct Edit {
    unsigned Begin, End;
    std::string Text;
  };
  std::vector<Edit> Edits;
};

} // namespace ppios

#endif
