// The two-level backend (PPIOS_COORDINATOR=node+redis://... or node+unix://...): each node
// holds a share of the target's global cap as a lease on the redis-server, and the node's
// processes arbitrate that share among themselves in the node-local segment (ShmSlotTable,
// whose cap is the share). An acquire+release is then two node-local critical sections;
// Redis only sees the node agents, when shares move and to renew leases.
//
// Like Doorman (capacity leases handed out by a server), but for slots, not rates: a
// share is a count of concurrent accesses, so it can only move once the slots are free,
// and the server records what a node may be using (its "floor"), never less.
//
// The node agent: every process of the node runs an agent thread; the one holding the
// segment's controller lease (ShmSlotTable::lead_controller, the lease of
// PPIOS_THRESHOLD=auto, which this backend refuses) acts, the others wait to take over.
// It sleeps on the segment's bell (ShmSlotTable::wait_agent_bell), rung when an MT starts
// waiting, when the slots above a lowered cap came back and by its listener, and at the
// latest every kTickMs (5 ms); then it samples the segment (in flight, queued, MT/PT)
// and, when something could change (its processes need more, a smaller cap drained, a
// remote node needs slots, the lease is due), runs the script's node-sync with
//   floor = max(local cap, in flight), need = in flight + queued, mtneed = MTs, pt = PTs.
// The script (RedisScript.h) records share = max(target, floor) and returns the target;
// the agent sets the local cap to it. Hence the invariant, on every path:
//   local cap <= recorded share, and sum of recorded shares <= cap
// (the cap grows only from free slots; a share shrinks only after the local cap was
// lowered and the slots above it drained, i.e. after one sub-read).
// A node whose MTs wait beyond its share syncs at once (not kMinGapMs after its last
// sync) and makes the nodes whose PTs lead furthest (from their records) owe it slots (the
// script's ngive hash) and tells them how many (RPUSH nw:<node> "g<k>"); their listener
// threads (BLPOP) lower their caps by k at once (ShmSlotTable::lower_threshold, which asks
// the PTs above it to yield; lowering is always safe) and wake their agents unless slots
// must drain first (a sync before could pay nothing). The slots come back within one PT
// sub-read, the drained segment rings its agent, and its sync pays the debt and, in the
// same script call, credits the slots to the nodes whose MTs wait (their recorded shares
// grow by what came back, from slots free now) with RPUSH nw:<node> "c<seq>:<k>": their
// listeners raise their caps by k (ShmSlotTable::raise_threshold, which grants the waiting
// MTs) without a sync of their own. So a hand-over is two syncs, two BLPOP wake-ups and
// one sub-read, each step woken by the previous one (no sampling period on the path).
// While its MTs wait a node syncs every kRefreshMs, so a victim chosen from an old record
// is followed by one chosen from a fresher one. MTs keep their node's slots against PTs
// (MT-first), and inside a node the segment's own rules apply (local PT yields first).
//
// MTs against MTs of other nodes (docs/design/coordinator.md): the nodes with MTs are
// entitled to a max-min fair split of the cap by MT need (the remainder in turns of 50 ms).
// While another node's MTs hold less than their entitlement, the script returns a node's
// entitlement as its target even below its own MT need; the agent then lowers the cap
// below its MTs (lower_threshold without keep_mts: those in flight finish, those waiting
// wait), the drained segment rings, and the next sync gives the slots back, credited to
// the nodes below their entitlement. A saturated node so never keeps reusing its slots.
//
// Credits and the invariant: a credit is numbered per node (the script's ncseq) and every
// sync reply carries the number of the last credit its share counts (credit_seq_). The
// listener raises the cap only for a credit numbered above it, under cap_mutex_, which the
// agent holds from its snapshot to setting the cap from the reply; so the local cap is at
// most the share of the last sync plus the credits given after it, and the recorded share
// is at least that (only the node's own sync lowers it, never below the floor it was
// sent). An agent that took over, or lost the server, ignores credits until its next sync
// (credit_seq_ = kNoCredits), as does a listener whose process no longer acts: the credit
// stays in the recorded share, so that sync hands it out.
//
// PT leads matter only to pick victims for waiting MTs: a node reports a lead change every
// kRefreshMs (a grown lead within kGiveBackMs) while another node's MTs wait, as of its
// last sync, and every kLeadIdleMs otherwise (PTs starting or stopping at once).
//
// Leases: a node's record lives 2 x PPIOS_LEASE_MS on the server, renewed every third of
// a lease. The agent counts it from the moment it sent the sync, so it expires locally
// first. kill -9 of every process of a node: the record lapses, the share returns
// (node-sync of any other node reaps it). kill -9 of the agent alone: another process of
// the node takes the controller lease within about a lease and carries on (the share and
// local cap stay as they were; the new agent reports its floor).
//
// State lost (FLUSHALL, eviction, a deleted key, a restart with an empty database): every
// node-sync carries the state's epoch the agent saw (the script's "epoch" op makes one at
// its connection); another one or none answers -2, and the agent stores the cap it knew
// again (the last one it saw, at its start or a sync, else its PPIOS_THRESHOLD; a cap set
// with ppios-coord is not in the jobs' options), takes the new epoch and notes it once. Its next
// sync finds no record of its node and reports its floor: the recovery below.
//
// Redis lost: the node keeps its local cap until its lease would have ended (one lease
// after an agent took over without reaching the server), then sets it to its fair share,
// cap / nodes seen at the last sync, rounded down (0 if it never synced), so the nodes'
// caps add up to the cap at most, even when the cap is below the number of nodes (a
// node with 0 grants no PT: its PTs wait, and proceed without a slot only by the shm
// fail-open, after twice the lease without a grant; MTs as in "Known limits"). On
// return the agent runs adopt and node-sync again: the script records the
// floor even above the cap (so the sum stays truthful) and sends every node back to its
// fair share until the sum is below the cap.
//
// Known limits: MTs past the cap still proceed when MTs alone fill it if their process
// has PPIOS_MT_THROTTLE=0, or no numeric PPIOS_THRESHOLD of its own (MtAtCap::Learned:
// node+ does not learn, so no controller ever holds MTs); a node with share 0 whose PTs wait for
// twice the lease proceeds without a slot (the fail-open of ShmCoordinator; MTs get turns
// first, so only when about (2 x lease / 50 ms) x cap nodes' MTs compete); node-sync
// reads every node's record (O(nodes) per sync, cheap for hundreds of nodes).
//
// Threads: the caller's threads only touch the ShmCoordinator. The agent thread owns its
// link and the agent state below; the listener thread owns its link; they share
// cap_mutex_ (share_ and credit_seq_; taken before the segment's lock) and wake_mutex_ (a
// leaf lock) for the wake flag.
#pragma once

#include "RedisAddress.h"
#include "RedisLink.h"
#include "ShmCoordinator.h"
#include "ppios/Coordinator.h"

#include <atomic>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace ppios {

class NodeCoordinator final : public Coordinator {
 public:
  static std::unique_ptr<Coordinator> create(const CoordinatorOptions &options, std::string *error);
  ~NodeCoordinator() override;

  SlotTicket acquire(IoClass cls, uint64_t lead) override { return local_->acquire(cls, lead); }
  void release(SlotTicket &ticket) override { local_->release(ticket); }
  bool yield_requested(const SlotTicket &ticket) override { return local_->yield_requested(ticket); }
  const char *name() const override { return "node"; }
  // Which jobs the cap covers (ppios::cap_scope): "process" without a node-local segment.
  const char *scope() const { return table_ ? "site" : "process"; }

  // The node-local target of a node: its segment is "<target>@node[-<sim node>]".
  static std::string local_target(const CoordinatorOptions &options);

 private:
  NodeCoordinator(const CoordinatorOptions &options, const RedisAddress &address, std::unique_ptr<ShmCoordinator> local);
  // Stops the agent and listener and, from the agent of the node's last process, gives the
  // share back (node-leave). Once: from the destructor or at process exit (the runtime
  // keeps its coordinator to the end; see ShmCoordinator's exit hook).
  void stop();
  void agent_loop();
  void listener_loop();
  // One pass of the acting agent; false when the server failed us.
  bool agent_step(bool woken);
  bool connect_agent_link();
  // Stores the cap this agent knew if the server has none, and takes the state's epoch.
  bool adopt_known_cap(std::string *err);
  void apply_offline_rule();
  bool sleep_or_stop(int ms, bool *woken);
  // The listener's credit "<seq>:<k>"; false when it is left to the agent's next sync.
  bool apply_credit(const char *text);

  const CoordinatorOptions options_;
  const RedisAddress address_;
  const std::string node_;       // the node's name on the server
  const std::string wake_list_;  // its wake-up list
  const int node_lease_ms_;
  std::unique_ptr<ShmCoordinator> local_;
  ShmSlotTable *table_ = nullptr;  // local_'s segment; null: no segment (fail-open)

  // Agent state, agent thread only; share_ and credit_seq_ also by the listener's credits,
  // both under cap_mutex_, which the agent holds from its snapshot to setting the cap.
  static constexpr int64_t kNoCredits = std::numeric_limits<int64_t>::max();
  std::mutex cap_mutex_;
  std::unique_ptr<RedisLink> link_;
  bool online_ = false;
  int64_t share_ = 0;           // as last recorded by the server, plus the credits since
  int64_t credit_seq_ = kNoCredits;  // the last credit counted in share_ (kNoCredits: none may be applied)
  int64_t cap_seen_ = -1, live_seen_ = 0, free_seen_ = 0, others_need_ = 0, others_mt_ = 0;
  int64_t lease_end_ms_ = 0;    // local view of the record's lease (0: never synced)
  int64_t next_renew_ms_ = 0, next_connect_ms_ = 0, last_sync_ms_ = 0;
  int64_t reported_unmet_ = -1, reported_mt_unmet_ = -1;  // need (MT need) beyond the cap, as last synced
  int64_t reported_pt_ = 0, reported_lead_ = 0;            // PTs in flight and their largest lead, as last synced
  // The state's epoch and the target's cap as this process last saw them (at its start,
  // then at each sync of its agent): what it stores again after a loss, also when it
  // takes the agent's part over from a process that ended.
  std::string epoch_;
  int64_t known_cap_ = -1;
  int64_t last_remembered_ = -2;  // what this agent last wrote to the segment's site_cap
  std::atomic<bool> acting_{false};

  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  bool woken_ = false, stopping_ = false;
  // stop() ran. The exit hook runs under ShmCoordinator's registry mutex and the
  // destructor clears the hook under it before calling stop(): the two never overlap.
  bool stopped_ = false;
  std::thread agent_, listener_;
};

}  // namespace ppios
