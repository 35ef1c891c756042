// The PT fetches small reads by the block, and each block once.
//
// A read smaller than a stream buffer (glibc's, stream_buffer_bytes) is fetched as the
// whole buffer-sized block around it: for a stdio stream that is exactly what the stream
// itself reads from the file; for a POSIX read() it is what the kernel reads anyway (its
// pages, and more with read-ahead). The PT then remembers, per handle, the block it
// fetched last, and a read that falls inside it fetches nothing more and asks the file
// nothing (no fstat: on a network file system each one is a round trip). A program that
// reads 10-byte records with read() then costs the PT one fetch per block, not one per
// record, and the device no more requests than without prefetching.
//
// Lifecycle: only the PT thread uses these (thread_local tables in the I/O files). A
// handle's block is forgotten when the PT closes the handle (its number or address may
// name another file next); the tables end with the PT thread.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <map>

#include "GlibcStream.h"
#include "Runtime.h"
#include "ppios/ppios.h"

namespace ppios {

struct FetchBlock {
  off_t begin = 0;
  off_t end = 0;
};

// The bytes to fetch for a read of `length` bytes at `offset` of a file like `st`: the
// buffer-sized block around it, or the bytes themselves when the read is as large as a
// buffer or straddles two blocks.
inline FetchBlock fetch_block(off_t offset, size_t length, const struct stat &st) {
  const off_t block = stream_buffer_bytes(st.st_blksize);
  const off_t end = offset + static_cast<off_t>(length);
  if (static_cast<off_t>(length) >= block) return {offset, end};
  const off_t begin = offset - offset % block;
  const off_t block_end = std::min<off_t>(begin + block, st.st_size);
  if (end > block_end) return {offset, end};
  return {begin, block_end};
}

// The block the PT fetched last, per handle (a FILE *, or a descriptor).
template <typename Handle>
class HeldBlocks {
 public:
  // Whether `count` bytes at `offset` lie inside the block held for `handle` (which
  // ends within the file, so they are all there).
  bool covers(Handle handle, off_t offset, size_t count) const {
    auto it = held_.find(handle);
    return it != held_.end() && it->second.begin <= offset &&
           count <= static_cast<size_t>(std::max<off_t>(it->second.end - offset, 0));
  }
  void hold(Handle handle, FetchBlock block) { held_[handle] = block; }
  void forget(Handle handle) { held_.erase(handle); }

 private:
  std::map<Handle, FetchBlock> held_;
};

// Descriptor `fd` is no longer the PT's (it is being closed: itself, under a stream or an
// MPI file): disowned, and its held block forgotten, since its number may name another
// file next (PosixIo.cpp holds the descriptors' blocks).
void pt_disown_fd(int fd);

// The PT's prefetch of `count` bytes at `offset` of `fd`, read through `handle`: by the
// block, remembered for `handle`. A read after a write is left to a waiting thread with
// exactly its bytes (the file may still grow before it runs). Returns the bytes the read
// will deliver, or -1 if `fd` is not a regular file.
template <typename Handle>
ssize_t prefetch_by_block(HeldBlocks<Handle> &held, Handle handle, int fd, off_t offset,
                          size_t count, uint64_t seq, unsigned flags) {
  const bool after_write = flags & PPIOS_PF_AFTER_WRITE;
  if (!after_write && held.covers(handle, offset, count)) return static_cast<ssize_t>(count);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  const size_t predicted =
      offset >= st.st_size ? 0 : std::min<size_t>(count, static_cast<size_t>(st.st_size - offset));
  if (after_write) {
    Runtime::get().prefetch(fd, st, offset, predicted, count, seq, flags);
  } else if (predicted > 0) {
    const FetchBlock block = fetch_block(offset, predicted, st);
    const size_t length = static_cast<size_t>(block.end - block.begin);
    Runtime::get().prefetch(fd, st, block.begin, length, length, seq, flags);
    held.hold(handle, block);
  }
  return static_cast<ssize_t>(predicted);
}

}  // namespace ppios
