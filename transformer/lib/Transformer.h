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

struct TransformResult {
  bool Success = false; // false: clang reported errors (already printed)
  bool Changed = false; // false: no read calls, the file is used as it is
  std::string Source;   // the transformed file
};

// Parses Path with the given compiler arguments (include paths, macros, -std...).
TransformResult transformFile(const std::string &Path, const std::vector<std::string> &Args,
                              const TransformOptions &Options);

} // namespace ppios

#endif
