// The node's change generations (docs/design/coherence.md, rule 2): one counter per file
// (its inode number, hashed into a fixed table), in a shared-memory segment of the user's
// that every process running under ppios on the node maps. A process bumps a file's
// counter after each change it made to the file; a prefetched entry records the file's
// generation at its fetch start and is served only while the generation is still that.
// A file that a process changes through a channel the runtime cannot bracket (a shared
// writable mapping, a writing stdio stream) is *held* by it: while any process holds it,
// its generation is kHeld, which no entry has and none is fetched with.
//
// Two files may share a counter: a collision only drops more. The table has no keys, no
// insertion and no lock: a bump is one atomic increment, a look two atomic loads.
//
// Without the segment (no /dev/shm, a segment of the name planted by someone else) the
// table is unavailable, and callers must treat every file as changed at every acquire
// point: available() says which.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include <sys/types.h>

#include "FileKey.h"

namespace ppios {

struct HoldRecord;

class ChangeGenerations {
 public:
  // Maps the user's segment (kSegmentDir + segment_name()), creating it if needed. Never
  // fails: on any error the table is unavailable, and *why says so (for the statistics).
  static ChangeGenerations &node();

  // For tests: a table in this process's memory only (available), or none at all.
  static ChangeGenerations *make_private();
  static ChangeGenerations *make_unavailable();
  // For tests: the table of a segment at `path` (created if missing).
  static ChangeGenerations *open_segment(const std::string &path, std::string *why);

  bool available() const { return counters_ != nullptr; }
  // The generation of `key`: kHeld while a process holds it, else its counter plus the
  // count of bump_everything()s (0 when unavailable).
  uint64_t current(const FileKey &key) const;
  static constexpr uint64_t kHeld = UINT64_MAX;
  // This process holds `key` from hold() to unhold(), which bumps it first (the channel's
  // last changes are in). Each hold is recorded with the pid, so that the holds of a
  // process that died are given back (reclaim_dead_holders). Async-signal-safe.
  void hold(const FileKey &key);
  void unhold(const FileKey &key);
  // Gives back, bumping their files, the holds of processes that no longer exist: at the
  // table's opening, and when a child is reaped.
  void reclaim_dead_holders();
  // hold() of the file behind `fd`, where the runtime may not be entered: as bump_file_of.
  void hold_file_of(int fd) { for_file_of(fd, &ChangeGenerations::hold); }
  // After a change of `key` completed.
  void bump(const FileKey &key);
  // How many bumps the table has seen, of any file: an acquire point at which it has not
  // moved since the last has nothing to drop (a program polling MPI_Test with a full
  // cache pays one load, not a look-up per cached file).
  uint64_t total() const;
  // A change of files nobody can name (a writer the table does not see, a child process,
  // told its news to this process): every entry of every process on the node is as good
  // as changed. everything() is the count of such changes; total() moves with it.
  void bump_everything();
  uint64_t everything() const;
  // After a change through `fd`, where the runtime may not be entered (a signal handler,
  // a forked child): async-signal-safe (fstat and an atomic increment); errno is kept.
  void bump_file_of(int fd) { for_file_of(fd, &ChangeGenerations::bump); }
  // Why the table is unavailable ("" if it is available).
  const std::string &unavailable_reason() const { return why_; }
  // Whether the segment this table maps is no longer the one at its path (removed, or
  // replaced by a new one, while this process ran: a tmp cleaner, logind's RemoveIPC).
  // Processes that open the table from then on map another one, and neither sees the
  // other's holds and bumps. One stat; false for a table of no segment.
  bool replaced() const;
  // The path of the segment ("" for a table of none).
  const std::string &path() const { return path_; }

  static constexpr size_t kCounters = 1u << 16;
  static constexpr size_t kHoldRecords = 4096;
  static std::string segment_name();

 private:
  ChangeGenerations() = default;
  size_t index_of(const FileKey &key) const;
  // `what` for the regular file behind `fd` (fstat and atomics only; errno is kept).
  void for_file_of(int fd, void (ChangeGenerations::*what)(const FileKey &));
  std::atomic<uint64_t> *counters_ = nullptr;
  std::atomic<uint64_t> *total_ = nullptr;
  std::atomic<uint64_t> *everything_ = nullptr;
  std::atomic<uint32_t> *holders_ = nullptr;  // per counter: holds now
  HoldRecord *records_ = nullptr;             // kHoldRecords: who holds which counter
  std::string why_;
  std::string path_;
  dev_t segment_dev_ = 0;
  ino_t segment_ino_ = 0;
};

}  // namespace ppios
