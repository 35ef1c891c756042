// The stdio streams of the process that may write a regular file, and the hold each has
// on that file in the node's change table (docs/design/coherence.md, "Held files"): a
// stream's bytes reach its file whenever glibc flushes them, through no call the runtime
// sees, so the file is held from the moment the stream can write it until it no longer
// can (its close, or its descriptor led elsewhere).
//
// Every way a FILE* comes to write a regular file is one of glibc's: fopen, fdopen,
// freopen, tmpfile (their wrappers), and the standard streams, whose descriptors 1 and 2
// the program may inherit or point at a file (dup2, dup3, dup, fcntl F_DUPFD, a close and
// an open that takes the number, freopen). fopencookie, fmemopen and open_memstream have
// no file of their own; dprintf's stream lives for one call, which is a write of its
// descriptor (FileChanges.cpp).
//
// Lock-free (a fixed table of slots claimed with compare-and-swap): streams are opened and
// closed in signal handlers and forked children too, where the runtime may not be entered
// (`entered` false: the change table alone is told). A hold taken where the runtime was
// entered also keeps this process's cache from the file (Coherence::hold).
#pragma once

#include <stdio.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "FileKey.h"

namespace ppios {

class StreamHolds {
 public:
  static StreamHolds &get();

  // A stream just opened with `mode` (fopen, fdopen, freopen, tmpfile): if it may write a
  // regular file, the file is held until the stream is closed. `truncates`: the open
  // emptied the file (mode "w"), an own change that is over already.
  void opened(FILE *stream, const char *mode, bool truncates, bool entered);
  // Holds the file `key` for `stream` (a stream the runtime did not see opened, found
  // writing: fwrite's net). No-op if the stream holds a file already.
  void hold_unless_held(FILE *stream, const FileKey &key, bool entered);

  // A stream's hold, taken before its close and given back after it (the buffered bytes
  // are in the file then: the give-back bumps the file before it releases it).
  struct Taken {
    bool any = false;
    FileKey key;
    bool entered = false;  // taken where the runtime was entered
    bool ours = true;      // this process's hold (not a forked parent's slot)
  };
  Taken take(FILE *stream);
  void give_back(const Taken &taken, bool entered);

  // Descriptor `fd` may lead to another file now (a dup onto it, an open that took its
  // number, its close): for 1 and 2, stdout's or stderr's hold follows it.
  void standard_fd_changed(int fd, bool entered);
  // At start-up: the standard streams' files (inherited descriptors).
  void hold_standard_streams(bool entered);
  // In a child forked without exec (single-threaded, async-signal-safe): its copies of the
  // parent's streams write their buffers at its fclose, fflush or exit, so the child holds
  // their files in its own name too.
  void adopt_after_fork();

  static constexpr size_t kSlots = 256;

 private:
  struct Slot {
    std::atomic<uintptr_t> stream{0};  // 0 free, kBusy being changed, else the FILE*
    FileKey key;
    pid_t pid = 0;
    bool entered = false;
  };
  static constexpr uintptr_t kBusy = 1;
  StreamHolds() = default;
  size_t start_of(FILE *stream) const;
  // Claims a slot for `stream`, holding `key`; false if the table is full (then the hold is
  // kept for the life of the process: it only drops more).
  void hold(FILE *stream, const FileKey &key, bool entered);
  Slot slots_[kSlots];
};

// Whether the regular file behind `fd` is one a stream on it can write: sets *key.
// fstat and fcntl only (async-signal-safe); errno is kept.
bool writable_regular_file(int fd, FileKey *key);

}  // namespace ppios
