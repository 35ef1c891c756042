// The prefetch thread's safety net: how it ends (the escape), what it owns (descriptors,
// streams, memory), and how its faults are caught.
//
// The PT pre-executes a slice of the program that may go wrong in ways the program
// itself never does (it reads ahead, with values the MT has not computed yet). Whatever
// happens there, the program must behave as without ppios. So the PT can leave at any
// point: ppios_pt_start runs the slice under sigsetjmp, and pt_escape() siglongjmps back
// from wherever the PT is (generated code, a runtime entry point before it takes a lock,
// the fault handler), after which everything the PT owns is released and the thread
// ends. Escapes never cross runtime frames that hold locks or own objects: runtime
// entry points escape at entry or after their work is undone.
//
// Lock order: PtResources::streams_mu_ is a leaf (nothing is called with it held but
// container operations). Memory blocks and the escape buffer belong to the PT thread
// alone.
#pragma once

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "FileKey.h"

namespace ppios {

class PrefetchCache;

// Why the PT ended (PPIOS_STATS "pt_stop").
enum class PtStop : int {
  Running = 0,
  Done,     // the slice returned
  Exit,     // ppios_pt_exit: the program would exit/abort here
  Fault,    // a SIGSEGV/SIGBUS/SIGFPE/SIGILL in the slice, or a SIGABRT it raised (abort())
  Budget,   // ppios_pt_malloc over PPIOS_CACHE_MB, or out of memory
  Stopped,  // the runtime is stopping (end of the run)
  Bounds,   // ppios_pt_index: a subscript out of bounds
  Backoff,  // the back-off's CPU rule: the PT cost as much CPU as the MT, without paying off
  NoThread,  // the system refused the PT a thread (ulimit -v): the program ran unprefetched
};
const char *pt_stop_name(PtStop why);

// Runs entry(ctx) as the PT's slice on the calling thread (which must be the PT), with
// the fault net and an alternate signal stack; returns how it ended. Releases nothing:
// the caller releases the PT's resources afterwards.
PtStop run_pt_slice(void (*entry)(void *), void *ctx);

// Leaves the slice now (the PT thread only, inside run_pt_slice, with no runtime lock
// held). Elsewhere it aborts: it is a misuse of the ABI.
[[noreturn]] void pt_escape(PtStop why);

// On the PT thread: escapes if the runtime is stopping. Every PT entry point calls it
// first. Other threads: nothing.
void pt_checkpoint();

// The fault net calls this for a signal of the net that a thread brought on itself (a
// fault, or one it raised): if it is the slice's (on the PT, outside runtime code, inside
// run_pt_slice) it records it for PPIOS_STATS (pt_fault_seen), prints one line with
// PPIOS_VERBOSE=1 and escapes; otherwise it returns and the caller behaves as without ppios.
void pt_fault_escape(int sig, const siginfo_t *info);

// The signal that stopped the slice (pt_stop "fault"), for PPIOS_STATS: false if there was
// none. *address is where the fault was; *has_address is false for a signal that has no
// address (one raised, such as abort()'s SIGABRT).
bool pt_fault_seen(int *sig, uintptr_t *address, bool *has_address);

// Touches every page of [buf, buf+count) as a write would, from outside runtime code,
// so that a bad PT buffer faults here (and escapes) rather than inside the runtime.
void pt_probe_buffer(void *buf, size_t count);

// Before the runtime stores `count` bytes at `buf` for the PT (a copy read): escapes
// (pt_stop "bounds") if buf lies in a block of the PT's allocator and the bytes run past
// its end. A count the PT computed from mispredicted data must not overflow the block into
// the heap the program shares. (A buffer of the PT's stack or statics is not a block: its
// size is the transformer's to check.) The PT thread only, with no runtime lock held.
void pt_check_room(const void *buf, size_t count);

// The environment as it was when the PT started, for the PT's getenv: the program's
// setenv/putenv may reallocate `environ` while the PT reads it, and the PT must never
// touch memory the program frees. snapshot_environment() runs on the MT before the PT
// exists; pt_getenv() returns a pointer into the snapshot (kept for the whole run).
void snapshot_environment();
const char *pt_getenv(const char *name);

// Descriptors, streams and memory blocks the PT owns. The PT touches nothing else: a
// PT call on a descriptor or stream it does not own fails with EBADF, so the program's
// own (argv files, STDIN_FILENO, the MT's descriptors) are never read or moved.
class PtResources {
 public:
  static PtResources &get();

  void own_fd(int fd);
  void disown_fd(int fd);
  bool owns_fd(int fd) const;
  void own_stream(FILE *stream);
  void disown_stream(FILE *stream);
  bool owns_stream(FILE *stream);
  // Whether `fd` is the descriptor under one of the PT's streams (closing it alone would
  // leave the stream to close a number the MT may have been given meanwhile).
  bool backs_stream(int fd);

  // Moves a new PT descriptor to a high number (closing `fd`) and owns it: the PT's
  // descriptors never take the low numbers the program's own open() calls would get.
  // Returns the descriptor to use (`fd` itself if it cannot be moved).
  int adopt_fd(int fd);
  // The lowest number for descriptors of the runtime's own threads.
  static int high_fd_base();
  // A copy of the PT's `fd` for another runtime thread's job (a waiting thread's or a
  // reader's), at a high number like the PT's own, or -1 (errno unchanged). It does not
  // exist for the program either: the program's calls on that number fail with EBADF
  // (runtime_owns_fd), so a program that closes or dup2()s over numbers it never opened
  // cannot close it under the job, nor have it read another file into the cache. The
  // job's thread gives it back with close_helper_fd; release_all leaves it alone.
  int dup_for_helper(int fd);
  void close_helper_fd(int fd);
  // The PT's descriptors and the helpers' copies.
  bool runtime_owns_fd(int fd) const;

  // Opens `path` read-only for the PT: only a regular file (a FIFO must never block
  // the PT or lose bytes to it, a tty or device never be touched). Returns an owned
  // descriptor, or -1 with errno set.
  int open_regular(const char *path);

  // PT memory, counted against the cache's capacity. Null when over budget or out of
  // memory. Only the PT thread calls these.
  void *allocate(size_t bytes, PrefetchCache &cache);
  void *reallocate(void *block, size_t bytes, PrefetchCache &cache);
  void release(void *block, PrefetchCache &cache);
  bool owns_block(const void *p) const;
  // The bytes from p to the end of the PT's block that holds p, or SIZE_MAX if p is in
  // none (the PT's stack or statics).
  size_t block_room(const void *p) const;

  // Closes every owned stream and descriptor and frees every block: the PT has ended.
  void release_all(PrefetchCache &cache);

  // The program's POSIX record locks (docs/design/coherence.md, "File locks"): the close
  // of any descriptor of a file releases all of the process's record locks on it, so the
  // runtime never closes a descriptor of its own of a file the program may hold one on.
  // note_program_lock: before the program's fcntl or lockf may take a lock through `fd`.
  void note_program_lock(int fd);
  // After the program closed a descriptor of `key`'s file (that released its locks):
  // the runtime's deferred descriptors of it are closed now.
  void program_closed(const FileKey &key);
  bool program_may_hold_locks() const { return any_locks_.load(std::memory_order_acquire); }
  // Every close of a runtime descriptor (the PT's, a helper's, a stream's) goes through
  // these: closed now, or kept open (and the program's calls on its number failing with
  // EBADF) until program_closed() for its file, or the end of the process.
  void close_runtime_fd(int fd);
  void close_runtime_stream(FILE *stream);

 private:
  // Its last two words are the block's public header (ppios_pt_block_header: the key
  // and the size), right before the bytes: generated code checks its stores against them.
  struct alignas(16) Block {
    Block *prev;
    Block *next;
    uintptr_t key;
    size_t bytes;
  };
  static constexpr int kMaxFds = 1 << 16;
  // One bit per descriptor number below kMaxFds in `bits` (kMaxFds / 64 words).
  static void set_fd_bit(std::atomic<uint64_t> *bits, int fd, bool on);
  static bool fd_bit(const std::atomic<uint64_t> *bits, int fd);
  // A copy of `fd` at a high number below kMaxFds, or -1 (errno unchanged).
  static int dup_high(int fd);
  // One bit per descriptor: read lock-free by the interposed calls on the PT thread.
  std::atomic<uint64_t> fd_bits_[kMaxFds / 64] = {};
  std::atomic<uint64_t> helper_fd_bits_[kMaxFds / 64] = {};  // dup_for_helper's copies
  std::mutex streams_mu_;
  std::vector<FILE *> streams_;
  Block *blocks_ = nullptr;
  // Files the program took a record lock on, and the runtime descriptors kept open for
  // them. locks_mu_ is a leaf; close() runs under it so that a close and a lock being
  // noted are ordered.
  std::mutex locks_mu_;
  std::set<FileKey> locked_files_;
  std::multimap<FileKey, int> deferred_closes_;
  std::atomic<bool> any_locks_{false};
  // Under locks_mu_: true if `fd` was kept open instead of closed.
  bool defer_close_locked(int fd);
};

// For PT calls: whether the descriptor (stream) is the PT's own; if not, errno is EBADF
// and the caller fails without touching it (the PT never moves the program's positions).
inline bool pt_owns(int fd) {
  if (PtResources::get().owns_fd(fd)) return true;
  errno = EBADF;
  return false;
}
inline bool pt_owns(FILE *stream) {
  if (PtResources::get().owns_stream(stream)) return true;
  errno = EBADF;
  return false;
}

}  // namespace ppios
