// The program's calls that change a file besides write/pwrite (PosixIo.cpp), stdio
// (StdioIo.cpp) and MPI-IO (MpiIo.cpp): each is an own change of the coherence rule
// (docs/design/coherence.md, rule 1), bracketed by Coherence::begin_change/end_change so
// that the file's prefetched bytes are dropped and its generation bumped once the call
// returned. Writes go through Runtime::mt_write (they take a storage slot, as write does);
// the others only change the file's size or blocks.
//
// On the PT every one of them fails with EBADF: the PT never changes a file. Where the
// runtime may not be entered (a signal handler, a forked child), the change still bumps
// the file's generation, lock-free, for the other processes.
#include <aio.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>

#include "ChangeGenerations.h"
#include "ErrnoGuard.h"
#include "FileProbe.h"
#include "Runtime.h"
#include "ThreadState.h"
#include "WrapSupport.h"

extern "C" int __vdprintf_chk(int fd, int flag, const char *format, va_list ap);

using ppios::FileKey;
using ppios::Runtime;
using ppios::RuntimeScope;

namespace {

bool key_of_fd(int fd, FileKey *key) {
  ppios::ErrnoGuard errno_guard;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *key = ppios::key_of(st);
  return true;
}

bool key_of_path(const char *path, FileKey *key) {
  ppios::ErrnoGuard errno_guard;
  struct stat st;
  if (path == nullptr || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *key = ppios::key_of(st);
  return true;
}

// A change of the file `key` names (if any) made by `call`, which returns -1 on failure.
template <class Call>
auto change_file(bool known, const FileKey &key, const void *site, Call call) -> decltype(call()) {
  if (!known) return call();
  if (ppios::pass_through()) {
    auto result = call();
    ppios::ChangeGenerations::node().bump(key);
    return result;
  }
  RuntimeScope scope(site);
  ppios::Coherence &coherence = Runtime::get().coherence();
  coherence.begin_change(key);
  auto result = call();
  {
    ppios::ErrnoGuard errno_guard;
    coherence.end_change(key);
  }
  return result;
}

// A change through the program's descriptor `fd`.
template <class Call>
auto change_fd(int fd, const void *site, Call call) -> decltype(call()) {
  using Result = decltype(call());
  if (ppios::on_pt()) {
    errno = EBADF;
    return static_cast<Result>(-1);
  }
  if (ppios::pts_own(fd)) return static_cast<Result>(-1);
  FileKey key;
  const bool known = key_of_fd(fd, &key);
  return change_file(known, key, site, call);
}

// A change of the file at `path`; the PT never changes a file.
template <class Call>
int change_path(const char *path, const void *site, Call call) {
  if (ppios::on_pt()) {
    errno = EACCES;
    return -1;
  }
  FileKey key;
  const bool known = key_of_path(path, &key);
  return change_file(known, key, site, call);
}

// A write through the program's descriptor: like write(), through Runtime::mt_write.
ssize_t write_fd(int fd, const void *site, ppios::FunctionRef<ssize_t()> call) {
  if (ppios::on_pt()) {
    errno = EBADF;
    return -1;
  }
  if (ppios::pts_own(fd)) return -1;
  FileKey key;
  const bool known = key_of_fd(fd, &key);
  if (ppios::pass_through()) return change_file(known, key, site, call);
  RuntimeScope scope(site);
  Runtime &rt = Runtime::get();
  ppios::Reaches reaches = ppios::Reaches::Storage;
  if (!known) {
    ppios::ErrnoGuard errno_guard;
    reaches = ppios::what_reaches(fd);
  }
  return rt.mt_write(known ? &key : nullptr, -1, call, reaches);
}

// An asynchronous write of one request, or of a list's LIO_WRITE requests: each file is
// held (hold_for_good) before `call` starts the writes.
template <class Request, class Call>
int async_write_one(Request *request, const void *site, Call call);
template <class Request, class Call>
int async_write_list(Request *const *list, int count, const void *site, Call call);

}  // namespace

void ppios::hold_for_good(int fd, const void *site) {
  ppios::ErrnoGuard errno_guard;
  if (ppios::pass_through()) return ppios::ChangeGenerations::node().hold_file_of(fd);
  RuntimeScope scope(site);
  FileKey key;
  if (ppios::probe_regular_file(fd, &key)) Runtime::get().coherence().hold(key);
}

namespace {

template <class Request, class Call>
int async_write_one(Request *request, const void *site, Call call) {
  if (ppios::on_pt()) {  // the PT never writes
    errno = EBADF;
    return -1;
  }
  if (request != nullptr) ppios::hold_for_good(request->aio_fildes, site);
  return call();
}

template <class Request, class Call>
int async_write_list(Request *const *list, int count, const void *site, Call call) {
  if (ppios::on_pt()) {
    errno = EBADF;
    return -1;
  }
  for (int i = 0; list != nullptr && i < count; ++i)
    if (list[i] != nullptr && list[i]->aio_lio_opcode == LIO_WRITE) ppios::hold_for_good(list[i]->aio_fildes, site);
  return call();
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ writes

ssize_t __wrap_writev(int fd, const struct iovec *iov, int count) {
  return write_fd(fd, __builtin_return_address(0), [&] { return writev(fd, iov, count); });
}

ssize_t __wrap_pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
  return write_fd(fd, __builtin_return_address(0), [&] { return pwritev(fd, iov, count, offset); });
}

ssize_t __wrap_pwritev64(int fd, const struct iovec *iov, int count, off64_t offset) {
  return write_fd(fd, __builtin_return_address(0), [&] { return pwritev64(fd, iov, count, offset); });
}

ssize_t __wrap_pwritev2(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
  return write_fd(fd, __builtin_return_address(0), [&] { return pwritev2(fd, iov, count, offset, flags); });
}

ssize_t __wrap_pwritev64v2(int fd, const struct iovec *iov, int count, off64_t offset, int flags) {
  return write_fd(fd, __builtin_return_address(0),
                  [&] { return pwritev64v2(fd, iov, count, offset, flags); });
}

// Data copied into a file by the kernel: the output descriptor's file changes.
ssize_t __wrap_copy_file_range(int in_fd, off64_t *in_off, int out_fd, off64_t *out_off, size_t length,
                               unsigned flags) {
  if (!ppios::on_pt() && ppios::pts_own(in_fd)) return -1;
  return write_fd(out_fd, __builtin_return_address(0),
                  [&] { return copy_file_range(in_fd, in_off, out_fd, out_off, length, flags); });
}

ssize_t __wrap_sendfile(int out_fd, int in_fd, off_t *offset, size_t count) {
  if (!ppios::on_pt() && ppios::pts_own(in_fd)) return -1;
  return write_fd(out_fd, __builtin_return_address(0), [&] { return sendfile(out_fd, in_fd, offset, count); });
}

ssize_t __wrap_sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count) {
  if (!ppios::on_pt() && ppios::pts_own(in_fd)) return -1;
  return write_fd(out_fd, __builtin_return_address(0),
                  [&] { return sendfile64(out_fd, in_fd, offset, count); });
}

ssize_t __wrap_splice(int in_fd, off64_t *in_off, int out_fd, off64_t *out_off, size_t length,
                      unsigned flags) {
  if (!ppios::on_pt() && ppios::pts_own(in_fd)) return -1;
  return write_fd(out_fd, __builtin_return_address(0),
                  [&] { return splice(in_fd, in_off, out_fd, out_off, length, flags); });
}

// dprintf builds a stream on the descriptor for the call, writes through it and flushes
// it before it returns: a write of the descriptor (its stream holds nothing after it).
int __wrap_vdprintf(int fd, const char *format, va_list ap) {
  return static_cast<int>(write_fd(fd, __builtin_return_address(0), [&] { return vdprintf(fd, format, ap); }));
}

int __wrap_dprintf(int fd, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  const int r = static_cast<int>(write_fd(fd, __builtin_return_address(0), [&] { return vdprintf(fd, format, ap); }));
  va_end(ap);
  return r;
}

// _FORTIFY_SOURCE's names of the same calls.
int __wrap___vdprintf_chk(int fd, int flag, const char *format, va_list ap) {
  return static_cast<int>(
      write_fd(fd, __builtin_return_address(0), [&] { return __vdprintf_chk(fd, flag, format, ap); }));
}

int __wrap___dprintf_chk(int fd, int flag, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  const int r = static_cast<int>(
      write_fd(fd, __builtin_return_address(0), [&] { return __vdprintf_chk(fd, flag, format, ap); }));
  va_end(ap);
  return r;
}

// ------------------------------------------------------------------ size and blocks

int __wrap_ftruncate(int fd, off_t length) {
  return change_fd(fd, __builtin_return_address(0), [&] { return ftruncate(fd, length); });
}

int __wrap_ftruncate64(int fd, off64_t length) {
  return change_fd(fd, __builtin_return_address(0), [&] { return ftruncate64(fd, length); });
}

int __wrap_fallocate(int fd, int mode, off_t offset, off_t length) {
  return change_fd(fd, __builtin_return_address(0), [&] { return fallocate(fd, mode, offset, length); });
}

int __wrap_fallocate64(int fd, int mode, off64_t offset, off64_t length) {
  return change_fd(fd, __builtin_return_address(0), [&] { return fallocate64(fd, mode, offset, length); });
}

// posix_fallocate returns an error number instead of -1.
int __wrap_posix_fallocate(int fd, off_t offset, off_t length) {
  if (ppios::on_pt() || ppios::pts_own(fd)) return EBADF;
  return change_fd(fd, __builtin_return_address(0), [&] { return posix_fallocate(fd, offset, length); });
}

int __wrap_posix_fallocate64(int fd, off64_t offset, off64_t length) {
  if (ppios::on_pt() || ppios::pts_own(fd)) return EBADF;
  return change_fd(fd, __builtin_return_address(0), [&] { return posix_fallocate64(fd, offset, length); });
}

int __wrap_truncate(const char *path, off_t length) {
  return change_path(path, __builtin_return_address(0), [&] { return truncate(path, length); });
}

int __wrap_truncate64(const char *path, off64_t length) {
  return change_path(path, __builtin_return_address(0), [&] { return truncate64(path, length); });
}

// ------------------------------------------------------------------ asynchronous writes
// An asynchronous write changes its file at moments only the kernel knows, until the
// program learns it completed: the file is held for the rest of the process, as a shared
// writable mapping is. The PT never writes.

int __wrap_aio_write(struct aiocb *request) {
  return async_write_one(request, __builtin_return_address(0), [&] { return aio_write(request); });
}

int __wrap_aio_write64(struct aiocb64 *request) {
  return async_write_one(request, __builtin_return_address(0), [&] { return aio_write64(request); });
}

int __wrap_lio_listio(int mode, struct aiocb *const list[], int count, struct sigevent *notify) {
  return async_write_list(list, count, __builtin_return_address(0),
                          [&] { return lio_listio(mode, list, count, notify); });
}

int __wrap_lio_listio64(int mode, struct aiocb64 *const list[], int count, struct sigevent *notify) {
  return async_write_list(list, count, __builtin_return_address(0),
                          [&] { return lio_listio64(mode, list, count, notify); });
}

}  // extern "C"
