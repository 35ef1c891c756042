// The node-local arbitration state of one storage target, kept in POSIX shared memory so
// every process of one user (or of an admin-chosen group, PPIOS_SHM_GROUP) on the node
// sees the same holders, waiters and threshold.
//
// Trust: the segment is private to its owner (mode 0600, the uid in its name) unless a
// group is chosen (mode 0660, the gid in its name). Even so every index, id and counter
// read from it is validated before use, so a corrupt or forged segment costs at most a
// wrong cap: never a crash, never a wait longer than the lease.
//
// Lifecycle: a segment is created by the first process or admin command that needs it and
// removed by the last registered process to leave, unless ppios-coord stored something in
// it (set-threshold, auto, a curve: "pinned"), which only `reset` or `gc --pinned` removes.
// Removal is marked in the segment under its lock, so a process that mapped the name just
// before it was removed notices (register_process, pin) and opens it again.
#pragma once

#include "ppios/CoordinatorAdmin.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ppios {

struct ShmLayout;

class ShmSlotTable {
 public:
  // What one acquire asks for.
  struct Request {
    IoClass cls = IoClass::MT;
    uint64_t lead = 0;
    MtAtCap mt_at_cap = MtAtCap::Learned;
  };
  // Unavailable: the segment's lock could not be taken within twice the lease (a holder
  // that keeps it): the caller proceeds without a slot (fail-open).
  enum class Outcome { Granted, Queued, TableFull, Unavailable };
  enum class PollResult { Granted, Waiting, Lost, Unavailable };
  enum class RegisterResult { Registered, TableFull, Removed, Unavailable };

  // A ticket that stands for "proceeding without a slot": its index part is past every
  // table, so release() and yield_requested() ignore it.
  static constexpr uint64_t kUnscheduledTicket = 0xFFFF;

  // Maps the segment of `target` (private to the caller, or shared with `group` when it
  // is >= 0); creates it if `create` (else nullptr with *error set to "" when it does not
  // exist). A segment that is not a regular file, belongs to someone else or is readable
  // beyond its owner (or group) is refused. `lock_wait_ms` bounds every wait on its lock
  // (the lease of the caller; a holder seen unchanged that long is taken over).
  static std::unique_ptr<ShmSlotTable> open(const std::string &target, int64_t group, bool create,
                                            int lock_wait_ms, std::string *error);
  // Removes the segment name (marking it removed for processes that have it mapped).
  // Refuses while processes are registered unless `force`. A file at the name that is not
  // a usable segment (planted by another user, malformed) is removed too, and *note says
  // what it was; one planted by another user is refused unless the caller is root (only
  // its owner or root can remove it), with *error saying so. A file another user planted
  // under the predictable name of a private segment with a keyed name is left alone
  // (not ours to remove) and said in *note.
  static bool remove(const std::string &target, int64_t group, bool force, std::string *error,
                     std::string *note = nullptr);
  // "/ppios-coord-v7.<uid>.<target>.<keyed hash>" for a private segment (the hash keyed
  // with the user's node secret, so other users cannot take the name first; without a
  // usable secret the predictable name), "/ppios-coord-v7.g<gid>.<target>" for a group's
  // (every member computes it; its owner and mode checks protect it).
  static std::string segment_name(const std::string &target, int64_t group);
  // The name without the keyed hash: what private segments were called before, and are
  // called without a node secret. A file planted there no longer matters to jobs that
  // have a secret; remove() and collect_garbage() still report one.
  static std::string predictable_name(const std::string &target, int64_t group);
  // `ppios-coord gc`: removes the segments in /dev/shm named kNameStem* (any layout
  // version) that no process maps and the caller may remove; a pinned one of the current
  // layout only with `include_pinned`. Fills the paths removed and kept (with why). Files
  // planted under this user's names (of the coordinator or of the runtime's change table,
  // ppios-generations-v*) are kept and said, with whether this user's jobs still use them.
  static void collect_garbage(bool include_pinned, std::vector<std::string> *removed,
                              std::vector<std::string> *kept);
  // Every segment name ppios-coord may find in /dev/shm starts with this (old layouts too).
  static constexpr const char *kNameStem = "ppios-coord";
  ~ShmSlotTable();

  // Process registration. A handle packs the table index and a generation so a reaped
  // and reused entry is never mistaken for ours; handles live in a std::atomic owned by
  // the caller and are replaced under the table lock when the process re-registers.
  RegisterResult register_process(int lease_ms, std::atomic<uint64_t> *handle);
  // Extends the lease; re-registers if the entry was reaped. Also reaps dead processes and
  // checks the derived counters against the tables.
  void renew(int lease_ms, std::atomic<uint64_t> *handle);
  // Leaves; the last process to leave removes an unpinned segment. `at_exit` (a process
  // ending without closing its coordinator, as ranks do): stays registered while the
  // process still holds a slot or waits for one (a thread that outlives the exit
  // handlers), so those go only with its lease, as after a kill; and keeps the segment,
  // whose learned cap, curve and max_inflight_seen are then read after the job, as when
  // ranks did not leave (`ppios-coord gc` or `reset` removes it).
  void unregister(std::atomic<uint64_t> *handle, bool at_exit = false);

  // Grants a slot at once (ticket in *ticket) or queues a waiter (*waiter_id). A PT is
  // granted a free slot ahead of queued PTs while the oldest of them has waited less than
  // 2 ms and no MT waits (bounded barging: release() leaves a slot held under 100 us free
  // for it then; ShmSlotTable.cpp, kBargeUs).
  Outcome acquire_or_enqueue(std::atomic<uint64_t> *handle, int lease_ms, const Request &request,
                             uint64_t *ticket, uint64_t *waiter_id);
  // Sleeps until the waiter is granted or timeout_ms passes; it also wakes once when it
  // has waited long enough to take a slot left free for barging (see poll()).
  void wait(uint64_t waiter_id, int timeout_ms);
  // After wait(): Granted with *ticket. Lost when the waiter was dropped (its process was
  // reaped or the table reset); the caller must start over. *grants is a count of the
  // grants of the target so far: while it moves the queue moves, and waiting is worth it.
  PollResult poll(uint64_t waiter_id, uint64_t *ticket, uint64_t *grants);
  // Gives up a queued waiter (a wait past its bound); a grant that raced in is released.
  void withdraw(uint64_t waiter_id);
  // Frees the slot and adds `bytes` to the target's completed-bytes counter.
  void release(uint64_t ticket, uint64_t bytes);
  bool yield_requested(uint64_t ticket) const;

  // Stores `wanted` if no threshold is stored (wanted < 0: leave it); returns the stored one.
  // A cap of 0 (only the two-level backend sets one: a node without a share) grants no PT.
  int64_t adopt_threshold(int64_t wanted);
  // Marks the segment as holding state an admin stored, so it outlives its processes.
  // False when it was removed meanwhile (open it again).
  bool pin();
  // Sets the cap (n < 0: none) and turns learning (PPIOS_THRESHOLD=auto) off. A cap below
  // what is in flight asks that many PTs (largest lead first) to yield.
  void set_threshold(int64_t n);
  // The two-level backend's victim: lowers a cap by `by` slots at once and asks PTs above
  // it to yield, as set_threshold. With `keep_mts`, not below the MTs in flight and waiting
  // (a remote node's MTs are owed our PTs' slots; ours keep theirs); without it (our MTs
  // hold more than their entitlement while another node's MTs wait) those in flight finish
  // and those waiting wait. No cap: nothing to lower. True when slots above the new cap
  // are still in use (the agent's bell rings once they are back).
  bool lower_threshold(int64_t by, bool keep_mts = true);
  // The two-level backend's credit: raises a cap by `by` slots (the server grew the node's
  // share by as much) and grants waiters, MTs first. No cap: nothing to raise.
  void raise_threshold(int64_t by);
  // The two-level backend's memory of the target's cap on the server (-1: none or
  // unknown), kept in the segment so it outlives the processes that saw it.
  void remember_site_cap(int64_t cap);
  int64_t site_cap() const;
  // Turns learning on; with no cap stored, starts from 1. Returns the cap.
  int64_t enable_auto();
  // False when the lock could not be taken (message in *error).
  bool snapshot(CoordinatorStatus *out, std::string *error);

  // The node agent of the two-level backend sleeps on a bell in the segment, rung when an
  // MT starts waiting and when the slots above a lowered cap came back (and by ring_agent:
  // its own listener, shutdown), so it acts on those at once rather than at its next
  // sample. Read agent_bell() before looking at the segment, then wait_agent_bell() with
  // it: a ring in between is not lost. Sleepers may wake early (a spurious futex wake-up).
  uint32_t agent_bell() const;
  void wait_agent_bell(uint32_t seen, int timeout_ms);
  void ring_agent();

  // The controller of PPIOS_THRESHOLD=auto (AutoThreshold.h). The lease belongs to a
  // registered process (its handle) and lapses with it.
  bool lead_controller(std::atomic<uint64_t> *handle, int lease_ms);
  void resign_controller(std::atomic<uint64_t> *handle);
  bool control_sample(uint64_t *bytes, int64_t *cap, uint32_t *inflight, uint32_t *queued, uint32_t *mt_demand,
                      bool *auto_on, bool *mt_hold);
  // Stores k, and whether MTs of MtAtCap::Learned wait at it, only while learning is on (a
  // hand-set cap wins).
  void set_learned_cap(int64_t k, bool hold_mts);
  void store_curve(const std::vector<std::pair<int, double>> &curve);

  // For tests of a stuck or hostile process. hold_lock_for_test takes the lock and keeps
  // it for hold_ms. forge_for_test writes what an attacker would, without the lock:
  // "bounds" (scan bounds 0xFFFFFFFF), "phantoms" (1000 PT holders of a live process
  // entry, threshold 1), "holder-index" (holders naming process 0xFFFFFFFF), "counters"
  // (m, p, queues wrapped below zero), "magic" (zeroed magic), "threshold" (cap 0).
  // Returns false for an unknown kind.
  void hold_lock_for_test(int hold_ms);
  bool forge_for_test(const std::string &kind);

 private:
  ShmSlotTable(ShmLayout *layout, std::string name, int lock_wait_ms);
  // Takes the segment lock, waiting at most 2 * lock_wait_ms_; a holder that stays the
  // same (thread and acquisition) for lock_wait_ms_, or whose thread is gone, is taken
  // over and the derived counters are recomputed. False: not taken (fail open).
  bool lock() const;
  void unlock() const;
  ShmLayout *layout_;
  const std::string name_;
  const int lock_wait_ms_;
};

}  // namespace ppios
