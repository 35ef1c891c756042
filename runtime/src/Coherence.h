// The runtime's side of the coherence rule (docs/design/coherence.md): what an own change
// of a file, a hold, and a release or acquire point do to the prefetched bytes of the
// process and to the node's change table.
//
// Other processes' changes need nothing here: the cache serves an entry only while its
// file's generation in the table is the one it was fetched with (PrefetchCache::serve).
// Own changes come from the MT's wrappers of every call that can change a file; holds
// from the channels whose changes no call brackets; release and acquire points from the
// wrappers of the calls that synchronize processes, which matter only where the table
// cannot tell (children that exec'd, no table, a job on several nodes).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "ChangeGenerations.h"
#include "FileKey.h"
#include "PrefetchCache.h"

namespace ppios {

class Coherence {
 public:
  // `generations_cover_job`: every process of the job runs on this node, so the node's
  // table sees all of their changes (else every acquire point drops everything).
  Coherence(PrefetchCache &cache, ChangeGenerations &generations, bool generations_cover_job);

  // Brackets an own change of `key`. end_change drops every entry of the file and bumps
  // its generation for the other processes.
  void begin_change(const FileKey &key);
  void end_change(const FileKey &key);
  // An own change that is over already (it cannot be bracketed: the file is known only
  // after the call, as with open(O_TRUNC)).
  void changed(const FileKey &key) {
    begin_change(key);
    end_change(key);
  }

  // An own change of a file the runtime cannot name (an MPI handle whose name may lead to
  // either of two files, or one opened where the runtime was not entered): every file
  // counts as changed, in this process (every entry dropped) and on the node
  // (ChangeGenerations::bump_everything). Unknown is never taken to be unchanged.
  void changed_unknown();
  // While such a file has nonblocking writes in flight (from the first to its handle's
  // close), every release and acquire point is such a change too: the writes complete at
  // moments the runtime does not see, and the program learns it through a synchronization.
  static void unknown_writes_begin();
  static void unknown_writes_end();

  // A file that changes through a channel whose changes the runtime cannot bracket (a
  // stdio stream that writes it, a shared writable mapping, a nonblocking MPI-IO write)
  // is held: nothing of it is cached or served, here or in any process of the node (the
  // table's hold). unhold() is an own change (the channel's last bytes are in the file).
  void hold(const FileKey &key);
  void unhold(const FileKey &key);
  // A hold still taken at exit is given back once the process is gone
  // (ChangeGenerations::reclaim_dead_holders): exit flushes stdio streams after the
  // runtime's last word.

  // A release point of the MT (before a call that may order this process's changes
  // before another process's reads): tells the node when a child may have changed files.
  void release_point();
  // An acquire point of the MT.
  void acquire_point();
  // A child process of this one is a writer the table does not see: its stores through a
  // shared mapping leave no trace, and a program it exec'd does not run the runtime. From
  // its creation (note_child: a fork, a spawn, or a child found reaped) until no child is
  // left, every acquire point drops every entry, and every release point tells the other
  // processes of the node to do the same (ChangeGenerations::bump_everything).
  // Async-signal-safe (an atomic increment): it runs in pthread_atfork's parent handler.
  static void note_child();
  // After a wait that reaped a child: an acquire point after a writer the table does not
  // see, and the holds of the processes gone are given back.
  void child_reaped();

  // For the statistics: "exact", or why every acquire point drops everything.
  std::string mode() const;

 private:
  // Whether a child noted so far may still be there (not reaped); clears the mark when
  // none is left. The mark is cleared only after a release point told the other
  // processes, so that they too drop what the children may have changed.
  bool children_may_write();
  void settle_children();
  void drop_everything();

  // Whether the table's segment was removed or replaced under the job (looked at most
  // once a millisecond, at acquire points): from then on this process drops everything at
  // every acquire point, and tells the new table's processes at every release point.
  void check_segment();

  PrefetchCache &cache_;
  ChangeGenerations &generations_;
  // The table is there and sees every process of the job; false from a replacement on.
  std::atomic<bool> exact_;
  const bool one_node_;
  std::atomic<bool> replaced_{false};
  // The segment at the table's path once its own was found replaced (or null).
  std::atomic<ChangeGenerations *> successor_{nullptr};
  std::atomic<uint64_t> segment_looked_ns_{0};
  static std::atomic<int64_t> unknown_writes_;
  // The table's total() at the last acquire point that looked (UINT64_MAX: none yet).
  std::atomic<uint64_t> seen_total_{UINT64_MAX};
  // note_child()s so far, and how many of them a look found gone (no child left).
  static std::atomic<uint64_t> children_noted_;
  static std::atomic<uint64_t> children_settled_;
  std::mutex held_mu_;  // a leaf
  std::map<FileKey, int> held_;  // guarded by held_mu_: how many holds each file has
};

}  // namespace ppios
