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

#include "ChangeGenerations.h"
#include "ErrnoGuard.h"
#include "FileProbe.h"
#include "GlibcStream.h"
#include "PtThread.h"
#include "Runtime.h"
#include "Signals.h"
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

namespace {


int open_any(const char *path, int flags, mode_t mode) {
  if (on_pt()) return ppios_pt_open(path, flags);
  if (ppios::pass_through()) return open(path, flags, mode);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_open(path, flags, mode);
}

// openat() relative to a directory descriptor: the PT opens only what open() would (an
// absolute path, or one relative to the working directory).
int openat_any(int dirfd, const char *path, int flags, mode_t mode) {
  if (on_pt()) {
    if (dirfd == AT_FDCWD || (path != nullptr && path[0] == '/')) return ppios_pt_open(path, flags);
    errno = EBADF;
    return -1;
  }
  if (dirfd != AT_FDCWD && pts_own(dirfd)) return -1;
  if (ppios::pass_through()) return openat(dirfd, path, flags, mode);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_openat(dirfd, path, flags, mode);
}

// What _FORTIFY_SOURCE's __open_2 checks: creating a file needs a mode.
void check_open_2(int flags) {
  if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) __chk_fail();
}

// A regular file mapped shared, writable or from a descriptor open for writing: its bytes
// change with every store through the mapping, which the runtime never sees, so the cache
// never serves it again (the hold is never released; PT prefetches of it are refused too,
// and other processes see it changed at each release point).
void hold_mapped_file(int fd) {
  ppios::ErrnoGuard errno_guard;
  ppios::Runtime &rt = ppios::Runtime::get();
  ppios::FileKey key;
  if (ppios::probe_regular_file(fd, &key)) rt.coherence().hold(key);
}

// fscanf and glibc's ISO C99 one (__isoc99_fscanf, what <stdio.h> names fscanf unless
// _GNU_SOURCE is defined) differ only in the vfscanf that does the work.
int scan_any(FILE *stream, const char *format, va_list ap, bool c99, const void *site) {
  if (on_pt() || ppios::pass_through()) {
    if (on_pt() && !pt_owns(stream)) return EOF;
    return c99 ? __isoc99_vfscanf(stream, format, ap) : vfscanf(stream, format, ap);
  }
  RuntimeScope scope(site);
  return ppios_vfscanf(stream, format, ap, c99 ? 1 : 0);
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ POSIX

int __wrap_open(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return open_any(path, flags, mode);
}

int __wrap_open64(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return open_any(path, flags, mode);
}

int __wrap___open_2(const char *path, int flags) {
  check_open_2(flags);
  return open_any(path, flags, 0);
}

int __wrap___open64_2(const char *path, int flags) {
  check_open_2(flags);
  return open_any(path, flags, 0);
}

int __wrap_openat(int dirfd, const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return openat_any(dirfd, path, flags, mode);
}

int __wrap_openat64(int dirfd, const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return openat_any(dirfd, path, flags, mode);
}

int __wrap___openat_2(int dirfd, const char *path, int flags) {
  check_open_2(flags);
  return openat_any(dirfd, path, flags, 0);
}

int __wrap___openat64_2(int dirfd, const char *path, int flags) {
  check_open_2(flags);
  return openat_any(dirfd, path, flags, 0);
}

// creat() is open() with O_CREAT | O_WRONLY | O_TRUNC: a truncation, an own change.
int __wrap_creat(const char *path, mode_t mode) { return open_any(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int __wrap_creat64(const char *path, mode_t mode) { return open_any(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

int __wrap_close(int fd) {
  if (on_pt()) return ppios_pt_close(fd);
  if (pts_own(fd)) return -1;
  if (ppios::pass_through()) return close(fd);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_close(fd);
}

void *__wrap_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if (on_pt()) {
    if (fd >= 0 && !(flags & MAP_ANONYMOUS) && !pt_owns(fd)) return MAP_FAILED;
    return mmap(addr, length, prot, flags, fd, offset);
  }
  if (fd >= 0 && !(flags & MAP_ANONYMOUS) && pts_own(fd)) return MAP_FAILED;
  void *mapped = mmap(addr, length, prot, flags, fd, offset);
  // A shared mapping of a descriptor open for writing can be made writable later
  // (mprotect), and a store through it changes the file without a call the runtime sees.
  if (mapped != MAP_FAILED && fd >= 0 && !(flags & MAP_ANONYMOUS) && (flags & MAP_SHARED) &&
      !ppios::pass_through()) {
    const int access = fcntl(fd, F_GETFL);
    if ((prot & PROT_WRITE) || (access >= 0 && (access & O_ACCMODE) == O_RDWR)) {
      RuntimeScope scope(__builtin_return_address(0));
      hold_mapped_file(fd);
    }
  }
  return mapped;
}

void *__wrap_mmap64(void *addr, size_t length, int prot, int flags, int fd, off64_t offset) {
  return __wrap_mmap(addr, length, prot, flags, fd, static_cast<off_t>(offset));
}

ssize_t __wrap_read(int fd, void *buf, size_t count) {
  if (on_pt()) return pt_owns(fd) ? read(fd, buf, count) : -1;
  if (pts_own(fd)) return -1;
  if (ppios::pass_through()) return read(fd, buf, count);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_read(fd, buf, count);
}

ssize_t __wrap___read_chk(int fd, void *buf, size_t count, size_t buflen) {
  if (count > buflen) __chk_fail();
  return __wrap_read(fd, buf, count);
}

ssize_t __wrap_pread(int fd, void *buf, size_t count, off_t offset) {
  if (on_pt()) return pt_owns(fd) ? pread(fd, buf, count, offset) : -1;
  if (pts_own(fd)) return -1;
  if (ppios::pass_through()) return pread(fd, buf, count, offset);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_pread(fd, buf, count, offset);
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

// The PT never writes: its descriptors are read-only, and the program's are not its own.
ssize_t __wrap_write(int fd, const void *buf, size_t count) {
  if (on_pt()) return pt_owns(fd) ? write(fd, buf, count) : -1;
  if (pts_own(fd)) return -1;
  if (ppios::pass_through()) {  // a handler's or a forked child's write: others see it
    ssize_t r = write(fd, buf, count);
    ppios::ChangeGenerations::node().bump_file_of(fd);
    return r;
  }
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_write(fd, buf, count);
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t count, off_t offset) {
  if (on_pt()) return pt_owns(fd) ? pwrite(fd, buf, count, offset) : -1;
  if (pts_own(fd)) return -1;
  if (ppios::pass_through()) {
    ssize_t r = pwrite(fd, buf, count, offset);
    ppios::ChangeGenerations::node().bump_file_of(fd);
    return r;
  }
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_pwrite(fd, buf, count, offset);
}

ssize_t __wrap_pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
  return __wrap_pwrite(fd, buf, count, static_cast<off_t>(offset));
}

off_t __wrap_lseek(int fd, off_t offset, int whence) {
  if (on_pt()) return pt_owns(fd) ? lseek(fd, offset, whence) : -1;
  if (pts_own(fd)) return -1;
  if (ppios::pass_through()) return lseek(fd, offset, whence);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_lseek(fd, offset, whence);
}

off64_t __wrap_lseek64(int fd, off64_t offset, int whence) {
  return __wrap_lseek(fd, static_cast<off_t>(offset), whence);
}

// ------------------------------------------------------------------ stdio

FILE *__wrap_fopen(const char *path, const char *mode) {
  if (on_pt()) return ppios_pt_fopen(path, mode);
  if (ppios::pass_through()) return fopen(path, mode);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fopen(path, mode);
}

FILE *__wrap_fopen64(const char *path, const char *mode) { return __wrap_fopen(path, mode); }

FILE *__wrap_fdopen(int fd, const char *mode) {
  if (on_pt()) return pt_owns(fd) ? fdopen(fd, mode) : nullptr;
  if (pts_own(fd)) return nullptr;
  if (ppios::pass_through()) return fdopen(fd, mode);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fdopen(fd, mode);
}

// The PT never reopens a stream: only its own, and ppios-cc never emits it.
FILE *__wrap_freopen(const char *path, const char *mode, FILE *stream) {
  if (on_pt()) return nullptr;
  if (ppios::pass_through()) return freopen(path, mode, stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_freopen(path, mode, stream);
}

FILE *__wrap_freopen64(const char *path, const char *mode, FILE *stream) {
  return __wrap_freopen(path, mode, stream);
}

int __wrap_fclose(FILE *stream) {
  if (on_pt()) return ppios_pt_fclose(stream);
  if (ppios::pass_through()) return fclose(stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fclose(stream);
}

size_t __wrap_fread(void *ptr, size_t size, size_t nmemb, FILE *stream) {
  if (on_pt()) return pt_owns(stream) ? fread(ptr, size, nmemb, stream) : 0;
  if (ppios::pass_through()) return fread(ptr, size, nmemb, stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fread(ptr, size, nmemb, stream);
}

// What glibc's __fread_chk checks before reading.
size_t __wrap___fread_chk(void *ptr, size_t ptrlen, size_t size, size_t nmemb, FILE *stream) {
  size_t bytes = size * nmemb;
  if ((nmemb | size) >= (size_t{1} << (8 * sizeof(size_t) / 2)) && size != 0 && bytes / size != nmemb)
    __chk_fail();
  if (bytes > ptrlen) __chk_fail();
  return __wrap_fread(ptr, size, nmemb, stream);
}

char *__wrap_fgets(char *s, int n, FILE *stream) {
  if (on_pt()) return pt_owns(stream) ? fgets(s, n, stream) : nullptr;
  if (ppios::pass_through()) return fgets(s, n, stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fgets(s, n, stream);
}

char *__wrap___fgets_chk(char *s, size_t size, int n, FILE *stream) {
  if (on_pt()) return pt_owns(stream) ? __fgets_chk(s, size, n, stream) : nullptr;
  if (ppios::pass_through()) return __fgets_chk(s, size, n, stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fgets_chk(s, size, n, stream);
}

ssize_t __wrap_getdelim(char **lineptr, size_t *n, int delim, FILE *stream) {
  if (on_pt()) return pt_owns(stream) ? getdelim(lineptr, n, delim, stream) : -1;
  if (ppios::pass_through()) return getdelim(lineptr, n, delim, stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_getdelim(lineptr, n, delim, stream);
}

// <stdio.h>'s inline getline under _GNU_SOURCE and optimization calls this one.
ssize_t __wrap___getdelim(char **lineptr, size_t *n, int delim, FILE *stream) {
  if (on_pt()) return pt_owns(stream) ? __getdelim(lineptr, n, delim, stream) : -1;
  if (ppios::pass_through()) return __getdelim(lineptr, n, delim, stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_getdelim(lineptr, n, delim, stream);
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

size_t __wrap_fwrite(const void *ptr, size_t size, size_t nmemb, FILE *stream) {
  if (on_pt()) return pt_owns(stream) ? fwrite(ptr, size, nmemb, stream) : 0;
  if (ppios::pass_through()) return fwrite(ptr, size, nmemb, stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fwrite(ptr, size, nmemb, stream);
}

int __wrap_fseek(FILE *stream, long offset, int whence) {
  if (on_pt()) return pt_owns(stream) ? ppios::seek_stream(stream, offset, whence) : -1;
  if (ppios::pass_through()) return fseek(stream, offset, whence);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fseek(stream, offset, whence);
}

int __wrap_fseeko(FILE *stream, off_t offset, int whence) {
  if (on_pt()) return pt_owns(stream) ? ppios::seek_stream(stream, offset, whence) : -1;
  if (ppios::pass_through()) return fseeko(stream, offset, whence);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_fseeko(stream, offset, whence);
}

int __wrap_fseeko64(FILE *stream, off64_t offset, int whence) {
  return __wrap_fseeko(stream, static_cast<off_t>(offset), whence);
}

long __wrap_ftell(FILE *stream) {
  if (on_pt()) return pt_owns(stream) ? ftell(stream) : -1;
  if (ppios::pass_through()) return ftell(stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_ftell(stream);
}

off_t __wrap_ftello(FILE *stream) {
  if (on_pt()) return pt_owns(stream) ? ftello(stream) : -1;
  if (ppios::pass_through()) return ftello(stream);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_ftello(stream);
}

off64_t __wrap_ftello64(FILE *stream) { return __wrap_ftello(stream); }

void __wrap_rewind(FILE *stream) {
  if (on_pt()) {
    if (pt_owns(stream) && ppios::seek_stream(stream, 0, SEEK_SET) == 0) clearerr(stream);
    return;
  }
  if (ppios::pass_through()) return rewind(stream);
  RuntimeScope scope(__builtin_return_address(0));
  ppios_rewind(stream);
}

// ------------------------------------------------------------------ MPI-IO
// The PT may not call MPI: there these fail without reaching MPI.

int __wrap_MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info,
                         MPI_File *fh) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_open(comm, filename, amode, info, fh);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_open(comm, filename, amode, info, fh);
}

int __wrap_MPI_File_close(MPI_File *fh) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_close(fh);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_close(fh);
}

int __wrap_MPI_File_read(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                         MPI_Status *status) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_read(fh, buf, count, datatype, status);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_read(fh, buf, count, datatype, status);
}

int __wrap_MPI_File_read_at(MPI_File fh, MPI_Offset offset, void *buf, int count,
                            MPI_Datatype datatype, MPI_Status *status) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_read_at(fh, offset, buf, count, datatype, status);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_read_at(fh, offset, buf, count, datatype, status);
}

int __wrap_MPI_File_read_all(MPI_File fh, void *buf, int count, MPI_Datatype datatype,
                             MPI_Status *status) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_read_all(fh, buf, count, datatype, status);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_read_all(fh, buf, count, datatype, status);
}

int __wrap_MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count,
                                MPI_Datatype datatype, MPI_Status *status) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_read_at_all(fh, offset, buf, count, datatype, status);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_read_at_all(fh, offset, buf, count, datatype, status);
}

int __wrap_MPI_File_write_all(MPI_File fh, const void *buf, int count, MPI_Datatype datatype,
                              MPI_Status *status) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_write_all(fh, buf, count, datatype, status);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_write_all(fh, buf, count, datatype, status);
}

int __wrap_MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count,
                                 MPI_Datatype datatype, MPI_Status *status) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_write_at_all(fh, offset, buf, count, datatype, status);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_write_at_all(fh, offset, buf, count, datatype, status);
}

int __wrap_MPI_File_write(MPI_File fh, const void *buf, int count, MPI_Datatype datatype,
                          MPI_Status *status) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_write(fh, buf, count, datatype, status);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_write(fh, buf, count, datatype, status);
}

int __wrap_MPI_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count,
                             MPI_Datatype datatype, MPI_Status *status) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_write_at(fh, offset, buf, count, datatype, status);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_write_at(fh, offset, buf, count, datatype, status);
}

int __wrap_MPI_File_seek(MPI_File fh, MPI_Offset offset, int whence) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_File_seek(fh, offset, whence);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_File_seek(fh, offset, whence);
}

int __wrap_MPI_Type_commit(MPI_Datatype *datatype) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_Type_commit(datatype);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_Type_commit(datatype);
}

int __wrap_MPI_Type_free(MPI_Datatype *datatype) {
  if (on_pt()) return MPI_ERR_OTHER;
  if (ppios::pass_through()) return MPI_Type_free(datatype);
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_Type_free(datatype);
}

int __wrap_MPI_Finalize(void) {
  if (on_pt()) ppios_pt_exit();  // the PT reached the program's end: it is done
  if (ppios::pass_through()) return MPI_Finalize();
  RuntimeScope scope(__builtin_return_address(0));
  return ppios_MPI_Finalize();
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
