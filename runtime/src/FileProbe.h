// Decides whether the bytes behind a descriptor may come from (or be fetched into) the
// prefetch cache: only regular files, opened for reading, without O_DIRECT (whose
// alignment errors the cache would hide). A file identified here is named in the trace.
#pragma once

#include <fcntl.h>
#include <cstdarg>
#include <sys/stat.h>

#include "Runtime.h"

namespace ppios {

// One fstat of a descriptor, and what follows from it: what its I/O reaches, and whether
// it is a readable file whose bytes the cache may hold (one fcntl more, only then).
class DescriptorProbe {
 public:
  explicit DescriptorProbe(int fd) : fd_(fd), known_(fstat(fd, &st_) == 0) {}

  // What I/O on it reaches (Runtime.h: Reaches). An unknown descriptor counts as storage:
  // its call fails at once anyway.
  Reaches reaches() const {
    if (!known_) return Reaches::Storage;
    if (S_ISREG(st_.st_mode) || S_ISBLK(st_.st_mode) || S_ISDIR(st_.st_mode)) return Reaches::Storage;
    if (S_ISFIFO(st_.st_mode) || S_ISSOCK(st_.st_mode)) return Reaches::Messages;
    return Reaches::Other;
  }

  bool readable_file(CachedFile *out, blksize_t *block_size = nullptr) const {
    if (!known_ || !S_ISREG(st_.st_mode)) return false;
    int flags = fcntl(fd_, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_WRONLY || (flags & O_DIRECT)) return false;
    out->key = key_of(st_);
    out->stamp = stamp_of(st_);
    if (block_size) *block_size = st_.st_blksize;
    Runtime::get().trace().name_file(out->key, fd_);
    return true;
  }

 private:
  int fd_;
  struct stat st_;
  bool known_;
};

inline bool probe_readable_file(int fd, CachedFile *out, blksize_t *block_size = nullptr) {
  return DescriptorProbe(fd).readable_file(out, block_size);
}

inline bool probe_regular_file(int fd, FileKey *key, FileStamp *stamp = nullptr) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *key = key_of(st);
  if (stamp) *stamp = stamp_of(st);
  Runtime::get().trace().name_file(*key, fd);
  return true;
}

// The mode argument of open(), which exists only when the flags create a file.
inline mode_t open_mode(int flags, va_list args) {
  if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
    return static_cast<mode_t>(va_arg(args, int));
  return 0;
}

inline Reaches what_reaches(int fd) { return DescriptorProbe(fd).reaches(); }

}  // namespace ppios
