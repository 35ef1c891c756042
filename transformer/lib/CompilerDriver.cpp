#include "CompilerDriver.h"

#include "Transformer.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace ppios {

namespace {

const char *const ClangResourceDir = "-resource-dir=/usr/lib/llvm-16/lib/clang/16";

enum class InputKind { CSource, Object, Rejected };

InputKind classifyInput(llvm::StringRef Path) {
  llvm::StringRef Ext = llvm::sys::path::extension(Path);
  if (Ext == ".c")
    return InputKind::CSource;
  if (Ext == ".o" || Ext == ".a" || Ext == ".so" || Ext == ".lo" || Path.contains(".so."))
    return InputKind::Object;
  return InputKind::Rejected;
}

// Flags whose value is the next argument.
bool takesValue(llvm::StringRef Arg) {
  return Arg == "-o" || Arg == "-I" || Arg == "-D" || Arg == "-U" || Arg == "-include" ||
         Arg == "-isystem" || Arg == "-iquote" || Arg == "-idirafter" || Arg == "-L" ||
         Arg == "-l" || Arg == "-MF" || Arg == "-MT" || Arg == "-MQ" || Arg == "-Xlinker" ||
         Arg == "-x" || Arg == "-imacros";
}

// Flags that also matter to the parse (preprocessor and language).
bool forParser(llvm::StringRef Arg) {
  return Arg.startswith("-I") || Arg.startswith("-D") || Arg.startswith("-U") ||
         Arg.startswith("-std=") || Arg == "-include" || Arg == "-isystem" ||
         Arg == "-iquote" || Arg == "-idirafter" || Arg == "-imacros" || Arg.startswith("-O") ||
         Arg == "-pthread" || Arg.startswith("-f") || Arg.startswith("-m");
}

std::vector<std::string> splitWords(llvm::StringRef Text) {
  std::vector<std::string> Words;
  llvm::SmallVector<llvm::StringRef, 16> Parts;
  Text.split(Parts, ' ', -1, false);
  for (llvm::StringRef P : Parts)
    if (!P.trim().empty())
      Words.push_back(P.trim().str());
  return Words;
}

int run(const std::vector<std::string> &Command) {
  auto Program = llvm::sys::findProgramByName(Command[0]);
  if (!Program) {
    llvm::errs() << "ppios-cc: error: cannot find '" << Command[0] << "'\n";
    return 127;
  }
  std::vector<llvm::StringRef> Args(Command.begin(), Command.end());
  std::string Error;
  int Status = llvm::sys::ExecuteAndWait(*Program, Args, std::nullopt, {}, 0, 0, &Error);
  if (Status < 0)
    llvm::errs() << "ppios-cc: error: " << Command[0] << ": " << Error << "\n";
  return Status;
}

std::string capture(const std::vector<std::string> &Command) {
  llvm::SmallString<128> Out;
  llvm::sys::fs::createTemporaryFile("ppios-cc-showme", "txt", Out);
  auto Program = llvm::sys::findProgramByName(Command[0]);
  if (!Program)
    return "";
  std::vector<llvm::StringRef> Args(Command.begin(), Command.end());
  std::optional<llvm::StringRef> Redirects[] = {std::nullopt, llvm::StringRef(Out),
                                                std::nullopt};
  llvm::sys::ExecuteAndWait(*Program, Args, std::nullopt, Redirects);
  auto Buffer = llvm::MemoryBuffer::getFile(Out);
  llvm::sys::fs::remove(Out);
  return Buffer ? (*Buffer)->getBuffer().trim().str() : "";
}

struct RuntimePaths {
  std::string IncludeDir, LibDir;
};

bool exists(const std::string &Path) { return llvm::sys::fs::exists(Path); }

// Install tree first (<prefix>/bin/ppios-cc), then the build tree the executable came from.
RuntimePaths findRuntime(const char *Argv0, void *MainAddress) {
  std::string Exe = llvm::sys::fs::getMainExecutable(Argv0, MainAddress);
  llvm::SmallString<256> Prefix(llvm::sys::path::parent_path(llvm::sys::path::parent_path(Exe)));
  RuntimePaths P;
  for (const char *LibDir : {PPIOS_CC_INSTALL_LIBDIR, "lib", "lib64"}) {
    llvm::SmallString<256> Lib(Prefix), Inc(Prefix);
    llvm::sys::path::append(Lib, LibDir);
    llvm::sys::path::append(Inc, "include");
    if (exists((Lib + "/libppios.so").str()) && exists((Inc + "/ppios/ppios.h").str()))
      return {std::string(Inc), std::string(Lib)};
  }
  llvm::SmallString<256> Lib(llvm::sys::path::parent_path(Exe));
  llvm::sys::path::append(Lib, PPIOS_CC_BUILD_LIBDIR_FROM_BIN);
  llvm::sys::path::remove_dots(Lib, true);
  P.LibDir = exists((Lib + "/libppios.so").str()) ? std::string(Lib) : PPIOS_CC_BUILD_LIBDIR;
  P.IncludeDir = PPIOS_CC_SOURCE_INCLUDE_DIR;
  return P;
}

bool writeAtomically(const std::string &Path, const std::string &Text) {
  llvm::SmallString<256> Temp;
  llvm::SmallString<256> Model(Path);
  Model += ".tmp-%%%%%%";
  int FD;
  if (llvm::sys::fs::createUniqueFile(Model, FD, Temp)) {
    llvm::errs() << "ppios-cc: error: cannot write " << Path << "\n";
    return false;
  }
  {
    llvm::raw_fd_ostream OS(FD, /*shouldClose=*/true);
    OS << Text;
  }
  if (llvm::sys::fs::rename(Temp, Path)) {
    llvm::sys::fs::remove(Temp);
    llvm::errs() << "ppios-cc: error: cannot write " << Path << "\n";
    return false;
  }
  return true;
}

void usage() {
  llvm::outs() << "usage: ppios-cc [ppios options] [mpicc options] files...\n"
                  "  --emit-source          write the transformed C source to -o (or stdout) and stop\n"
                  "  -Rppios                remark for every read the prefetch thread pre-executes\n"
                  "  -Rno-ppios-missed      no remark for reads left unprefetched\n"
                  "  -Wppios-missed         report unprefetched reads as warnings\n"
                  "  -Werror=ppios-missed   report unprefetched reads as errors\n"
                  "  --ppios-keep-temps     keep the transformed files (prints their directory)\n"
                  "  --ppios-help           this help\n"
                  "Everything else goes to mpicc (override with PPIOS_CC).\n";
}

} // namespace

int runCompilerDriver(int argc, const char **argv, void *MainAddress) {
  TransformOptions Options;
  bool EmitSource = false, KeepTemps = false, CompileOnly = false, Preprocess = false;
  std::string Output;
  std::vector<std::string> Passed;          // for mpicc, inputs included
  std::vector<std::string> ParserArgs;      // for clang
  std::vector<std::pair<size_t, InputKind>> Inputs; // positions in Passed
  const char *CompilerEnv = std::getenv("PPIOS_CC");
  std::string Compiler = CompilerEnv && *CompilerEnv ? CompilerEnv : "mpicc";

  for (int I = 1; I < argc; ++I) {
    llvm::StringRef Arg = argv[I];
    if (Arg == "--emit-source") {
      EmitSource = true;
    } else if (Arg == "-Rppios") {
      Options.ReportPrefetched = true;
    } else if (Arg == "-Rno-ppios") {
      Options.ReportPrefetched = false;
    } else if (Arg == "-Rppios-missed") {
      Options.Missed = TransformOptions::Severity::Remark;
    } else if (Arg == "-Rno-ppios-missed") {
      Options.Missed = TransformOptions::Severity::Ignore;
    } else if (Arg == "-Wppios-missed") {
      Options.Missed = TransformOptions::Severity::Warning;
    } else if (Arg == "-Werror=ppios-missed") {
      Options.Missed = TransformOptions::Severity::Error;
    } else if (Arg == "--ppios-keep-temps") {
      KeepTemps = true;
    } else if (Arg == "--ppios-help") {
      usage();
      return 0;
    } else if (Arg.startswith("--showme") || Arg.startswith("-showme") || Arg == "--version" ||
               Arg == "-v" || Arg == "--help") {
      std::vector<std::string> Command{Compiler};
      for (int J = 1; J < argc; ++J)
        Command.push_back(argv[J]);
      return run(Command);
    } else if (Arg == "-o" && I + 1 < argc) {
      Output = argv[++I];
      Passed.push_back("-o");
      Passed.push_back(Output);
    } else if (takesValue(Arg) && I + 1 < argc) {
      Passed.push_back(Arg.str());
      Passed.push_back(argv[++I]);
      if (forParser(Arg)) {
        ParserArgs.push_back(Arg.str());
        ParserArgs.push_back(argv[I]);
      }
      if (Arg == "-x") {
        llvm::errs() << "ppios-cc: error: -x is not supported; name C files *.c\n";
        return 1;
      }
    } else if (Arg.startswith("-")) {
      if (Arg == "-c" || Arg == "-S")
        CompileOnly = true;
      if (Arg == "-E" || Arg == "-M" || Arg == "-MM")
        Preprocess = true;
      Passed.push_back(Arg.str());
      if (forParser(Arg))
        ParserArgs.push_back(Arg.str());
    } else {
      InputKind Kind = classifyInput(Arg);
      if (Kind == InputKind::Rejected) {
        llvm::errs() << "ppios-cc: error: " << Arg
                     << ": not a C source (.c) or object file; ppios-cc compiles C only\n";
        return 1;
      }
      Inputs.push_back({Passed.size(), Kind});
      Passed.push_back(Arg.str());
    }
  }
  if (Inputs.empty()) {
    llvm::errs() << "ppios-cc: error: no input files\n";
    return 1;
  }
  if (Preprocess) {
    std::vector<std::string> Command{Compiler};
    Command.insert(Command.end(), Passed.begin(), Passed.end());
    return run(Command);
  }

  RuntimePaths Runtime = findRuntime(argv[0], MainAddress);
  std::vector<std::string> Parse = ParserArgs;
  for (const std::string &W : splitWords(capture({Compiler, "--showme:compile"})))
    Parse.push_back(W);
  Parse.push_back(ClangResourceDir);
  Parse.push_back("-std=gnu11");
  Parse.push_back("-Wno-unused-command-line-argument");
  // Keep clang's own warnings out: the real compiler reports those.
  Parse.push_back("-Wno-everything");
  // Later -std flags from the user win over the default above.
  for (const std::string &A : ParserArgs)
    if (llvm::StringRef(A).startswith("-std="))
      Parse.push_back(A);

  if (EmitSource) {
    size_t Sources = 0;
    for (auto &In : Inputs)
      Sources += In.second == InputKind::CSource;
    if (Sources != 1 || Inputs.size() != 1) {
      llvm::errs() << "ppios-cc: error: --emit-source takes exactly one C file\n";
      return 1;
    }
    TransformResult R = transformFile(Passed[Inputs[0].first], Parse, Options);
    if (!R.Success)
      return 1;
    if (Output.empty() || Output == "-") {
      llvm::outs() << R.Source;
      return 0;
    }
    return writeAtomically(Output, R.Source) ? 0 : 1;
  }

  llvm::SmallString<256> TempDir;
  if (llvm::sys::fs::createUniqueDirectory("ppios-cc", TempDir)) {
    llvm::errs() << "ppios-cc: error: cannot create a temporary directory\n";
    return 1;
  }
  std::vector<std::string> Command{Compiler};
  std::vector<std::string> Extra{"-I" + Runtime.IncludeDir};
  int Status = 0;
  std::vector<std::string> Temps;
  for (size_t N = 0; N < Inputs.size() && Status == 0; ++N) {
    if (Inputs[N].second != InputKind::CSource)
      continue;
    std::string &Source = Passed[Inputs[N].first];
    TransformResult R = transformFile(Source, Parse, Options);
    if (!R.Success) {
      Status = 1;
      break;
    }
    if (!R.Changed)
      continue;
    llvm::SmallString<256> Dir(TempDir);
    llvm::sys::path::append(Dir, std::to_string(N));
    llvm::sys::fs::create_directories(Dir);
    llvm::SmallString<256> Temp(Dir);
    llvm::sys::path::append(Temp, llvm::sys::path::filename(Source));
    llvm::SmallString<256> SourceDir(Source);
    llvm::sys::fs::make_absolute(SourceDir);
    llvm::sys::path::remove_filename(SourceDir);
    if (!writeAtomically(std::string(Temp), R.Source)) {
      Status = 1;
      break;
    }
    // Quoted includes of the original file must still find their neighbours.
    Extra.push_back("-iquote");
    Extra.push_back(std::string(SourceDir));
    Source = std::string(Temp);
  }
  if (Status == 0) {
    Command.insert(Command.end(), Extra.begin(), Extra.end());
    Command.insert(Command.end(), Passed.begin(), Passed.end());
    if (!CompileOnly) {
      Command.push_back("-L" + Runtime.LibDir);
      Command.push_back("-Wl,-rpath," + Runtime.LibDir);
      Command.push_back("-lppios");
    }
    Status = run(Command);
  }
  if (KeepTemps)
    llvm::errs() << "ppios-cc: transformed files kept in " << TempDir << "\n";
  else
    llvm::sys::fs::remove_directories(TempDir);
  return Status == 0 ? 0 : 1;
}

} // namespace ppios
