#include "IoCallTable.h"

#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"

namespace ppios {

namespace {
using K = IoKind;
using I = IoInterface;
using A = PtAction;

// Columns: name, kind, interface, PT action, handle, handle-is-out, buffer, status, path,
// dropped args, uses position, write-mode arg, out arg.
const IoCallInfo Table[] = {
    {"open", K::Open, I::Posix, A::RenamePt, -1, 0, -1, -1, 0, {-1, -1}, false, true, -1},
    {"close", K::Close, I::Posix, A::RenamePt, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    {"read", K::Read, I::Posix, A::Prefetch, 0, 0, 1, -1, -1, {-1, -1}, true, false, -1},
    {"pread", K::Read, I::Posix, A::Prefetch, 0, 0, 1, -1, -1, {-1, -1}, false, false, -1},
    {"write", K::Write, I::Posix, A::CountOnly, 0, 0, 1, -1, -1, {-1, -1}, true, false, -1},
    {"pwrite", K::Write, I::Posix, A::CountOnly, 0, 0, 1, -1, -1, {-1, -1}, false, false, -1},
    {"lseek", K::Seek, I::Posix, A::Keep, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},

    {"fopen", K::Open, I::Stdio, A::RenamePt, -1, 0, -1, -1, 0, {-1, -1}, false, true, -1},
    {"fclose", K::Close, I::Stdio, A::RenamePt, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    {"fread", K::Read, I::Stdio, A::Prefetch, 3, 0, 0, -1, -1, {-1, -1}, true, false, -1},
    // Line reads: the PT runs them on its own stream, topped up by prefetches of what the
    // MT's stream will take from the cache, so it follows the lines exactly. getline's
    // buffer and size are the MT's memory: the PT's call drops both.
    {"fgets", K::Read, I::Stdio, A::Prefetch, 2, 0, 0, -1, -1, {-1, -1}, true, false, -1},
    {"getline", K::Read, I::Stdio, A::Prefetch, 2, 0, 0, -1, -1, {1, -1}, true, false, -1},
    {"getdelim", K::Read, I::Stdio, A::Prefetch, 3, 0, 0, -1, -1, {1, -1}, true, false, -1},
    // A formatted read: the PT runs it on its own stream too, suppressing every conversion
    // (it never stores into the program's destinations), so it matches exactly the input
    // the program's call matches and returns the same count.
    {"fscanf", K::Read, I::Stdio, A::Prefetch, 0, 0, -1, -1, -1, {-1, -1}, true, false, -1, true},
    {"fwrite", K::Write, I::Stdio, A::CountOnly, 3, 0, 0, -1, -1, {-1, -1}, true, false, -1},
    {"fseek", K::Seek, I::Stdio, A::Keep, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    {"fseeko", K::Seek, I::Stdio, A::Keep, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    {"ftell", K::Query, I::Stdio, A::Keep, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    // The PT's own stream answers: its prefetches move it and set its end-of-file flag as
    // the program's freads would (`while (!feof(f)) { n = fread(...); ... }`).
    {"feof", K::Query, I::Stdio, A::Keep, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    {"ferror", K::Query, I::Stdio, A::Keep, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    {"ftello", K::Query, I::Stdio, A::Keep, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    {"rewind", K::Seek, I::Stdio, A::Keep, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},

    {"MPI_File_open", K::Open, I::MpiIo, A::RenamePt, 4, 1, -1, -1, 1, {0, 3}, false, true, -1},
    {"MPI_File_close", K::Close, I::MpiIo, A::RenamePt, 0, 1, -1, -1, -1, {-1, -1}, false, false, -1},
    {"MPI_File_read", K::Read, I::MpiIo, A::Prefetch, 0, 0, 1, 4, -1, {-1, -1}, true, false, -1},
    {"MPI_File_read_at", K::Read, I::MpiIo, A::Prefetch, 0, 0, 2, 5, -1, {-1, -1}, false, false, -1},
    // Collective reads: the PT prefetches this process's part with reads of its own.
    {"MPI_File_read_all", K::Read, I::MpiIo, A::Prefetch, 0, 0, 1, 4, -1, {-1, -1}, true, false, -1},
    {"MPI_File_read_at_all", K::Read, I::MpiIo, A::Prefetch, 0, 0, 2, 5, -1, {-1, -1}, false, false, -1},
    {"MPI_File_write", K::Write, I::MpiIo, A::CountOnly, 0, 0, 1, 4, -1, {-1, -1}, true, false, -1},
    {"MPI_File_write_at", K::Write, I::MpiIo, A::CountOnly, 0, 0, 2, 5, -1, {-1, -1}, false, false, -1},
    {"MPI_File_write_all", K::Write, I::MpiIo, A::CountOnly, 0, 0, 1, 4, -1, {-1, -1}, true, false, -1},
    {"MPI_File_write_at_all", K::Write, I::MpiIo, A::CountOnly, 0, 0, 2, 5, -1, {-1, -1}, false, false, -1},
    {"MPI_File_seek", K::Seek, I::MpiIo, A::RenamePt, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    // A view moves the file pointer and maps offsets (the runtime serves contiguous ones).
    {"MPI_File_set_view", K::Seek, I::MpiIo, A::RenamePt, 0, 0, -1, -1, -1, {-1, -1}, false, false, -1},
    {"MPI_File_get_size", K::Query, I::MpiIo, A::RenamePt, 0, 0, -1, -1, -1, {-1, -1}, false, false, 1},

    // What a read returned, from its status: in the PT, what its prefetch predicted.
    {"MPI_Comm_rank", K::Query, I::Mpi, A::RenamePt, -1, 0, -1, -1, -1, {-1, -1}, false, false, 1},
    {"MPI_Comm_size", K::Query, I::Mpi, A::RenamePt, -1, 0, -1, -1, -1, {-1, -1}, false, false, 1},
    {"MPI_Get_count", K::Query, I::Mpi, A::RenamePt, -1, 0, -1, -1, -1, {-1, -1}, false, false, 2},
    {"MPI_Get_elements", K::Query, I::Mpi, A::RenamePt, -1, 0, -1, -1, -1, {-1, -1}, false, false, 2},

    {"MPI_Finalize", K::Finalize, I::Mpi, A::None, -1, 0, -1, -1, -1, {-1, -1}, false, false, -1},
};
} // namespace

const IoCallInfo *IoCallTable::lookup(llvm::StringRef Name) {
  for (const IoCallInfo &Info : Table)
    if (Name == Info.Name)
      return &Info;
  return nullptr;
}

const char *IoCallTable::unhandledReadReason(llvm::StringRef Name) {
  static const struct {
    const char *Names[14];
    const char *Reason;
  } Families[] = {
      {{"fgetc", "getc", "getc_unlocked", "fgetc_unlocked", "fgets_unlocked", "vfscanf",
        "__isoc99_vfscanf", "fgetws", "fgetwc"},
       "a character-oriented stdio read or a formatted one through a va_list, which ppios-cc "
       "does not pre-execute (how much it reads is only known from the data)"},
      {{"MPI_File_iread", "MPI_File_iread_at", "MPI_File_iread_all", "MPI_File_iread_at_all",
        "MPI_File_read_all_begin", "MPI_File_read_at_all_begin", "MPI_File_read_ordered_begin",
        "MPI_File_read_ordered", "MPI_File_read_shared", "MPI_File_iread_shared"},
       "a non-blocking, split or shared-pointer MPI-IO read, which ppios-cc does not "
       "pre-execute"},
      {{"readv", "preadv", "preadv2", "aio_read", "aio_read64", "lio_listio"},
       "a vectored or asynchronous POSIX read, which ppios-cc does not pre-execute"},
  };
  for (const auto &F : Families)
    for (const char *N : F.Names)
      if (N && Name == N)
        return F.Reason;
  return nullptr;
}

const IoCallInfo *IoCallTable::lookup(const clang::CallExpr *Call) {
  const clang::FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee || !Callee->getIdentifier())
    return nullptr;
  // A function of the program's own with the same name as a libc one is not that call.
  if (Callee->hasBody() && !Callee->isInlined())
    return nullptr;
  return lookup(Callee->getName());
}

} // namespace ppios
