// MT-side POSIX calls (ppios_read, ...) and the PT-side POSIX prefetch calls.
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>

#include "ErrnoGuard.h"
#include "FileProbe.h"
#include "PtBlocks.h"
#include "PtThread.h"
#include "ThreadState.h"
#include "Runtime.h"
#include "SyncPoints.h"
#include "ppios/ppios.h"

using ppios::CachedFile;
using ppios::FileKey;
using ppios::FileStamp;
using ppios::MtStorageAccess;
using ppios::PtResources;
using ppios::Runtime;
using ppios::RuntimeScope;

namespace {

// Linux moves at most this many bytes in one read() or pread() (MAX_RW_COUNT: INT_MAX
// rounded down to a page), whatever the count asked: a read the cache serves returns no
// more than the kernel would.
constexpr size_t kMaxReadCount = 0x7ffff000;

// The block the PT fetched last per descriptor of its own (PtBlocks.h).
thread_local ppios::HeldBlocks<int> t_pt_fd_blocks;

// Whether another open descriptor of this process shares `fd`'s open file description
// (dup, dup2, fcntl F_DUPFD, or a pair inherited so). Linux's kcmp says so exactly; where
// it is not available (seccomp, an old kernel) the answer is no, as if each were opened
// on its own. Called at a PT's start and at handoffs only: it looks at every descriptor.
bool shares_description(int fd) {
  DIR *dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  const pid_t pid = getpid();
  const int listing = dirfd(dir);
  bool shared = false;
  while (struct dirent *entry = readdir(dir)) {
    char *end = nullptr;
    long other = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || other == fd || other == listing) continue;
    if (syscall(SYS_kcmp, pid, pid, KCMP_FILE, fd, static_cast<int>(other)) == 0) {
      shared = true;
      break;
    }
  }
  closedir(dir);
  return shared;
}


ssize_t write_at(Runtime &rt, int fd, off_t offset, ppios::FunctionRef<ssize_t()> do_write) {
  FileKey key;
  bool regular;
  ppios::Reaches reaches = ppios::Reaches::Storage;
  {
    ppios::ErrnoGuard errno_guard;
    regular = ppios::probe_regular_file(fd, &key);
    if (!regular) reaches = ppios::what_reaches(fd);
  }
  return rt.mt_write(regular ? &key : nullptr, offset, do_write, reaches);
}


}  // namespace

void ppios::pt_disown_fd(int fd) {
  PtResources::get().disown_fd(fd);
  t_pt_fd_blocks.forget(fd);
}

extern "C" {

// An open that truncates is an own change of the file; the file is known only after it.
static int opened_fd(int fd, int flags) {
  if (fd >= 0 && (flags & O_TRUNC)) {
    ppios::ErrnoGuard errno_guard;
    FileKey key;
    if (ppios::probe_regular_file(fd, &key)) Runtime::get().coherence().changed(key);
  }
  return fd;
}

int ppios_open(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  mode_t mode = ppios::open_mode(flags, args);
  va_end(args);
  return opened_fd(open(path, flags, mode), flags);
}

int ppios_openat(int dirfd, const char *path, int flags, mode_t mode) {
  return opened_fd(openat(dirfd, path, flags, mode), flags);
}

void ppios_mt_handoff_fd(unsigned slot, int mt_fd) {
  Runtime &runtime = Runtime::get();
  if (runtime.pt_running()) runtime.handoff_post(slot, ppios_pt_reopen_fd(mt_fd));
}

int ppios_pt_take_fd(unsigned slot) {
  ppios::pt_checkpoint();
  intptr_t handle = -1;
  if (!Runtime::get().handoff_take(slot, &handle)) ppios::pt_checkpoint();  // stopping
  return static_cast<int>(handle);
}

// The program's close of a file releases its record locks on it: the runtime's descriptors
// kept open for them may close now (PtResources::program_closed).
int ppios_close(int fd) {
  PtResources &resources = PtResources::get();
  FileKey key;
  bool locked = false;
  if (resources.program_may_hold_locks()) {
    ppios::ErrnoGuard errno_guard;
    struct stat st;
    locked = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    key = ppios::key_of(st);
    // The close may release the program's record locks: another process may take one
    // next and read what this one changed.
    if (locked) ppios::release_point(nullptr);
  }
  int r = close(fd);
  if (locked) resources.program_closed(key);
  return r;
}

off_t ppios_lseek(int fd, off_t offset, int whence) { return lseek(fd, offset, whence); }

ssize_t ppios_pread(int fd, void *buf, size_t count, off_t offset) {
  Runtime &rt = Runtime::get();
  count = std::min(count, kMaxReadCount);
  if (rt.plain_reads()) {
    const ssize_t r = pread(fd, buf, count, offset);
    ppios::ErrnoGuard errno_guard;
    rt.count_plain_read(r);
    return r;
  }
  CachedFile file;
  bool cacheable = false;
  ppios::Reaches reaches;
  {
    ppios::ErrnoGuard errno_guard;
    ppios::DescriptorProbe probe(fd);
    reaches = probe.reaches();
    cacheable = rt.may_serve() && offset >= 0 && probe.readable_file(&file);
  }
  char *out = static_cast<char *>(buf);
  return rt.mt_read(cacheable ? &file : nullptr, offset, count, out,
                    [&](size_t h, MtStorageAccess &storage) -> ssize_t {
                      if (h > 0 && h == count) return static_cast<ssize_t>(count);
                      storage.reaches(reaches);
                      storage.acquire();
                      ssize_t r = pread(fd, out + h, count - h, offset + static_cast<off_t>(h));
                      if (r >= 0) return r + static_cast<ssize_t>(h);
                      // Let the original call, as a whole, report what went wrong.
                      return h > 0 ? pread(fd, buf, count, offset) : r;
                    });
}

ssize_t ppios_read(int fd, void *buf, size_t count) {
  Runtime &rt = Runtime::get();
  count = std::min(count, kMaxReadCount);
  if (rt.plain_reads()) {
    const ssize_t r = read(fd, buf, count);
    ppios::ErrnoGuard errno_guard;
    rt.count_plain_read(r);
    return r;
  }
  CachedFile file;
  off_t offset = -1;
  bool cacheable = false;
  ppios::Reaches reaches;  // a pipe or tty may block for a long time
  {
    ppios::ErrnoGuard errno_guard;
    ppios::DescriptorProbe probe(fd);
    reaches = probe.reaches();
    if (rt.may_serve() && probe.readable_file(&file)) {
      offset = lseek(fd, 0, SEEK_CUR);
      cacheable = offset >= 0;
    }
  }
  char *out = static_cast<char *>(buf);
  return rt.mt_read(cacheable ? &file : nullptr, offset, count, out,
                    [&](size_t h, MtStorageAccess &storage) -> ssize_t {
                      if (h > 0 && h == count) {  // served whole: move the offset as read() would
                        lseek(fd, offset + static_cast<off_t>(count), SEEK_SET);
                        return static_cast<ssize_t>(count);
                      }
                      storage.reaches(reaches);
                      storage.acquire();
                      if (h > 0) lseek(fd, offset + static_cast<off_t>(h), SEEK_SET);
                      ssize_t r = read(fd, out + h, count - h);
                      if (r >= 0) return r + static_cast<ssize_t>(h);
                      if (h == 0) return r;
                      lseek(fd, offset, SEEK_SET);
                      return read(fd, buf, count);
                    });
}

ssize_t ppios_pwrite(int fd, const void *buf, size_t count, off_t offset) {
  Runtime &rt = Runtime::get();
  return write_at(rt, fd, offset, [&] { return pwrite(fd, buf, count, offset); });
}

ssize_t ppios_write(int fd, const void *buf, size_t count) {
  Runtime &rt = Runtime::get();
  off_t offset = -1;  // appends, and descriptors without an offset
  if (rt.trace().enabled()) {
    ppios::ErrnoGuard errno_guard;
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0 && !(flags & O_APPEND)) offset = lseek(fd, 0, SEEK_CUR);
  }
  return write_at(rt, fd, offset, [&] { return write(fd, buf, count); });
}

// ------------------------------------------------------------------ PT side

int ppios_pt_open(const char *path, int /*flags*/, ...) {
  ppios::pt_checkpoint();
  RuntimeScope scope;
  return PtResources::get().open_regular(path);
}

int ppios_pt_close(int fd) {
  ppios::pt_checkpoint();
  if (!ppios::pt_owns(fd)) return -1;
  if (PtResources::get().backs_stream(fd)) {  // the stream's fclose closes it
    errno = EBADF;
    return -1;
  }
  ppios::pt_disown_fd(fd);
  PtResources::get().close_runtime_fd(fd);
  return 0;
}

// A new open file description of the same file (its own offset), through /proc, so that
// it works whatever path or helper opened the MT's descriptor. Only regular files: a
// second reader of a pipe or socket would take the MT's data. Nor a descriptor that
// shares its description with another (dup): reads through either move both offsets,
// which the PT's independent copies would not.
int ppios_pt_reopen_fd(int mt_fd) {
  if (!Runtime::get().caching()) return -1;  // mode off: no PT will take it
  ppios::ErrnoGuard errno_guard;  // the MT's start block and handoffs leave errno alone
  struct stat st;
  if (mt_fd < 0 || fstat(mt_fd, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  if (shares_description(mt_fd)) return -1;
  off_t position = lseek(mt_fd, 0, SEEK_CUR);
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", mt_fd);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  struct stat reopened;
  if (fd >= 0 && (fstat(fd, &reopened) != 0 || !S_ISREG(reopened.st_mode) ||
                  reopened.st_dev != st.st_dev || reopened.st_ino != st.st_ino ||
                  (position > 0 && lseek(fd, position, SEEK_SET) < 0))) {
    PtResources::get().close_runtime_fd(fd);
    fd = -1;
  }
  if (fd >= 0) {
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    fd = PtResources::get().adopt_fd(fd);
  }
  return fd;
}

ssize_t ppios_prefetch_pread(int fd, size_t count, off_t offset, ppios_seq_t seq, unsigned flags,
                             const char *site) {
  ppios::pt_checkpoint();
  if (!ppios::pt_owns(fd)) return -1;
  if (offset < 0) return -1;
  RuntimeScope scope;
  ppios::t_thread.pt_site = site;
  return ppios::prefetch_by_block(t_pt_fd_blocks, fd, fd, offset, count, seq, flags);
}

ssize_t ppios_prefetch_read(int fd, size_t count, ppios_seq_t seq, unsigned flags,
                            const char *site) {
  ppios::pt_checkpoint();
  if (!ppios::pt_owns(fd)) return -1;
  off_t offset = lseek(fd, 0, SEEK_CUR);
  if (offset < 0) return -1;
  ssize_t predicted = ppios_prefetch_pread(fd, count, offset, seq, flags, site);
  if (predicted > 0) lseek(fd, offset + predicted, SEEK_SET);
  return predicted;
}

ssize_t ppios_prefetch_pread_copy(int fd, void *buf, size_t count, off_t offset,
                                  ppios_seq_t seq, unsigned flags, const char *site) {
  ppios::pt_checkpoint();
  if (!ppios::pt_owns(fd)) return -1;
  if (offset < 0) {
    errno = EINVAL;
    return -1;
  }
  // A bad buffer must fault here, in the slice's name, not inside the runtime: only the
  // bytes the read will deliver are touched.
  struct stat st;
  size_t expected = count;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    expected = offset >= st.st_size ? 0 : std::min<size_t>(count, static_cast<size_t>(st.st_size - offset));
  ppios::pt_check_room(buf, count);
  ppios::pt_probe_buffer(buf, expected);
  bool stopped = false;
  ssize_t n;
  {
    RuntimeScope scope;
    ppios::t_thread.pt_site = site;
    n = Runtime::get().prefetch_copy(fd, offset, count, seq, flags, static_cast<char *>(buf), &stopped);
  }
  if (stopped) ppios::pt_checkpoint();
  return n;
}

ssize_t ppios_prefetch_read_copy(int fd, void *buf, size_t count, ppios_seq_t seq,
                                 unsigned flags, const char *site) {
  ppios::pt_checkpoint();
  if (!ppios::pt_owns(fd)) return -1;
  off_t offset = lseek(fd, 0, SEEK_CUR);
  if (offset < 0) {  // no offset (a pipe?): what read does
    ppios::pt_check_room(buf, count);
    return read(fd, buf, count);
  }
  ssize_t n = ppios_prefetch_pread_copy(fd, buf, count, offset, seq, flags, site);
  if (n > 0) lseek(fd, offset + n, SEEK_SET);
  return n;
}

}  // extern "C"
