#include "CompilerDriver.h"

#include "Transformer.h"
#include "ppios_version.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace ppios {

namespace {

// Set by the build from the Clang ppios-cc links (transformer/Transformer.cmake).
const char *const ClangResourceDir = "-resource-dir=" PPIOS_CLANG_RESOURCE_DIR;
// The ELF section of an object compiled by ppios-cc -c that lets the link step transform
// the object's C file again together with the rest of the program.
const char *const RecordSection = ".ppios.unit";
const int RecordVersion = 1;

// ---- the command line

// Other: an input the wrapper gets as it is, in a command that runs untransformed (-x,
// standard input).
enum class InputKind { CSource, Object, Other, Rejected };

InputKind classifyInput(llvm::StringRef Path) {
  llvm::StringRef Ext = llvm::sys::path::extension(Path);
  if (Ext == ".c")
    return InputKind::CSource;
  if (Ext == ".o" || Ext == ".a" || Ext == ".so" || Ext == ".lo" || Path.contains(".so."))
    return InputKind::Object;
  return InputKind::Rejected;
}

// Flags whose value is the next argument (GCC's and Clang's separate-argument options):
// the value is no input file, whatever it looks like (`-z now`, `--param name=value`).
bool takesValue(llvm::StringRef Arg) {
  static const char *const Flags[] = {
      "-o",         "-I",          "-D",          "-U",           "-include",
      "-isystem",   "-iquote",     "-idirafter",  "-L",           "-l",
      "-MF",        "-MT",         "-MQ",         "-Xlinker",     "-x",
      "-imacros",   "-isysroot",   "--sysroot",   "-iprefix",     "-iwithprefix",
      "-iwithprefixbefore",        "-imultilib",  "-imultiarch",  "-A",
      "-B",         "-T",          "-e",          "-u",           "-z",
      "-Xassembler", "-Xpreprocessor",            "-aux-info",    "--param",
      "-dumpbase",  "-dumpdir",    "-wrapper"};
  return std::find(std::begin(Flags), std::end(Flags), Arg) != std::end(Flags);
}

// Options of the MPI wrappers that print how they would compile and compile nothing
// (Open MPI's --showme*, MPICH's -show, -compile_info and -link_info), the compiler's
// -### (the same), and -v: the command goes to the wrapper as it is.
bool wrapperQuery(llvm::StringRef Arg) {
  return Arg.startswith("--showme") || Arg.startswith("-showme") || Arg == "-show" ||
         Arg == "-compile_info" || Arg == "-link_info" || Arg == "-###" || Arg == "-v";
}

// Flags that also matter to the parse (preprocessor and language).
bool forParser(llvm::StringRef Arg) {
  return Arg.startswith("-I") || Arg.startswith("-D") || Arg.startswith("-U") ||
         Arg.startswith("-std=") || Arg == "-include" || Arg == "-isystem" ||
         Arg == "-iquote" || Arg == "-idirafter" || Arg == "-imacros" || Arg == "-isysroot" ||
         Arg.startswith("--sysroot") || Arg == "-iprefix" || Arg.startswith("-iwithprefix") ||
         Arg.startswith("-O") ||
         Arg == "-pthread" || Arg.startswith("-f") || Arg.startswith("-m");
}

// Flags left out when the link step compiles a unit to a temporary object: linker inputs
// mean nothing there, and dependency files would be rewritten to name the temporary copy.
bool droppedFromUnitCompile(llvm::StringRef Arg) {
  return Arg.startswith("-l") || Arg.startswith("-L") || Arg.startswith("-Wl,") ||
         Arg == "-Xlinker" || Arg == "-MD" || Arg == "-MMD" || Arg == "-MP" ||
         Arg.startswith("-MF") || Arg.startswith("-MT") || Arg.startswith("-MQ");
}

struct Input {
  size_t Position; // in Invocation::Passed
  InputKind Kind;
};

struct Invocation {
  TransformOptions Options;
  std::string Compiler; // the real mpicc
  bool EmitSource = false, KeepTemps = false;
  bool Compile = false;    // -c
  bool Assemble = false;   // -S
  bool Preprocess = false; // -E, -M, -MM, -fsyntax-only
  std::string Output;      // -o, if given
  // Why the command must run on the original files (a -x option, a source read from
  // standard input), if it must.
  std::string Untransformed;
  std::vector<std::string> Passed; // for mpicc, in order, inputs and -o included
  std::vector<Input> Inputs;
  // The user's compile flags: Passed without the inputs, -c and -o X. Records keep them.
  std::vector<std::string> Flags;

  bool links() const { return !Compile && !Assemble && !Preprocess && !EmitSource; }
  const std::string &path(const Input &In) const { return Passed[In.Position]; }
};

// ppios-cc --help. Man page ppios-cc(1) is made from this text (packaging/man).
void usage(const std::string &Compiler) {
  llvm::outs()
      << "usage: ppios-cc [ppios options] [mpicc options] files...\n"
         "\n"
         "Compiles MPI C programs as mpicc does, into a prefetching build: each process gets a\n"
         "prefetch thread that pre-executes the program's reads ahead of it, scheduled by the\n"
         "ppios runtime (libppios), which the link adds. A file it cannot transform is compiled\n"
         "without prefetching, with one warning.\n"
         "\n"
         "ppios options:\n"
         "  --emit-source          write the transformed C source to -o (or stdout) and stop\n"
         "  -Rppios                remark for every read the prefetch thread pre-executes\n"
         "  -Rno-ppios             no such remarks (the default)\n"
         "  -Rppios-missed         remark for every read left unprefetched (the default)\n"
         "  -Rno-ppios-missed      no remark for reads left unprefetched\n"
         "  -Wppios-missed         report unprefetched reads as warnings\n"
         "  -Werror=ppios-missed   report unprefetched reads as errors\n"
         "  --ppios-keep-temps     keep the transformed files (prints their directory)\n"
         "  --help, --ppios-help   this help\n"
         "  --version              ppios's version and git id, then the MPI compiler's version\n"
         "\n"
         "Every other option and the input files (.c, .o, .a, .so) go to the MPI compiler\n"
         "wrapper, here "
      << Compiler
      << "; with -E, -M, -MM, -fsyntax-only, -v, -###, --showme*,\n"
         "-show, -compile_info, -link_info or no input file it runs alone, on the\n"
         "untransformed command line, and so it does with -x or a source on standard input\n"
         "(with a warning when it compiles).\n"
         "Response files (@file) are read as the compiler reads them.\n"
         "Its own options: run `"
      << Compiler
      << " --help`.\n"
         "\n"
         "environment:\n"
         "  PPIOS_CC               the MPI compiler wrapper to drive (default mpicc)\n"
         "  PPIOS_*                read by the prefetching program when it runs: see ppios(7)\n";
}

int run(const std::vector<std::string> &Command, const std::string &Directory = "");

// Fills Inv from argv. Returns an exit status when the command is already handled (help,
// pass-through to mpicc, a usage error), nothing when the driver goes on.
std::optional<int> parseCommandLine(int argc, const char **argv, Invocation &Inv) {
  const char *CompilerEnv = std::getenv("PPIOS_CC");
  Inv.Compiler = CompilerEnv && *CompilerEnv ? CompilerEnv : "mpicc";
  TransformOptions &Options = Inv.Options;
  bool DebugGiven = false;
  std::string Rejected; // the first input ppios-cc cannot take
  for (int I = 1; I < argc; ++I) {
    llvm::StringRef Arg = argv[I];
    if (Arg == "--emit-source") {
      Inv.EmitSource = true;
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
      Inv.KeepTemps = true;
    } else if (Arg == "--ppios-help" || Arg == "--help") {
      usage(Inv.Compiler);
      return 0;
    } else if (Arg == "--version") {
      // ppios's line first, then the wrapper's own: build systems that recognize the
      // compiler by its --version text (gcc, clang) still do.
      llvm::outs() << "ppios-cc (ppios) " << PPIOS_VERSION << ", git " << PPIOS_GIT_ID << "\n";
      llvm::outs().flush();
      return run({Inv.Compiler, "--version"});
    } else if (wrapperQuery(Arg)) {
      std::vector<std::string> Command{Inv.Compiler};
      for (int J = 1; J < argc; ++J)
        Command.push_back(argv[J]);
      return run(Command);
    } else if (Arg == "-o" && I + 1 < argc) {
      Inv.Output = argv[++I];
      Inv.Passed.push_back("-o");
      Inv.Passed.push_back(Inv.Output);
    } else if (takesValue(Arg) && I + 1 < argc) {
      // A language named by -x applies to files of any name, which ppios-cc does not
      // transform: the command runs as it is, as mpicc would run it.
      if (Arg == "-x" && Inv.Untransformed.empty())
        Inv.Untransformed = std::string("-x ") + argv[I + 1] + ": ppios-cc transforms only files named *.c";
      for (const char *Word : {argv[I], argv[I + 1]}) {
        Inv.Passed.push_back(Word);
        Inv.Flags.push_back(Word);
      }
      ++I;
    } else if (Arg == "-") {
      // A source read from standard input (`-x c -`): nothing to transform.
      if (Inv.Untransformed.empty())
        Inv.Untransformed = "a source read from standard input (-)";
      Inv.Inputs.push_back({Inv.Passed.size(), InputKind::Other});
      Inv.Passed.push_back(Arg.str());
    } else if (Arg.startswith("-")) {
      if (Arg.startswith("-x") && Inv.Untransformed.empty()) // -xc
        Inv.Untransformed = Arg.str() + ": ppios-cc transforms only files named *.c";
      DebugGiven |= Arg.startswith("-g");
      Inv.Compile |= Arg == "-c";
      Inv.Assemble |= Arg == "-S";
      // -fsyntax-only writes nothing either: the user's file is what it checks.
      Inv.Preprocess |= Arg == "-E" || Arg == "-M" || Arg == "-MM" || Arg == "-fsyntax-only";
      Inv.Passed.push_back(Arg.str());
      if (Arg != "-c")
        Inv.Flags.push_back(Arg.str());
    } else {
      InputKind Kind = classifyInput(Arg);
      if (Kind == InputKind::Rejected && Rejected.empty())
        Rejected = Arg.str();
      Inv.Inputs.push_back({Inv.Passed.size(), Kind});
      Inv.Passed.push_back(Arg.str());
    }
  }
  // Under -x any file name is the language's, and the command runs untransformed; so
  // does a preprocessing-only command (a header, a linker script).
  if (!Inv.Untransformed.empty() || Inv.Preprocess) {
    for (Input &In : Inv.Inputs)
      if (In.Kind == InputKind::Rejected)
        In.Kind = InputKind::Other;
  } else if (!Rejected.empty()) {
    llvm::errs() << "ppios-cc: error: " << Rejected
                 << ": not a C source (.c) or object file; ppios-cc compiles C only\n";
    return 1;
  }
  // No file to compile: a question for the compiler (-dumpversion, -dumpmachine,
  // -print-prog-name=ld, --help=warnings), which build systems ask the compiler they
  // are given. The wrapper answers it, or says itself that there is nothing to do.
  if (Inv.Inputs.empty()) {
    std::vector<std::string> Command{Inv.Compiler};
    Command.insert(Command.end(), Inv.Passed.begin(), Inv.Passed.end());
    return run(Command);
  }
  // ppios-report names the MT's reads by their source lines through the line table (the
  // MT's calls keep the program's text, so they carry no call-site id of ppios-cc's):
  // without a -g option of the user's, ppios-cc adds -g1, line tables only (gcc and clang
  // alike). Debug information does not change the generated code, only the file's size.
  if (!DebugGiven) {
    Inv.Passed.push_back("-g1");
    Inv.Flags.push_back("-g1");
  }
  return std::nullopt;
}

// ---- processes and files

std::vector<std::string> splitWords(llvm::StringRef Text) {
  std::vector<std::string> Words;
  llvm::SmallVector<llvm::StringRef, 16> Parts;
  Text.split(Parts, ' ', -1, false);
  for (llvm::StringRef P : Parts)
    if (!P.trim().empty())
      Words.push_back(P.trim().str());
  return Words;
}

std::string absolutePath(llvm::StringRef Path, llvm::StringRef Base = "") {
  llvm::SmallString<256> Abs(Path);
  if (!Base.empty() && !llvm::sys::path::is_absolute(Abs)) {
    Abs = Base;
    llvm::sys::path::append(Abs, Path);
  }
  llvm::sys::fs::make_absolute(Abs);
  llvm::sys::path::remove_dots(Abs, true);
  return std::string(Abs);
}

std::string currentDirectory() {
  llvm::SmallString<256> Dir;
  llvm::sys::fs::current_path(Dir);
  return std::string(Dir);
}

// Runs Command in Directory (empty: the current one) and returns its exit status.
int run(const std::vector<std::string> &Command, const std::string &Directory) {
  // A program named by a relative path is found before changing directories.
  auto Program = llvm::StringRef(Command[0]).contains('/')
                     ? llvm::ErrorOr<std::string>(absolutePath(Command[0]))
                     : llvm::sys::findProgramByName(Command[0]);
  if (!Program) {
    llvm::errs() << "ppios-cc: error: cannot find '" << Command[0] << "'\n";
    return 127;
  }
  std::string Saved = currentDirectory();
  if (!Directory.empty() && llvm::sys::fs::set_current_path(Directory)) {
    llvm::errs() << "ppios-cc: error: cannot enter " << Directory << "\n";
    return 1;
  }
  std::vector<llvm::StringRef> Args(Command.begin(), Command.end());
  std::string Error;
  int Status = llvm::sys::ExecuteAndWait(*Program, Args, std::nullopt, {}, 0, 0, &Error);
  if (Status < 0)
    llvm::errs() << "ppios-cc: error: " << Command[0] << ": " << Error << "\n";
  if (!Directory.empty())
    llvm::sys::fs::set_current_path(Saved);
  return Status;
}

// Runs Command like run(), with its standard error kept in *Stderr instead of shown.
int runQuietly(const std::vector<std::string> &Command, const std::string &Directory,
               std::string *Stderr) {
  llvm::SmallString<128> Out;
  if (llvm::sys::fs::createTemporaryFile("ppios-cc-stderr", "txt", Out))
    return run(Command, Directory);
  auto Program = llvm::StringRef(Command[0]).contains('/')
                     ? llvm::ErrorOr<std::string>(absolutePath(Command[0]))
                     : llvm::sys::findProgramByName(Command[0]);
  int Status = 127;
  std::string Saved = currentDirectory();
  if (Program && (Directory.empty() || !llvm::sys::fs::set_current_path(Directory))) {
    std::vector<llvm::StringRef> Args(Command.begin(), Command.end());
    std::optional<llvm::StringRef> Redirects[] = {std::nullopt, std::nullopt,
                                                  llvm::StringRef(Out)};
    Status = llvm::sys::ExecuteAndWait(*Program, Args, std::nullopt, Redirects);
    if (!Directory.empty())
      llvm::sys::fs::set_current_path(Saved);
  }
  auto Buffer = llvm::MemoryBuffer::getFile(Out);
  llvm::sys::fs::remove(Out);
  *Stderr = Buffer ? (*Buffer)->getBuffer().str() : "";
  return Status;
}

// The first line of a compiler's output that says "error", for a one-line warning.
std::string firstError(llvm::StringRef Output) {
  llvm::SmallVector<llvm::StringRef, 32> Lines;
  Output.split(Lines, '\n');
  for (llvm::StringRef L : Lines)
    if (L.contains("error"))
      return L.trim().str();
  return Lines.empty() ? std::string() : Lines.front().trim().str();
}

// The command's standard output if it exits 0, else nothing (its stderr is dropped).
std::optional<std::string> captureIfSucceeds(const std::vector<std::string> &Command) {
  auto Program = llvm::sys::findProgramByName(Command[0]);
  if (!Program)
    return std::nullopt;
  llvm::SmallString<128> Out;
  llvm::sys::fs::createTemporaryFile("ppios-cc-wrapper", "txt", Out);
  std::vector<llvm::StringRef> Args(Command.begin(), Command.end());
  std::optional<llvm::StringRef> Redirects[] = {llvm::StringRef(""), llvm::StringRef(Out),
                                                llvm::StringRef("")};
  int Status = llvm::sys::ExecuteAndWait(*Program, Args, std::nullopt, Redirects);
  auto Buffer = llvm::MemoryBuffer::getFile(Out);
  llvm::sys::fs::remove(Out);
  if (Status != 0 || !Buffer)
    return std::nullopt;
  return (*Buffer)->getBuffer().trim().str();
}

// The MPI compiler wrapper ppios-cc drives: which MPI it is, for the runtime is built per
// MPI (their ABIs differ), and the flags that find its mpi.h, for the parses.
struct MpiWrapper {
  std::string Family; // "openmpi", or "mpich" (MPICH, Intel MPI, MVAPICH, Cray MPICH)
  std::vector<std::string> CompileFlags;
};

// Of a wrapper's compile command, the flags the preprocessor needs.
std::vector<std::string> preprocessorFlags(const std::vector<std::string> &Words) {
  std::vector<std::string> Flags;
  for (size_t I = 0; I < Words.size(); ++I) {
    llvm::StringRef W = Words[I];
    if ((W == "-I" || W == "-D" || W == "-U" || W == "-isystem" || W == "-include") &&
        I + 1 < Words.size()) {
      Flags.push_back(Words[I]);
      Flags.push_back(Words[++I]);
    } else if (W.startswith("-I") || W.startswith("-D") || W.startswith("-U") ||
               W == "-pthread") {
      Flags.push_back(Words[I]);
    }
  }
  return Flags;
}

// Asks the wrapper the questions each family answers, and only its own family answers:
// Open MPI --showme:version (then --showme:compile); MPICH and its derivatives
// -compile_info (older ones -show); Cray's cc --cray-print-opts=cflags. Anything else
// (a plain compiler) answers none, or not with an answer.
std::optional<MpiWrapper> identifyWrapper(const std::string &Compiler) {
  if (std::optional<std::string> Version = captureIfSucceeds({Compiler, "--showme:version"});
      Version && llvm::StringRef(*Version).contains("Open MPI"))
    if (std::optional<std::string> Out = captureIfSucceeds({Compiler, "--showme:compile"}))
      return MpiWrapper{"openmpi", splitWords(*Out)};
  for (const char *Question : {"-compile_info", "-show"})
    if (std::optional<std::string> Out = captureIfSucceeds({Compiler, Question});
        Out && !Out->empty())
      return MpiWrapper{"mpich", preprocessorFlags(splitWords(*Out))};
  if (std::optional<std::string> Out = captureIfSucceeds({Compiler, "--cray-print-opts=cflags"});
      Out && !Out->empty())
    return MpiWrapper{"mpich", preprocessorFlags(splitWords(*Out))};
  return std::nullopt;
}

const char *familyName(llvm::StringRef Family) {
  return Family == "openmpi" ? "Open MPI" : "MPICH (or Intel MPI, MVAPICH, Cray MPICH)";
}

struct RuntimePaths {
  std::string IncludeDir, LibDir;
};

bool exists(const std::string &Path) { return llvm::sys::fs::exists(Path); }

// Install tree first (<prefix>/bin/ppios-cc), then the build tree the executable is in
// (bin/ and runtime/ of one build directory). Nothing else: an installed ppios-cc that
// fell back to the build tree it came from would link programs against that tree, which
// is gone once the build directory is removed.
std::optional<RuntimePaths> findRuntime(const std::string &Exe) {
  llvm::SmallString<256> Prefix(llvm::sys::path::parent_path(llvm::sys::path::parent_path(Exe)));
  for (const char *LibDir : {PPIOS_CC_INSTALL_LIBDIR, "lib", "lib64"}) {
    llvm::SmallString<256> Lib(Prefix), Inc(Prefix);
    llvm::sys::path::append(Lib, LibDir);
    llvm::sys::path::append(Inc, "include");
    if (exists((Lib + "/libppios.so").str()) && exists((Inc + "/ppios/ppios.h").str()))
      return RuntimePaths{std::string(Inc), std::string(Lib)};
  }
  llvm::SmallString<256> Lib(llvm::sys::path::parent_path(Exe));
  llvm::sys::path::append(Lib, PPIOS_CC_BUILD_LIBDIR_FROM_BIN);
  llvm::sys::path::remove_dots(Lib, true);
  std::string Inc = PPIOS_CC_SOURCE_INCLUDE_DIR;
  if (exists((Lib + "/libppios.so").str()) && exists(Inc + "/ppios/ppios.h"))
    return RuntimePaths{Inc, std::string(Lib)};
  return std::nullopt;
}

// The runtime built for the wrapper's MPI: LibDir's libppios for the MPI ppios was built
// with (PPIOS_CC_RUNTIME_MPI), LibDir/ppios-<family>/libppios for another one (the build's
// PPIOS_WITH_MPICH), or nothing.
std::optional<RuntimePaths> runtimeFor(RuntimePaths P, const std::string &Family) {
  if (Family != PPIOS_CC_RUNTIME_MPI)
    P.LibDir += "/ppios-" + Family;
  if (!exists(P.LibDir + "/libppios.so"))
    return std::nullopt;
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

// The transformed files and temporary objects of one run; removed at the end unless
// --ppios-keep-temps.
class TempDirectory {
public:
  explicit TempDirectory(bool Keep) : Keep(Keep) {}
  ~TempDirectory() {
    if (Path.empty())
      return;
    if (Keep)
      llvm::errs() << "ppios-cc: transformed files kept in " << Path << "\n";
    else
      llvm::sys::fs::remove_directories(Path);
  }
  bool create() {
    if (!Path.empty())
      return true;
    llvm::SmallString<256> Dir;
    if (llvm::sys::fs::createUniqueDirectory("ppios-cc", Dir)) {
      llvm::errs() << "ppios-cc: error: cannot create a temporary directory\n";
      return false;
    }
    Path = absolutePath(Dir);
    return true;
  }
  // A subdirectory per input, so that inputs with the same file name do not collide.
  std::string slot(size_t N) const {
    llvm::SmallString<256> Dir(Path);
    llvm::sys::path::append(Dir, std::to_string(N));
    llvm::sys::fs::create_directories(Dir);
    return std::string(Dir);
  }

private:
  bool Keep;
  std::string Path;
};

// ---- parsing and compiling units

// The clang arguments for parsing a C file compiled with Flags (the user's compile flags).
std::vector<std::string> parserArgs(const std::vector<std::string> &Flags,
                                    const std::vector<std::string> &MpiCompileFlags) {
  std::vector<std::string> Own;
  for (size_t I = 0; I < Flags.size(); ++I) {
    llvm::StringRef Arg = Flags[I];
    bool HasValue = takesValue(Arg) && I + 1 < Flags.size();
    if (forParser(Arg)) {
      Own.push_back(Flags[I]);
      if (HasValue)
        Own.push_back(Flags[I + 1]);
    }
    if (HasValue)
      ++I;
  }
  std::vector<std::string> Parse = Own;
  Parse.insert(Parse.end(), MpiCompileFlags.begin(), MpiCompileFlags.end());
  Parse.push_back(ClangResourceDir);
  Parse.push_back("-std=gnu11");
  Parse.push_back("-Wno-unused-command-line-argument");
  // Keep clang's own warnings out: the real compiler reports those.
  Parse.push_back("-Wno-everything");
  // Later -std flags from the user win over the default above.
  for (const std::string &A : Own)
    if (llvm::StringRef(A).startswith("-std="))
      Parse.push_back(A);
  return Parse;
}

// Flags minus those that have no business in compiling one unit to an object.
std::vector<std::string> unitCompileFlags(const std::vector<std::string> &Flags) {
  std::vector<std::string> Kept;
  for (size_t I = 0; I < Flags.size(); ++I) {
    llvm::StringRef Arg = Flags[I];
    bool HasValue = takesValue(Arg) && I + 1 < Flags.size();
    if (!droppedFromUnitCompile(Arg)) {
      Kept.push_back(Flags[I]);
      if (HasValue)
        Kept.push_back(Flags[I + 1]);
    }
    if (HasValue)
      ++I;
  }
  return Kept;
}

// The directory of Slot that holds the generated pieces of its transformed file.
std::string generatedDirectory(const std::string &Slot) {
  llvm::SmallString<256> Dir(Slot);
  llvm::sys::path::append(Dir, "ppios-generated");
  return std::string(Dir);
}

// Writes R's source as Slot/<file name of Source>; returns its path, or nothing on error.
// Each piece ppios-cc generated is written as a header of its own, included where the piece
// goes, that starts with `#pragma GCC system_header`: GCC and Clang then say nothing of the
// generated code. Its warnings would only repeat the user's own (the prefetch thread runs
// copies of the program's statements) at lines of the user's file that hold other code, and
// a house style such as -Werror=declaration-after-statement would reject it. Errors in it
// still stop the compile (and the driver falls back to the original file).
std::optional<std::string> writeTransformed(const TransformResult &R, const std::string &Source,
                                            const std::string &Slot) {
  std::string Text;
  std::string Generated = generatedDirectory(Slot);
  bool AnyGenerated = std::any_of(R.Pieces.begin(), R.Pieces.end(),
                                  [](const SourcePiece &P) { return P.Generated; });
  if (AnyGenerated && llvm::sys::fs::create_directories(Generated)) {
    llvm::errs() << "ppios-cc: error: cannot create " << Generated << "\n";
    return std::nullopt;
  }
  for (size_t N = 0; N < R.Pieces.size(); ++N) {
    const SourcePiece &P = R.Pieces[N];
    if (!P.Generated) {
      Text += P.Text;
      continue;
    }
    llvm::SmallString<256> Header(Generated);
    llvm::sys::path::append(Header, std::to_string(N) + ".h");
    if (!writeAtomically(std::string(Header), "#pragma GCC system_header\n" + P.Text))
      return std::nullopt;
    Text += "#include \"" + std::string(Header) + "\"\n";
  }
  llvm::SmallString<256> Temp(Slot);
  llvm::sys::path::append(Temp, llvm::sys::path::filename(Source));
  if (!writeAtomically(std::string(Temp), Text))
    return std::nullopt;
  return std::string(Temp);
}

// ---- unit records

struct RecordedFile {
  std::string Path, Hash;
};

struct UnitRecord {
  std::string Directory, Source;
  std::vector<std::string> Flags;
  std::vector<RecordedFile> Files;
  // What ppios-cc reported when it compiled the unit: the link step reports only what the
  // whole program changes (see newDiagnostics).
  std::string Diagnostics;
};

std::optional<std::string> hashFile(const std::string &Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return std::nullopt;
  return llvm::utohexstr(llvm::xxHash64((*Buffer)->getBuffer()), /*LowerCase=*/true);
}

std::string recordText(const UnitRecord &R) {
  llvm::json::Array Files;
  for (const RecordedFile &F : R.Files)
    Files.push_back(llvm::json::Object{{"path", F.Path}, {"hash", F.Hash}});
  llvm::json::Object Root{{"version", RecordVersion},
                          {"directory", R.Directory},
                          {"source", R.Source},
                          {"flags", llvm::json::Array(R.Flags)},
                          {"files", std::move(Files)},
                          {"diagnostics", R.Diagnostics}};
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  OS << llvm::json::Value(std::move(Root));
  return OS.str();
}

std::optional<UnitRecord> parseRecord(llvm::StringRef Text) {
  llvm::Expected<llvm::json::Value> Value = llvm::json::parse(Text);
  if (!Value) {
    llvm::consumeError(Value.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *Root = Value->getAsObject();
  if (!Root || Root->getInteger("version") != RecordVersion)
    return std::nullopt;
  auto Directory = Root->getString("directory");
  auto Source = Root->getString("source");
  const llvm::json::Array *Flags = Root->getArray("flags");
  const llvm::json::Array *Files = Root->getArray("files");
  if (!Directory || !Source || !Flags || !Files)
    return std::nullopt;
  UnitRecord R{Directory->str(), Source->str(), {}, {}, ""};
  if (auto Diagnostics = Root->getString("diagnostics")) // older records have none
    R.Diagnostics = Diagnostics->str();
  for (const llvm::json::Value &F : *Flags) {
    auto Flag = F.getAsString();
    if (!Flag)
      return std::nullopt;
    R.Flags.push_back(Flag->str());
  }
  for (const llvm::json::Value &F : *Files) {
    const llvm::json::Object *File = F.getAsObject();
    auto Path = File ? File->getString("path") : std::nullopt;
    auto Hash = File ? File->getString("hash") : std::nullopt;
    if (!Path || !Hash)
      return std::nullopt;
    R.Files.push_back({Path->str(), Hash->str()});
  }
  return R;
}

// Adds the record of Source (parsed as R) to Object. A failure only costs the link step's
// cross-file prefetching, so it is a warning, given once per run.
void addRecord(const std::string &Object, const std::string &Source,
               const std::vector<std::string> &Flags, const TransformResult &R,
               const std::string &Slot, bool &Warned) {
  UnitRecord Record{currentDirectory(), Source, Flags, {}, R.Diagnostics};
  for (const std::string &File : R.Files)
    if (std::optional<std::string> Hash = hashFile(File))
      Record.Files.push_back({File, *Hash});
  llvm::SmallString<256> RecordFile(Slot);
  llvm::sys::path::append(RecordFile, "unit.json");
  auto Objcopy = llvm::sys::findProgramByName("objcopy");
  int Status = 1;
  if (Objcopy && writeAtomically(std::string(RecordFile), recordText(Record))) {
    std::string AddSection = std::string(RecordSection) + "=" + std::string(RecordFile);
    std::string SectionFlags = std::string(RecordSection) + "=readonly,contents";
    std::vector<llvm::StringRef> Args{*Objcopy,    "--add-section", AddSection,
                                      "--set-section-flags", SectionFlags, Object};
    Status = llvm::sys::ExecuteAndWait(*Objcopy, Args);
  }
  if (Status != 0 && !Warned) {
    llvm::errs() << "ppios-cc: warning: cannot add the " << RecordSection << " record to "
                 << Object << (Objcopy ? " (objcopy failed)" : " (no objcopy)")
                 << "; linking it gives no cross-file prefetching\n";
    Warned = true;
  }
}

// The record of Object, if it has one. Invalid is set when the section is there but does
// not hold a record this driver understands.
std::optional<UnitRecord> readRecord(const std::string &Object, bool &Invalid) {
  Invalid = false;
  auto Binary = llvm::object::ObjectFile::createObjectFile(Object);
  if (!Binary) {
    // Not an object LLVM knows: the linker decides what it is.
    llvm::consumeError(Binary.takeError());
    return std::nullopt;
  }
  for (const llvm::object::SectionRef &S : Binary->getBinary()->sections()) {
    llvm::Expected<llvm::StringRef> Name = S.getName();
    if (!Name) {
      llvm::consumeError(Name.takeError());
      continue;
    }
    if (*Name != RecordSection)
      continue;
    llvm::Expected<llvm::StringRef> Contents = S.getContents();
    if (!Contents) {
      llvm::consumeError(Contents.takeError());
      Invalid = true;
      return std::nullopt;
    }
    std::optional<UnitRecord> R = parseRecord(*Contents);
    Invalid = !R;
    return R;
  }
  return std::nullopt;
}

// The first file of R that is gone or differs from what was compiled, if any.
std::optional<std::string> changedFile(const UnitRecord &R) {
  for (const RecordedFile &F : R.Files)
    if (hashFile(F.Path) != F.Hash)
      return F.Path;
  return std::nullopt;
}

// Diagnostic text in its diagnostics: each starts at a line that names a location and a
// severity, and holds the source excerpt and notes that follow it.
std::vector<std::string> splitDiagnostics(llvm::StringRef Text) {
  std::vector<std::string> Out;
  while (!Text.empty()) {
    auto [Line, Rest] = Text.split('\n');
    bool Starts = !Line.empty() && Line[0] != ' ' && !Line.contains(": note: ") &&
                  (Line.contains(": remark: ") || Line.contains(": warning: ") ||
                   Line.contains(": error: "));
    if (Starts || Out.empty())
      Out.emplace_back();
    Out.back() += Line.str() + "\n";
    Text = Rest;
  }
  return Out;
}

// Of what the link step reports for a unit, what its compile did not report already (a
// read the whole program now prefetches, or no longer does): the rest was said once.
std::string newDiagnostics(const std::string &AtLink, const std::string &AtCompile) {
  std::vector<std::string> Said = splitDiagnostics(AtCompile);
  std::string Out;
  for (const std::string &D : splitDiagnostics(AtLink))
    if (std::find(Said.begin(), Said.end(), D) == Said.end())
      Out += D;
  return Out;
}

// ---- the driver

class Driver {
public:
  Driver(const Invocation &Inv, RuntimePaths Runtime, std::vector<std::string> MpiCompileFlags)
      : Inv(Inv), Runtime(std::move(Runtime)), Temps(Inv.KeepTemps),
        MpiCompileFlags(std::move(MpiCompileFlags)) {}

  int emitSource();
  int compileOrLinkEachAlone();
  int link();
  int compileOriginals(const std::string &Why);

private:
  struct LinkUnit {
    size_t InputIndex;  // in Inv.Inputs
    bool FromRecord;    // an object's record, else a C source of this command
    ProgramUnit Unit;
    std::vector<std::string> Flags; // the unit's compile flags
    std::string Reported;           // FromRecord: what its compile reported
  };

  // The runtime, and the program's own I/O calls routed to it (ppios/interpose.def).
  std::vector<std::string> runtimeLinkFlags() const {
    std::string Wrap = "-Wl";
#define PPIOS_INTERPOSE(Symbol) Wrap += ",--wrap=" #Symbol;
#include "ppios/interpose.def"
    return {"-L" + Runtime.LibDir, "-Wl,-rpath," + Runtime.LibDir, Wrap, "-lppios"};
  }
  void addRecords(const std::vector<std::pair<size_t, TransformResult>> &Results);
  std::string objectOf(const std::string &Source) const;
  void fixDependencyFiles(const std::vector<std::pair<std::string, std::string>> &Copies);
  std::vector<std::string> transformedCopyFlags(const std::string &Source,
                                                const std::string &Copy) const;
  std::optional<LinkUnit> unitOfInput(size_t InputIndex);
  std::optional<std::string> compileUnit(const LinkUnit &U, const TransformResult &R,
                                         std::string *Why);

  const Invocation &Inv;
  RuntimePaths Runtime;
  TempDirectory Temps;
  std::vector<std::string> MpiCompileFlags;
};

int Driver::emitSource() {
  size_t Sources = 0;
  for (const Input &In : Inv.Inputs)
    Sources += In.Kind == InputKind::CSource;
  if (Sources != 1 || Inv.Inputs.size() != 1) {
    llvm::errs() << "ppios-cc: error: --emit-source takes exactly one C file\n";
    return 1;
  }
  TransformResult R = transformFile(Inv.path(Inv.Inputs[0]),
                                    parserArgs(Inv.Flags, MpiCompileFlags), Inv.Options);
  llvm::errs() << R.Diagnostics;
  if (!R.Success)
    return 1;
  if (Inv.Output.empty() || Inv.Output == "-") {
    llvm::outs() << R.source();
    return 0;
  }
  return writeAtomically(Inv.Output, R.source()) ? 0 : 1;
}

// Each C input transformed alone and the whole command run by mpicc with the transformed
// copies in place of the inputs: -c, -S, and links of fewer than two units. Objects made
// by -c get their record. If a file cannot be transformed or its transformed copy does
// not compile, the command runs on the original files, with one warning saying why: a
// drop-in compiler never breaks a build.
int Driver::compileOrLinkEachAlone() {
  if (!Temps.create())
    return 1;
  std::vector<std::string> Passed = Inv.Passed;
  std::vector<std::string> Parse = parserArgs(Inv.Flags, MpiCompileFlags);
  std::vector<std::pair<size_t, TransformResult>> Results; // by input index
  std::vector<std::string> Extra{"-isystem", Runtime.IncludeDir};
  std::vector<std::pair<std::string, std::string>> Copies; // (transformed copy, original)
  std::string Why; // why the original files are compiled instead
  for (size_t N = 0; N < Inv.Inputs.size() && Why.empty(); ++N) {
    const Input &In = Inv.Inputs[N];
    if (In.Kind != InputKind::CSource)
      continue;
    const std::string &Source = Inv.path(In);
    TransformResult R = transformFile(Source, Parse, Inv.Options);
    if (!R.Success) {
      Why = Source + " cannot be parsed for prefetching (" + firstError(R.Diagnostics) + ")";
      break;
    }
    llvm::errs() << R.Diagnostics;
    if (R.Changed) {
      std::optional<std::string> Temp = writeTransformed(R, Source, Temps.slot(N));
      if (!Temp)
        return 1;
      std::vector<std::string> Own = transformedCopyFlags(Source, *Temp);
      Extra.insert(Extra.end(), Own.begin(), Own.end());
      Passed[In.Position] = *Temp;
      Copies.push_back({*Temp, Source});
    }
    Results.push_back({N, std::move(R)});
  }
  if (Why.empty()) {
    std::vector<std::string> Command{Inv.Compiler};
    Command.insert(Command.end(), Extra.begin(), Extra.end());
    Command.insert(Command.end(), Passed.begin(), Passed.end());
    if (Inv.links()) {
      std::vector<std::string> Libs = runtimeLinkFlags();
      Command.insert(Command.end(), Libs.begin(), Libs.end());
    }
    std::string Stderr;
    if (runQuietly(Command, "", &Stderr) == 0) {
      llvm::errs() << Stderr;
      fixDependencyFiles(Copies);
      addRecords(Results);
      return 0;
    }
    // The original files decide: if they fail too, that is the program's own error.
    Why = "the transformed program does not compile (" + firstError(Stderr) + ")";
  }
  return compileOriginals(Why);
}

// Runs the command on the original files (linking the runtime, so that objects other runs
// of ppios-cc transformed still link); warns once with Why if that works.
int Driver::compileOriginals(const std::string &Why) {
  std::vector<std::string> Command{Inv.Compiler};
  Command.insert(Command.end(), Inv.Passed.begin(), Inv.Passed.end());
  if (Inv.links()) {
    std::vector<std::string> Libs = runtimeLinkFlags();
    Command.insert(Command.end(), Libs.begin(), Libs.end());
  }
  if (run(Command) != 0)
    return 1;
  llvm::errs() << "ppios-cc: warning: " << Why << "; compiled without prefetching\n";
  return 0;
}

// Objects made by -c get the record of their source (see addRecord).
void Driver::addRecords(const std::vector<std::pair<size_t, TransformResult>> &Results) {
  if (!Inv.Compile || Inv.Assemble)
    return;
  bool Warned = false;
  for (const auto &[N, R] : Results) {
    const std::string &Source = Inv.path(Inv.Inputs[N]);
    addRecord(objectOf(Source), Source, Inv.Flags, R, Temps.slot(N), Warned);
  }
}

// As mpicc names objects: -o for one source, else <stem>.o in the current directory.
std::string Driver::objectOf(const std::string &Source) const {
  return !Inv.Output.empty() ? Inv.Output : (llvm::sys::path::stem(Source) + ".o").str();
}

// Dependency-file text without the generated headers under Dir (see writeTransformed):
// they are gone after the run. A -MP target line of one is dropped whole, and so is a
// continuation line left empty; a rule's last line then ends without a backslash.
std::string withoutGenerated(llvm::StringRef Text, const std::string &Dir) {
  llvm::SmallVector<llvm::StringRef, 64> Lines;
  Text.split(Lines, '\n');
  std::vector<std::string> Kept;
  for (llvm::StringRef Line : Lines) {
    if (Line.startswith(Dir) && Line.endswith(":"))
      continue;
    std::string L = Line.str();
    for (size_t At = L.find(Dir); At != std::string::npos; At = L.find(Dir, At)) {
      size_t End = std::min(L.find_first_of(" \t", At), L.size());
      size_t Begin = At > 0 && L[At - 1] == ' ' ? At - 1 : At;
      L.erase(Begin, End - Begin);
      At = Begin;
    }
    if (llvm::StringRef(L).trim() != "\\" || Line.trim() == "\\")
      Kept.push_back(std::move(L));
  }
  std::string Out;
  for (size_t N = 0; N < Kept.size(); ++N) {
    llvm::StringRef L = Kept[N];
    bool Continues = N + 1 < Kept.size() && !Kept[N + 1].empty() &&
                     (Kept[N + 1][0] == ' ' || Kept[N + 1][0] == '\t');
    if (L.endswith("\\") && !Continues)
      L = L.drop_back().rtrim();
    Out += L.str() + (N + 1 < Kept.size() ? "\n" : "");
  }
  return Out;
}

// -MD/-MMD at -c wrote dependency files that name the transformed copies: they must name
// the user's files, or the next make looks for files that are gone.
void Driver::fixDependencyFiles(const std::vector<std::pair<std::string, std::string>> &Copies) {
  bool Wanted = false;
  std::string Named; // -MF
  for (size_t I = 0; I < Inv.Flags.size(); ++I) {
    llvm::StringRef F = Inv.Flags[I];
    Wanted |= F == "-MD" || F == "-MMD";
    if (F == "-MF" && I + 1 < Inv.Flags.size())
      Named = Inv.Flags[I + 1];
    else if (F.startswith("-MF") && F.size() > 3)
      Named = F.drop_front(3).str();
  }
  if (!Wanted)
    return;
  for (const auto &[Copy, Source] : Copies) {
    // Where GCC puts it: -MF; at -c next to the object; compiling and linking in one
    // step, after the output (`-o prog`: prog.d, or prog-<stem>.d for several sources;
    // no -o: a-<stem>.d).
    std::vector<std::string> DepFiles;
    std::string Stem = llvm::sys::path::stem(Source).str();
    if (!Named.empty()) {
      DepFiles.push_back(Named);
    } else if (Inv.Compile) {
      llvm::SmallString<256> D(objectOf(Source));
      llvm::sys::path::replace_extension(D, ".d");
      DepFiles.push_back(std::string(D));
    } else if (!Inv.Output.empty()) {
      llvm::SmallString<256> D(Inv.Output);
      llvm::sys::path::replace_extension(D, "");
      DepFiles.push_back(std::string(D) + ".d");
      DepFiles.push_back(std::string(D) + "-" + Stem + ".d");
    } else {
      DepFiles.push_back("a-" + Stem + ".d");
    }
    for (const std::string &DepFile : DepFiles) {
      auto Buffer = llvm::MemoryBuffer::getFile(DepFile);
      if (!Buffer)
        continue;
      std::string Text = (*Buffer)->getBuffer().str();
      if (Text.find(Copy) == std::string::npos)
        continue;
      for (size_t At = Text.find(Copy); At != std::string::npos; At = Text.find(Copy, At))
        Text.replace(At, Copy.size(), Source);
      writeAtomically(DepFile, withoutGenerated(Text, generatedDirectory(
                                                          std::string(llvm::sys::path::parent_path(Copy)))));
    }
  }
}

// Compiler flags for a transformed copy Copy of Source (relative to the directory the
// command runs in): its quoted includes still find the neighbours of Source, named as the
// user's compile would name them (dependency files), and debug info names Source's
// directory. The runtime's header is a system header: not a dependency of the user's.
std::vector<std::string> Driver::transformedCopyFlags(const std::string &Source,
                                                      const std::string &Copy) const {
  std::string Written(llvm::sys::path::parent_path(Source));
  return {"-iquote", Written.empty() ? "." : Written,
          "-ffile-prefix-map=" + std::string(llvm::sys::path::parent_path(Copy)) + "/=" +
              (Written.empty() ? "" : Written + "/")};
}

// The program unit of input InputIndex: a C source of this command, or an object with a
// record that is still current.
std::optional<Driver::LinkUnit> Driver::unitOfInput(size_t InputIndex) {
  const Input &In = Inv.Inputs[InputIndex];
  const std::string &Path = Inv.path(In);
  if (In.Kind == InputKind::CSource)
    return LinkUnit{InputIndex, false, {Path, parserArgs(Inv.Flags, MpiCompileFlags), ""},
                    Inv.Flags, ""};
  if (llvm::sys::path::extension(Path) != ".o")
    return std::nullopt;
  bool Invalid;
  std::optional<UnitRecord> Record = readRecord(Path, Invalid);
  if (Invalid)
    llvm::errs() << "ppios-cc: warning: " << Path << ": unreadable " << RecordSection
                 << " record; it is linked without cross-file prefetching\n";
  if (!Record)
    return std::nullopt;
  if (std::optional<std::string> Changed = changedFile(*Record)) {
    llvm::errs() << "ppios-cc: warning: " << Path << ": " << *Changed << " changed since "
                 << Path << " was compiled; it is linked without cross-file prefetching\n";
    return std::nullopt;
  }
  return LinkUnit{InputIndex,
                  true,
                  {Record->Source, parserArgs(Record->Flags, MpiCompileFlags),
                   Record->Directory},
                  Record->Flags,
                  Record->Diagnostics};
}

// Compiles the transformed unit to a temporary object, in the unit's directory with its
// own flags; returns the object's path.
std::optional<std::string> Driver::compileUnit(const LinkUnit &U, const TransformResult &R,
                                               std::string *Why) {
  std::string Slot = Temps.slot(U.InputIndex);
  std::optional<std::string> Source = writeTransformed(R, U.Unit.Path, Slot);
  if (!Source)
    return std::nullopt;
  llvm::SmallString<256> Object(Slot);
  llvm::sys::path::append(Object, llvm::sys::path::stem(U.Unit.Path) + ".o");
  std::vector<std::string> Command{Inv.Compiler, "-isystem", Runtime.IncludeDir};
  std::vector<std::string> Own = transformedCopyFlags(U.Unit.Path, *Source);
  Command.insert(Command.end(), Own.begin(), Own.end());
  std::vector<std::string> Flags = unitCompileFlags(U.Flags);
  Command.insert(Command.end(), Flags.begin(), Flags.end());
  Command.insert(Command.end(), {"-c", *Source, "-o", std::string(Object)});
  std::string Stderr;
  if (runQuietly(Command, U.Unit.Directory, &Stderr) != 0) {
    *Why = U.Unit.Path + ": the transformed file does not compile (" + firstError(Stderr) + ")";
    return std::nullopt;
  }
  // The compiler's warnings are the user's code's (the generated code has none): a unit
  // compiled by an earlier run had them then.
  if (!U.FromRecord)
    llvm::errs() << Stderr;
  return std::string(Object);
}

// The link step: C sources of this command and objects with records are transformed
// together as one program (whole-program prefetching), each changed unit is compiled to a
// temporary object, and those objects are linked in place of the inputs.
int Driver::link() {
  for (const Input &In : Inv.Inputs) {
    const std::string &Path = Inv.path(In);
    if (In.Kind == InputKind::Object && llvm::sys::path::extension(Path) == ".o" &&
        !exists(Path)) {
      llvm::errs() << "ppios-cc: error: " << Path << ": no such file\n";
      return 1;
    }
  }
  std::vector<LinkUnit> Units;
  bool AnyRecord = false;
  for (size_t N = 0; N < Inv.Inputs.size(); ++N)
    if (std::optional<LinkUnit> U = unitOfInput(N)) {
      AnyRecord |= U->FromRecord;
      Units.push_back(std::move(*U));
    }
  if (Units.size() < 2)
    return compileOrLinkEachAlone();

  std::vector<ProgramUnit> Program;
  for (const LinkUnit &U : Units)
    Program.push_back(U.Unit);
  std::vector<TransformResult> Results = transformProgram(Program, Inv.Options);
  auto Failed = std::find_if(Results.begin(), Results.end(),
                             [](const TransformResult &R) { return !R.Success; });
  if (Results.size() != Units.size() || Failed != Results.end()) {
    std::string Why = "the program does not transform as a whole";
    for (const TransformResult &R : Results)
      if (!R.Success && !R.Diagnostics.empty())
        Why += " (" + firstError(R.Diagnostics) + ")";
    // The objects were correct on their own; the program is still built, file by file.
    if (AnyRecord)
      llvm::errs() << "ppios-cc: warning: " << Why << "; objects are linked as they were "
                   << "compiled\n";
    return AnyRecord ? compileOrLinkEachAlone() : compileOriginals(Why);
  }
  // A unit compiled by an earlier run had its remarks then.
  for (size_t N = 0; N < Units.size(); ++N)
    llvm::errs() << (Units[N].FromRecord ? newDiagnostics(Results[N].Diagnostics, Units[N].Reported)
                                         : Results[N].Diagnostics);

  if (!Temps.create())
    return 1;
  std::vector<std::string> Passed = Inv.Passed;
  for (size_t N = 0; N < Units.size(); ++N) {
    if (!Results[N].Changed)
      continue;
    std::string Why;
    std::optional<std::string> Object = compileUnit(Units[N], Results[N], &Why);
    if (!Object)
      return compileOriginals(Why);
    Passed[Inv.Inputs[Units[N].InputIndex].Position] = *Object;
  }
  std::vector<std::string> Command{Inv.Compiler, "-I" + Runtime.IncludeDir};
  Command.insert(Command.end(), Passed.begin(), Passed.end());
  std::vector<std::string> Libs = runtimeLinkFlags();
  Command.insert(Command.end(), Libs.begin(), Libs.end());
  return run(Command) == 0 ? 0 : 1;
}

} // namespace

int runCompilerDriver(int argc, const char **argv, void *MainAddress) {
  // Response files (@file), as GCC reads them: build systems pass long command lines so.
  // A name that is no file stays as it is, as with GCC.
  llvm::BumpPtrAllocator Allocator;
  llvm::SmallVector<const char *, 64> Args(argv, argv + argc);
  llvm::cl::ExpansionContext Expansion(Allocator, llvm::cl::TokenizeGNUCommandLine);
  if (llvm::Error Err = Expansion.expandResponseFiles(Args)) {
    llvm::errs() << "ppios-cc: error: " << llvm::toString(std::move(Err)) << "\n";
    return 1;
  }
  Invocation Inv;
  if (std::optional<int> Status = parseCommandLine(static_cast<int>(Args.size()), Args.data(), Inv))
    return *Status;
  if (Inv.Preprocess) {
    std::vector<std::string> Command{Inv.Compiler};
    Command.insert(Command.end(), Inv.Passed.begin(), Inv.Passed.end());
    return run(Command);
  }
  // A wrapper that is not there is no MPI of unknown kind: say which is missing. (A path
  // is not looked up on PATH, so it is checked itself.)
  bool Found = llvm::StringRef(Inv.Compiler).contains('/')
                   ? llvm::sys::fs::can_execute(Inv.Compiler)
                   : static_cast<bool>(llvm::sys::findProgramByName(Inv.Compiler));
  if (!Found) {
    const char *Env = std::getenv("PPIOS_CC");
    llvm::errs() << "ppios-cc: error: cannot find the MPI compiler wrapper '" << Inv.Compiler
                 << "'" << (Env && *Env ? " that PPIOS_CC names" : " (PPIOS_CC names another)")
                 << "\n";
    return 1;
  }
  // A compiler that is no MPI wrapper we know would build a program that never prefetches
  // (or none at all): say so and stop rather than hand back such a binary.
  std::optional<MpiWrapper> Wrapper = identifyWrapper(Inv.Compiler);
  if (!Wrapper) {
    llvm::errs() << "ppios-cc: error: cannot tell which MPI '" << Inv.Compiler
                 << "' is the compiler wrapper of: it answers none of --showme:version "
                    "(Open MPI), -compile_info or -show (MPICH, Intel MPI, MVAPICH) and "
                    "--cray-print-opts=cflags (Cray); set PPIOS_CC to the MPI's C compiler "
                    "wrapper\n";
    return 1;
  }
  std::string Exe = llvm::sys::fs::getMainExecutable(argv[0], MainAddress);
  std::optional<RuntimePaths> Installed = findRuntime(Exe);
  if (!Installed) {
    llvm::SmallString<256> Prefix(llvm::sys::path::parent_path(llvm::sys::path::parent_path(Exe)));
    llvm::errs() << "ppios-cc: error: cannot find the ppios runtime: " << Exe
                 << " is not in the bin/ of an installed ppios (no " << Prefix << "/"
                 << PPIOS_CC_INSTALL_LIBDIR << "/libppios.so with " << Prefix
                 << "/include/ppios/ppios.h) nor of a ppios build directory; run the ppios-cc "
                 << "of an install (cmake --install, docs/install.md)\n";
    return 1;
  }
  std::optional<RuntimePaths> Runtime = runtimeFor(*Installed, Wrapper->Family);
  if (!Runtime) {
    llvm::errs() << "ppios-cc: error: '" << Inv.Compiler << "' is the wrapper of "
                 << familyName(Wrapper->Family) << ", but this ppios has no runtime for it, "
                 << "only for " << familyName(PPIOS_CC_RUNTIME_MPI)
                 << " (build ppios for that MPI: docs/install.md)\n";
    return 1;
  }
  Driver D(Inv, *Runtime, std::move(Wrapper->CompileFlags));
  if (Inv.EmitSource)
    return D.emitSource();
  if (!Inv.Untransformed.empty())
    return D.compileOriginals(Inv.Untransformed);
  if (Inv.links())
    return D.link();
  return D.compileOrLinkEachAlone();
}

} // namespace ppios
