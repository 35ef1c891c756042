// The source transformation of one C file: renames the MT's I/O calls to the runtime's,
// adds the prefetch thread of main() and its start, and reports every read it does not
// prefetch through clang's diagnostics.
#ifndef PPIOS_TRANSFORMER_TRANSFORMER_H
#define PPIOS_TRANSFORMER_TRANSFORMER_H

#include <string>
#include <vector>

namespace ppios {

struct TransformOptions {
  // Severity of "read not prefetched" (-Rno-ppios-missed, -Wppios-missed, -Werror=ppios-missed).
  enum class Severity { Ignore, Remark, Warning, Error } Missed = Severity::Remark;
  bool ReportPrefetched = false; // -Rppios: also a remark for every prefetched read
};

// A piece of a transformed file: the user's text (with the #line directives that keep its
// line numbers), or text ppios-cc generated (the prefetch thread, its start and glue).
struct SourcePiece {
  bool Generated = false;
  std::string Text;
};

struct TransformResult {
  bool Success = false; // false: clang reported errors (in Diagnostics)
  bool Changed = false; // false: no read calls, the file is used as it is
  // The transformed file in its pieces, in order (one piece, the file itself, when nothing
  // was added): the driver compiles the generated ones from headers of their own (see
  // writeTransformed in CompilerDriver.cpp).
  std::vector<SourcePiece> Pieces;
  // The transformed file as one text (--emit-source).
  std::string source() const {
    std::string Text;
    for (const SourcePiece &P : Pieces)
      Text += P.Text;
    return Text;
  }
  // The file as the compiler was given it: the transformed file's #line name, so that
  // __FILE__ and diagnostics say what they would say without ppios-cc.
  std::string PresumedName;
  // What clang reported (remarks, warnings, errors), in its text format, not yet printed.
  std::string Diagnostics;
  // The files the parse read that are not system headers, as absolute paths, the C file
  // first: an object built from them is stale once one of them changes.
  std::vector<std::string> Files;
};

// One translation unit of a program, as the driver compiled it.
struct ProgramUnit {
  std::string Path;              // the C file
  std::vector<std::string> Args; // parser arguments, as for transformFile
  std::string Directory;         // where Path and Args are relative to; empty: the current one
};

// Parses Path with the given compiler arguments (include paths, macros, -std...).
TransformResult transformFile(const std::string &Path, const std::vector<std::string> &Args,
                              const TransformOptions &Options);

// Transforms the translation units of one program together (ppios-cc's link step): a
// prefetch thread follows calls from one unit into another through clones the callee's
// unit exports. Results come in the order of Units; Success is false for all when a unit
// does not parse.
std::vector<TransformResult> transformProgram(const std::vector<ProgramUnit> &Units,
                                              const TransformOptions &Options);

} // namespace ppios

#endif
