// __wrap_<sym> for every PPIOS_INTERPOSE(sym) of ppios/interpose.def: a program linked
// with -Wl,--wrap=sym calls these instead of sym. Each has exactly the semantics of sym
// (return value, errno, file positions). On the MT they enter the runtime (ppios_<sym>);
// they pass straight to the real call (libppios is linked without --wrap, so `pread`
// here is libc's) when the runtime must not be entered (see pass_through()). On the PT
// they only ever touch what the PT owns: anything else fails with EBADF untouched.
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <type_traits>

#include "ChangeGenerations.h"
#include "ErrnoGuard.h"
#include "FileProbe.h"
#include "GlibcStream.h"
#include "PtThread.h"
#include "Runtime.h"
#include "Signals.h"
#include "StreamHolds.h"
#include "ThreadState.h"
#include "WrapSupport.h"
#include "ppios/ppios.h"

using ppios::PtResources;
using ppios::pt_owns;
using ppios::RuntimeScope;
using ppios::ThreadRole;
using ppios::t_thread;
using ppios::on_pt;
using ppios::pts_own;

extern "C" void __chk_fail(void) __attribute__((noreturn));
extern "C" char *__fgets_chk(char *s, size_t size, int n, FILE *stream);
extern "C" ssize_t __getdelim(char **lineptr, size_t *n, int delim, FILE *stream);
extern "C" int __isoc99_vfscanf(FILE *stream, const char *format, va_list ap);

namespace ppios {
void mpi_file_written_passing(MPI_File fh);
}

namespace {

using ppios::StreamHolds;

// The effects of the calls below on the node's change table where they pass straight
// through (dispatch, WrapSupport.h); the runtime's versions do the same with its cache.

// An open: O_TRUNC emptied the file; the descriptor may be stdout's or stderr's.
struct Opened {
  int flags;
  void before() {}
  void after(int fd) {
    if (fd < 0) return;
    if (flags & O_TRUNC) ppios::ChangeGenerations::node().bump_file_of(fd);
    ppios::fd_repointed(fd, false);
  }
};

// A call that made `fd` (its result, or -1) lead to another file: dup, dup2, dup3.
struct Repointed {
  void before() {}
  void after(int fd) {
    if (fd >= 0) ppios::fd_repointed(fd, false);
  }
};

struct Closed {
  int fd;
  void before() {}
  void after(int rc) {
    if (rc == 0) ppios::fd_repointed(fd, false);
  }
};

// A stream opened (fopen, fdopen, tmpfile) with `mode`: one that may write holds its file.
struct StreamOpened {
  const char *mode;
  bool truncates;
  void before() {}
  void after(FILE *stream) { StreamHolds::get().opened(stream, mode, truncates, false); }
};

// A stream closed, or reopened (freopen: `mode` non-null): its hold is taken before and
// given back after (its buffered bytes are in the file then).
struct StreamClosed {
  explicit StreamClosed(FILE *s, const char *m = nullptr) : stream(s), mode(m) {}
  FILE *stream;
  const char *mode;
  StreamHolds::Taken taken;
  void before() { taken = StreamHolds::get().take(stream); }
  template <class R>
  void after(const R &result) {
    StreamHolds::get().give_back(taken, false);
    if constexpr (std::is_same_v<R, FILE *>) {
      if (mode != nullptr) StreamHolds::get().opened(result, mode, truncating(mode), false);
    }
  }
  static bool truncating(const char *m) { return m != nullptr && m[0] == 'w'; }
};

// The runtime's side of an open, dup or close that may have re-pointed descriptor 1 or 2.
template <class Call>
int repointing(int fd_of_call, Call call) {
  const int r = call();
  if (r >= 0 && fd_of_call >= 0) {
    ppios::ErrnoGuard errno_guard;
    ppios::fd_repointed(fd_of_call, true);
  }
  return r;
}

// A blocking MPI-IO write through `fh` (MpiIo.cpp).
struct MpiWritten {
  MPI_File fh;
  void before() {}
  void after(int) { ppios::mpi_file_written_passing(fh); }
};

int open_any(const char *path, int flags, mode_t mode, const void *site) {
  return ppios::dispatch(
      site, [&] { return ppios_pt_open(path, flags); }, [&] { return open(path, flags, mode); },
      [&] {
        const int fd = ppios_open(path, flags, mode);
        return fd < 0 ? fd : repointing(fd, [&] { return fd; });
      },
      Opened{flags});
}

// openat() relative to a directory descriptor: the PT opens only what open() would (an
// absolute path, or one relative to the working directory).
int openat_any(int dirfd, const char *path, int flags, mode_t mode, const void *site) {
  if (!on_pt() && dirfd != AT_FDCWD && pts_own(dirfd)) return -1;
  return ppios::dispatch(
      site,
      [&] {
        if (dirfd == AT_FDCWD || (path != nullptr && path[0] == '/')) return ppios_pt_open(path, flags);
        errno = EBADF;
        return -1;
      },
      [&] { return openat(dirfd, path, flags, mode); },
      [&] {
        const int fd = ppios_openat(dirfd, path, flags, mode);
        return fd < 0 ? fd : repointing(fd, [&] { return fd; });
      },
      Opened{flags});
}

// What _FORTIFY_SOURCE's __open_2 checks: creating a file needs a mode.
void check_open_2(int flags) {
  if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) __chk_fail();
}

// fscanf and glibc's ISO C99 one (__isoc99_fscanf, what <stdio.h> names fscanf unless
// _GNU_SOURCE is defined) differ only in the vfscanf that does the work.
int scan_any(FILE *stream, const char *format, va_list ap, bool c99, const void *site) {
  auto real = [&] { return c99 ? __isoc99_vfscanf(stream, format, ap) : vfscanf(stream, format, ap); };
  return ppios::dispatch(
      site, [&] { return pt_owns(stream) ? real() : EOF; }, real,
      [&] { return ppios_vfscanf(stream, format, ap, c99 ? 1 : 0); });
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ POSIX

int __wrap_open(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return open_any(path, flags, mode, __builtin_return_address(0));
}

int __wrap_open64(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return open_any(path, flags, mode, __builtin_return_address(0));
}

int __wrap___open_2(const char *path, int flags) {
  check_open_2(flags);
  return open_any(path, flags, 0, __builtin_return_address(0));
}

int __wrap___open64_2(const char *path, int flags) {
  check_open_2(flags);
  return open_any(path, flags, 0, __builtin_return_address(0));
}

int __wrap_openat(int dirfd, const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return openat_any(dirfd, path, flags, mode, __builtin_return_address(0));
}

int __wrap_openat64(int dirfd, const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return openat_any(dirfd, path, flags, mode, __builtin_return_address(0));
}

int __wrap___openat_2(int dirfd, const char *path, int flags) {
  check_open_2(flags);
  return openat_any(dirfd, path, flags, 0, __builtin_return_address(0));
}

int __wrap___openat64_2(int dirfd, const char *path, int flags) {
  check_open_2(flags);
  return openat_any(dirfd, path, flags, 0, __builtin_return_address(0));
}

// creat() is open() with O_CREAT | O_WRONLY | O_TRUNC: a truncation, an own change.
int __wrap_creat(const char *path, mode_t mode) {
  return open_any(path, O_CREAT | O_WRONLY | O_TRUNC, mode, __builtin_return_address(0));
}

int __wrap_creat64(const char *path, mode_t mode) {
  return open_any(path, O_CREAT | O_WRONLY | O_TRUNC, mode, __builtin_return_address(0));
}

int __wrap_close(int fd) {
  if (!on_pt() && pts_own(fd)) return -1;
  return ppios::dispatch(
      __builtin_return_address(0), [&] { return ppios_pt_close(fd); }, [&] { return close(fd); },
      [&] {
        const int rc = ppios_close(fd);
        return rc != 0 ? rc : repointing(fd, [&] { return rc; });
      },
      Closed{fd});
}

// Descriptors made by the program: the stdout or stderr stream writes whatever file 1 or
// 2 leads to (StreamHolds). The PT makes none.
int __wrap_dup(int fd) {
  if (!on_pt() && pts_own(fd)) return -1;
  return ppios::dispatch(
      __builtin_return_address(0), [&] { return pt_owns(fd) ? dup(fd) : (errno = EBADF, -1); },
      [&] { return dup(fd); },
      [&] {
        const int r = dup(fd);
        return repointing(r, [&] { return r; });
      },
      Repointed{});
}

int __wrap_dup2(int fd, int to) {
  if (!on_pt() && pts_own(fd)) return -1;
  return ppios::dispatch(
      __builtin_return_address(0), [&] { return (errno = EBADF, -1); }, [&] { return dup2(fd, to); },
      [&] { return repointing(to, [&] { return dup2(fd, to); }); }, Repointed{});
}

int __wrap_dup3(int fd, int to, int flags) {
  if (!on_pt() && pts_own(fd)) return -1;
  return ppios::dispatch(
      __builtin_return_address(0), [&] { return (errno = EBADF, -1); }, [&] { return dup3(fd, to, flags); },
      [&] { return repointing(to, [&] { return dup3(fd, to, flags); }); }, Repointed{});
}

void *__wrap_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if (on_pt()) {
    if (fd >= 0 && !(flags & MAP_ANONYMOUS) && !pt_owns(fd)) return MAP_FAILED;
    return mmap(addr, length, prot, flags, fd, offset);
  }
  if (fd >= 0 && !(flags & MAP_ANONYMOUS) && pts_own(fd)) return MAP_FAILED;
  void *mapped = mmap(addr, length, prot, flags, fd, offset);
  // A shared mapping of a descriptor open for writing can be made writable later
  // (mprotect), and a store through it changes the file without a call the runtime sees:
  // no process of the node caches or serves the file while this one lives.
  if (mapped != MAP_FAILED && fd >= 0 && !(flags & MAP_ANONYMOUS) && (flags & MAP_SHARED)) {
    ppios::ErrnoGuard errno_guard;
    const int access = fcntl(fd, F_GETFL);
    if ((prot & PROT_WRITE) || (access >= 0 && (access & O_ACCMODE) == O_RDWR))
      ppios::hold_for_good(fd, __builtin_return_address(0));
  }
  return mapped;
}

void *__wrap_mmap64(void *addr, size_t length, int prot, int flags, int fd, off64_t offset) {
  return __wrap_mmap(addr, length, prot, flags, fd, static_cast<off_t>(offset));
}

// A call on one of the program's descriptors, declared once below with its kind: the PT
// makes it on its own descriptors only (else it fails with EBADF, untouched); the MT's
// call on one of the runtime's descriptors fails with EBADF, as on a closed one.
#define PPIOS_WRAP_FD(ret, name, fail, params, args, fd)                               \
  ret __wrap_##name params {                                                            \
    if (!on_pt() && pts_own(fd)) return fail;                                           \
    return ppios::dispatch(                                                             \
        __builtin_return_address(0), [&]() -> ret { return pt_owns(fd) ? name args : fail; }, \
        [&]() -> ret { return name args; }, [&]() -> ret { return ppios_##name args; });  \
  }
// The same for a call that writes: one that passes straight through (a handler's, a
// forked child's) still tells the node its file changed, so other processes see it.
#define PPIOS_WRAP_FD_WRITE(ret, name, fail, params, args, fd)                          \
  ret __wrap_##name params {                                                            \
    if (!on_pt() && pts_own(fd)) return fail;                                           \
    return ppios::dispatch(                                                             \
        __builtin_return_address(0), [&]() -> ret { return pt_owns(fd) ? name args : fail; }, \
        [&]() -> ret {                                                                  \
          const ret r = name args;                                                      \
          ppios::ChangeGenerations::node().bump_file_of(fd);                            \
          return r;                                                                     \
        },                                                                              \
        [&]() -> ret { return ppios_##name args; });                                    \
  }

PPIOS_WRAP_FD(ssize_t, read, -1, (int fd, void *buf, size_t count), (fd, buf, count), fd)
PPIOS_WRAP_FD(ssize_t, pread, -1, (int fd, void *buf, size_t count, off_t offset), (fd, buf, count, offset), fd)
PPIOS_WRAP_FD(off_t, lseek, -1, (int fd, off_t offset, int whence), (fd, offset, whence), fd)
// The PT never writes: its descriptors are read-only, and the program's are not its own.
PPIOS_WRAP_FD_WRITE(ssize_t, write, -1, (int fd, const void *buf, size_t count), (fd, buf, count), fd)
PPIOS_WRAP_FD_WRITE(ssize_t, pwrite, -1, (int fd, const void *buf, size_t count, off_t offset),
                    (fd, buf, count, offset), fd)

// The 64-bit names (off64_t is off_t here) and _FORTIFY_SOURCE's checked ones: the same
// calls, after the check glibc's own makes.
ssize_t __wrap___read_chk(int fd, void *buf, size_t count, size_t buflen) {
  if (count > buflen) __chk_fail();
  return __wrap_read(fd, buf, count);
}

ssize_t __wrap_pread64(int fd, void *buf, size_t count, off64_t offset) {
  return __wrap_pread(fd, buf, count, static_cast<off_t>(offset));
}

ssize_t __wrap___pread_chk(int fd, void *buf, size_t count, off_t offset, size_t buflen) {
  if (count > buflen) __chk_fail();
  return __wrap_pread(fd, buf, count, offset);
}

ssize_t __wrap___pread64_chk(int fd, void *buf, size_t count, off64_t offset, size_t buflen) {
  if (count > buflen) __chk_fail();
  return __wrap_pread(fd, buf, count, static_cast<off_t>(offset));
}

ssize_t __wrap_pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
  return __wrap_pwrite(fd, buf, count, static_cast<off_t>(offset));
}

off64_t __wrap_lseek64(int fd, off64_t offset, int whence) {
  return __wrap_lseek(fd, static_cast<off_t>(offset), whence);
}

// ------------------------------------------------------------------ stdio

// A call on a stream, declared once below with its kind: the PT makes it on its own
// streams only (else it fails with EBADF, untouched); the MT's enters the runtime as `mt`.
#define PPIOS_WRAP_STREAM(ret, name, mt, fail, params, args, stream)                       \
  ret __wrap_##name params {                                                                \
    return ppios::dispatch(                                                                 \
        __builtin_return_address(0), [&]() -> ret { return pt_owns(stream) ? name args : fail; }, \
        [&]() -> ret { return name args; }, [&]() -> ret { return mt args; });                \
  }

PPIOS_WRAP_STREAM(size_t, fread, ppios_fread, 0, (void *ptr, size_t size, size_t nmemb, FILE *stream),
                  (ptr, size, nmemb, stream), stream)
PPIOS_WRAP_STREAM(size_t, fwrite, ppios_fwrite, 0, (const void *ptr, size_t size, size_t nmemb, FILE *stream),
                  (ptr, size, nmemb, stream), stream)
PPIOS_WRAP_STREAM(char *, fgets, ppios_fgets, nullptr, (char *s, int n, FILE *stream), (s, n, stream), stream)
PPIOS_WRAP_STREAM(char *, __fgets_chk, ppios_fgets_chk, nullptr, (char *s, size_t size, int n, FILE *stream),
                  (s, size, n, stream), stream)
PPIOS_WRAP_STREAM(ssize_t, getdelim, ppios_getdelim, -1, (char **lineptr, size_t *n, int delim, FILE *stream),
                  (lineptr, n, delim, stream), stream)
// <stdio.h>'s inline getline under _GNU_SOURCE and optimization calls this one.
PPIOS_WRAP_STREAM(ssize_t, __getdelim, ppios_getdelim, -1, (char **lineptr, size_t *n, int delim, FILE *stream),
                  (lineptr, n, delim, stream), stream)
PPIOS_WRAP_STREAM(long, ftell, ppios_ftell, -1, (FILE *stream), (stream), stream)
PPIOS_WRAP_STREAM(off_t, ftello, ppios_ftello, -1, (FILE *stream), (stream), stream)

FILE *__wrap_fopen(const char *path, const char *mode) {
  return ppios::dispatch(__builtin_return_address(0), [&] { return ppios_pt_fopen(path, mode); },
                         [&] { return fopen(path, mode); }, [&] { return ppios_fopen(path, mode); },
                         StreamOpened{mode, StreamClosed::truncating(mode)});
}

FILE *__wrap_fdopen(int fd, const char *mode) {
  if (!on_pt() && pts_own(fd)) return nullptr;
  return ppios::dispatch(__builtin_return_address(0),
                         [&]() -> FILE * { return pt_owns(fd) ? fdopen(fd, mode) : nullptr; },
                         [&] { return fdopen(fd, mode); }, [&] { return ppios_fdopen(fd, mode); },
                         StreamOpened{mode, false});
}

// The PT never reopens a stream: only its own, and ppios-cc never emits it.
FILE *__wrap_freopen(const char *path, const char *mode, FILE *stream) {
  return ppios::dispatch(__builtin_return_address(0), [&]() -> FILE * { return nullptr; },
                         [&] { return freopen(path, mode, stream); },
                         [&] { return ppios_freopen(path, mode, stream); }, StreamClosed(stream, mode));
}

int __wrap_fclose(FILE *stream) {
  return ppios::dispatch(__builtin_return_address(0), [&] { return ppios_pt_fclose(stream); },
                         [&] { return fclose(stream); }, [&] { return ppios_fclose(stream); },
                         StreamClosed(stream));
}

// An anonymous file that its stream writes ("w+"): held as any stream's. The PT opens none.
FILE *__wrap_tmpfile(void) {
  return ppios::dispatch(
      __builtin_return_address(0), [&]() -> FILE * { return (errno = EACCES, nullptr); },
      [&] { return tmpfile(); },
      [&] {
        FILE *stream = tmpfile();
        ppios::ErrnoGuard errno_guard;
        StreamHolds::get().opened(stream, "w+", false, true);
        return stream;
      },
      StreamOpened{"w+", false});
}

FILE *__wrap_tmpfile64(void) { return __wrap_tmpfile(); }

// The PT's seeks read nothing ahead (seek_stream): its stream buffers what it prefetches.
int __wrap_fseeko(FILE *stream, off_t offset, int whence) {
  return ppios::dispatch(
      __builtin_return_address(0),
      [&] { return pt_owns(stream) ? ppios::seek_stream(stream, offset, whence) : -1; },
      [&] { return fseeko(stream, offset, whence); }, [&] { return ppios_fseeko(stream, offset, whence); });
}

int __wrap_fseek(FILE *stream, long offset, int whence) {
  return ppios::dispatch(
      __builtin_return_address(0),
      [&] { return pt_owns(stream) ? ppios::seek_stream(stream, offset, whence) : -1; },
      [&] { return fseek(stream, offset, whence); }, [&] { return ppios_fseek(stream, offset, whence); });
}

void __wrap_rewind(FILE *stream) {
  ppios::dispatch(
      __builtin_return_address(0),
      [&] {
        if (pt_owns(stream) && ppios::seek_stream(stream, 0, SEEK_SET) == 0) clearerr(stream);
      },
      [&] { rewind(stream); }, [&] { ppios_rewind(stream); });
}

FILE *__wrap_fopen64(const char *path, const char *mode) { return __wrap_fopen(path, mode); }

FILE *__wrap_freopen64(const char *path, const char *mode, FILE *stream) {
  return __wrap_freopen(path, mode, stream);
}

int __wrap_fseeko64(FILE *stream, off64_t offset, int whence) {
  return __wrap_fseeko(stream, static_cast<off_t>(offset), whence);
}

off64_t __wrap_ftello64(FILE *stream) { return __wrap_ftello(stream); }

// What glibc's __fread_chk checks before reading.
size_t __wrap___fread_chk(void *ptr, size_t ptrlen, size_t size, size_t nmemb, FILE *stream) {
  size_t bytes = size * nmemb;
  if ((nmemb | size) >= (size_t{1} << (8 * sizeof(size_t) / 2)) && size != 0 && bytes / size != nmemb)
    __chk_fail();
  if (bytes > ptrlen) __chk_fail();
  return __wrap_fread(ptr, size, nmemb, stream);
}

ssize_t __wrap_getline(char **lineptr, size_t *n, FILE *stream) {
  return __wrap_getdelim(lineptr, n, '\n', stream);
}

int __wrap_fscanf(FILE *stream, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  const int r = scan_any(stream, format, ap, false, __builtin_return_address(0));
  va_end(ap);
  return r;
}

int __wrap___isoc99_fscanf(FILE *stream, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  const int r = scan_any(stream, format, ap, true, __builtin_return_address(0));
  va_end(ap);
  return r;
}

// ------------------------------------------------------------------ MPI-IO
// The PT may not call MPI: there these fail without reaching MPI.
#define PPIOS_WRAP_MPI(name, params, args)                                                      \
  int __wrap_##name params {                                                                    \
    return ppios::dispatch(__builtin_return_address(0), [&] { return int{MPI_ERR_OTHER}; },     \
                           [&] { return name args; }, [&] { return ppios_##name args; });       \
  }
// A write: where it passes straight through, its file (or, unknown, every file) changed.
#define PPIOS_WRAP_MPI_WRITE(name, params, args)                                                \
  int __wrap_##name params {                                                                    \
    return ppios::dispatch(__builtin_return_address(0), [&] { return int{MPI_ERR_OTHER}; },     \
                           [&] { return name args; }, [&] { return ppios_##name args; },        \
                           MpiWritten{fh});                                                     \
  }

PPIOS_WRAP_MPI(MPI_File_open, (MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh),
               (comm, filename, amode, info, fh))
PPIOS_WRAP_MPI(MPI_File_close, (MPI_File *fh), (fh))
PPIOS_WRAP_MPI(MPI_File_read, (MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status),
               (fh, buf, count, datatype, status))
PPIOS_WRAP_MPI(MPI_File_read_at,
               (MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Status *status),
               (fh, offset, buf, count, datatype, status))
PPIOS_WRAP_MPI(MPI_File_read_all, (MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status),
               (fh, buf, count, datatype, status))
PPIOS_WRAP_MPI(MPI_File_read_at_all,
               (MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Status *status),
               (fh, offset, buf, count, datatype, status))
PPIOS_WRAP_MPI_WRITE(MPI_File_write,
               (MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status),
               (fh, buf, count, datatype, status))
PPIOS_WRAP_MPI_WRITE(MPI_File_write_at,
               (MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype,
                MPI_Status *status),
               (fh, offset, buf, count, datatype, status))
PPIOS_WRAP_MPI_WRITE(MPI_File_write_all,
               (MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status),
               (fh, buf, count, datatype, status))
PPIOS_WRAP_MPI_WRITE(MPI_File_write_at_all,
               (MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype,
                MPI_Status *status),
               (fh, offset, buf, count, datatype, status))
PPIOS_WRAP_MPI(MPI_File_seek, (MPI_File fh, MPI_Offset offset, int whence), (fh, offset, whence))
PPIOS_WRAP_MPI(MPI_Type_commit, (MPI_Datatype *datatype), (datatype))
PPIOS_WRAP_MPI(MPI_Type_free, (MPI_Datatype *datatype), (datatype))

int __wrap_MPI_Finalize(void) {
  // The PT that reaches the program's end is done.
  return ppios::dispatch(__builtin_return_address(0), [&]() -> int { ppios_pt_exit(); },
                         [&] { return MPI_Finalize(); }, [&] { return ppios_MPI_Finalize(); });
}

// ------------------------------------------------------------------ environment
// The PT reads the environment as it was when it started (pt_getenv): the program's
// setenv may reallocate `environ` under it. The program's own calls are its own.

char *__wrap_getenv(const char *name) {
  if (on_pt()) return const_cast<char *>(ppios::pt_getenv(name));
  return getenv(name);
}

char *__wrap_secure_getenv(const char *name) {
  if (on_pt()) return const_cast<char *>(ppios::pt_getenv(name));
  return secure_getenv(name);
}

// ------------------------------------------------------------------ signal handlers
// Always through the table, also where other calls pass through, so that every program
// handler runs behind the trampoline.

int __wrap_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  return ppios::SignalTable::get().program_sigaction(sig, act, old);
}

namespace {
// static: inside extern "C" an unnamed namespace does not keep GCC from exporting the
// name, and a program's own global of that name would take its place.
static sighandler_t install_handler(int sig, sighandler_t handler, int flags, bool block_self) {
  struct sigaction act{}, old{};
  act.sa_handler = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (block_self && sig > 0 && sig < NSIG) sigaddset(&act.sa_mask, sig);
  if (__wrap_sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return (old.sa_flags & SA_SIGINFO) ? reinterpret_cast<sighandler_t>(reinterpret_cast<void (*)()>(old.sa_sigaction))
                                     : old.sa_handler;
}
}  // namespace

// signal(): BSD semantics, as glibc's: the handler stays, its own signal is blocked while
// it runs, interrupted calls restart.
sighandler_t __wrap_signal(int sig, sighandler_t handler) {
  if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  return install_handler(sig, handler, SA_RESTART, true);
}

// System V semantics: reset to the default when delivered, not blocked, no restart.
sighandler_t __wrap___sysv_signal(int sig, sighandler_t handler) {
  if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  return install_handler(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

}  // extern "C"
