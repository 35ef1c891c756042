// The coordinator contract, run against every backend: shm, redis over a Unix socket and
// redis over TCP (each redis case starts and stops its own redis-server), and the
// two-level backend (node+unix://) with one node and with every coordinator of a test on a
// node of its own (PPIOS_SIM_NODE), so every hand-over crosses nodes.
#include "RedisServer.h"
#include "ppios/Coordinator.h"
#include "ppios/CoordinatorAdmin.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <dirent.h>
#include <future>
#include <mutex>
#include <random>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace ppios {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    static int counter = 0;
    target_ = "conf-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
    if (GetParam() == "shm") {
      address_ = "shm";
    } else {
      server_ = std::make_unique<test::RedisServer>(GetParam() == "redis-tcp");
      ASSERT_TRUE(server_->start()) << "redis-server did not start";
      address_ = server_->address();
      if (GetParam().rfind("node", 0) == 0) address_ = "node+" + address_;
    }
  }
  void TearDown() override {
    std::string err;
    if (auto a = admin()) a->reset(&err);
    server_.reset();
    if (GetParam().rfind("node", 0) == 0) remove_node_segments();
  }

  // The node-local segments of this test's target ("<target>@node[-<sim node>]", stored as
  // "ppios-coord-v<layout>.<uid>.<target>_node...-<hash>"): a node whose processes were
  // killed never removes its own, and nothing of this test maps them any more.
  void remove_node_segments() const {
    const std::string mark = "." + target_ + "_node";
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    while (dirent *e = readdir(d)) {
      const std::string name = e->d_name;
      const size_t at = name.find(mark);
      if (name.rfind("ppios-coord-", 0) == 0 && at != std::string::npos &&
          (at + mark.size() == name.size() || name[at + mark.size()] == '-'))
        unlink(("/dev/shm/" + name).c_str());
    }
    closedir(d);
  }

  CoordinatorOptions options(int64_t threshold, int lease_ms = 3000, bool mt_throttle = false) const {
    CoordinatorOptions o;
    o.address = address_;
    o.target = target_;
    o.threshold = threshold;
    o.lease_ms = lease_ms;
    o.mt_at_cap = mt_throttle ? MtAtCap::Wait : MtAtCap::Pass;
    // node-many: each coordinator (each process of the forked tests) is a node of its own.
    if (GetParam() == "node-many") o.sim_node = "n" + std::to_string(getpid()) + "-" + std::to_string(++nodes_made_);
    return o;
  }
  std::unique_ptr<Coordinator> make(int64_t threshold, int lease_ms = 3000, bool mt_throttle = false) const {
    std::string err;
    auto c = make_coordinator(options(threshold, lease_ms, mt_throttle), &err);
    EXPECT_TRUE(c) << err;
    return c;
  }
  std::unique_ptr<CoordinatorAdmin> admin() const {
    std::string err;
    return make_coordinator_admin(options(-1), &err);
  }

 public:
  CoordinatorStatus status() const {
    CoordinatorStatus s;
    std::string err;
    auto a = admin();
    EXPECT_TRUE(a && a->status(&s, &err)) << err;
    return s;
  }


 protected:
  std::string address_, target_;
  std::unique_ptr<test::RedisServer> server_;
  mutable int nodes_made_ = 0;
};

// Runs acquire on another thread so a test can see whether it blocks.
std::future<SlotTicket> acquire_async(Coordinator &c, IoClass cls, uint64_t lead = 0) {
  return std::async(std::launch::async, [&c, cls, lead] { return c.acquire(cls, lead); });
}

bool blocked(std::future<SlotTicket> &f, std::chrono::milliseconds d = 300ms) {
  return f.wait_for(d) == std::future_status::timeout;
}

TEST_P(Conformance, NoStoredThresholdMeansNoCap) {
  auto c = make(-1);
  std::vector<SlotTicket> held;
  for (int i = 0; i < 20; ++i) held.push_back(c->acquire(i % 2 ? IoClass::PT : IoClass::MT, i));
  CoordinatorStatus s = status();
  EXPECT_EQ(s.threshold, -1);
  EXPECT_EQ(s.mt_inflight + s.pt_inflight, 20u);
  EXPECT_EQ(s.holders.size(), 20u);
  for (auto &t : held) c->release(t);
  EXPECT_EQ(status().pt_inflight, 0u);
}

TEST_P(Conformance, StoredThresholdWinsAndTheOtherValueWarns) {
  auto first = make(2);
  testing::internal::CaptureStderr();
  auto second = make(5);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("differs from the threshold 2"), std::string::npos) << err;
  EXPECT_EQ(status().threshold, 2);
  // The second process obeys 2: a third PT waits.
  SlotTicket a = second->acquire(IoClass::PT, 1), b = second->acquire(IoClass::PT, 1);
  auto third = acquire_async(*first, IoClass::PT, 1);
  EXPECT_TRUE(blocked(third));
  second->release(a);
  SlotTicket c = third.get();
  EXPECT_TRUE(c.valid());
  second->release(b);
  first->release(c);
}

namespace {
std::mutex g_notices_mutex;
std::vector<CoordinatorNotice> g_notices;
void keep_notice(const CoordinatorNotice &notice) {
  std::lock_guard<std::mutex> g(g_notices_mutex);
  g_notices.push_back(notice);
}
}  // namespace

// A program's runtime takes the notices (the program's stderr is not the library's): the
// same notice, with both caps, and nothing on stderr.
TEST_P(Conformance, AnInstalledSinkTakesTheNoticesInsteadOfStderr) {
  auto first = make(2);
  {
    std::lock_guard<std::mutex> g(g_notices_mutex);
    g_notices.clear();
  }
  set_coordinator_notice_sink(&keep_notice);
  testing::internal::CaptureStderr();
  auto second = make(5);
  std::string err = testing::internal::GetCapturedStderr();
  set_coordinator_notice_sink(nullptr);
  EXPECT_EQ(err, "");
  std::lock_guard<std::mutex> g(g_notices_mutex);
  ASSERT_EQ(g_notices.size(), 1u);
  EXPECT_EQ(g_notices[0].requested_threshold, 5);
  EXPECT_EQ(g_notices[0].stored_threshold, 2);
  EXPECT_NE(g_notices[0].text.find("PPIOS_THRESHOLD=5 differs from the threshold 2"), std::string::npos)
      << g_notices[0].text;
}

TEST_P(Conformance, PtGetsOnlyNMinusMSlots) {
  auto c = make(3);
  SlotTicket m1 = c->acquire(IoClass::MT, 0), m2 = c->acquire(IoClass::MT, 0);
  SlotTicket p1 = c->acquire(IoClass::PT, 4);
  auto p2 = acquire_async(*c, IoClass::PT, 4);
  EXPECT_TRUE(blocked(p2)) << "a PT got a slot with m + p = n";
  CoordinatorStatus s = status();
  EXPECT_EQ(s.mt_inflight, 2u);
  EXPECT_EQ(s.pt_inflight, 1u);
  EXPECT_EQ(s.queued_pt, 1u);
  c->release(m1);
  SlotTicket t = p2.get();
  EXPECT_TRUE(t.valid());
  for (SlotTicket *x : {&m2, &p1, &t}) c->release(*x);
}

TEST_P(Conformance, MtDoesNotWaitWhenMtsAloneFillTheCap) {
  auto c = make(1);
  SlotTicket a = c->acquire(IoClass::MT, 0);
  auto b = acquire_async(*c, IoClass::MT);
  ASSERT_FALSE(blocked(b, 2000ms)) << "an MT waited although no PT held a slot";
  SlotTicket bt = b.get();
  EXPECT_EQ(status().mt_inflight, 2u);
  c->release(a);
  c->release(bt);
}

TEST_P(Conformance, MtThrottleMakesMtsWaitAtTheCap) {
  auto c = make(1, 3000, /*mt_throttle=*/true);
  SlotTicket a = c->acquire(IoClass::MT, 0);
  auto b = acquire_async(*c, IoClass::MT);
  EXPECT_TRUE(blocked(b));
  c->release(a);
  SlotTicket bt = b.get();
  EXPECT_TRUE(bt.valid());
  c->release(bt);
}

// n slots held by PTs of two other processes: the MT's arrival asks the PT with the
// largest lead to yield, and the MT runs as soon as that PT lets go.
// node-many (each process a node): an MT never waits for PTs of another node unless MTs
// are throttled (it proceeds and the remote PTs are squeezed back under the cap, see
// NodeCoordinator.h); with PPIOS_MT_THROTTLE=1 the cross-node hand-over is the same contract.
TEST_P(Conformance, MtAtTheCapMakesTheFurthestAheadRemotePtYield) {
  const bool throttle = GetParam() == "node-many";
  auto near_proc = make(2, 3000, throttle), far_proc = make(2, 3000, throttle), mt_proc = make(2, 3000, throttle);
  SlotTicket near_pt = near_proc->acquire(IoClass::PT, 1);
  SlotTicket far_pt = far_proc->acquire(IoClass::PT, 9);
  EXPECT_FALSE(near_proc->yield_requested(near_pt));
  EXPECT_FALSE(far_proc->yield_requested(far_pt));
  // Across nodes the victim is chosen from the nodes' records, which report new PTs within
  // a few ms: give them that before the MT arrives.
  if (throttle) std::this_thread::sleep_for(100ms);
  auto mt = acquire_async(*mt_proc, IoClass::MT);
  auto deadline = Clock::now() + 3s;
  while (!far_proc->yield_requested(far_pt) && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(far_proc->yield_requested(far_pt)) << "the PT with the largest lead was not asked to yield";
  EXPECT_FALSE(near_proc->yield_requested(near_pt));
  EXPECT_TRUE(blocked(mt, 100ms)) << "the MT ran past the cap instead of waiting for the yield";
  auto released = Clock::now();
  far_proc->release(far_pt);
  ASSERT_FALSE(blocked(mt, 2000ms));
  // "Within one PT sub-read": the hand-over itself must be quick.
  EXPECT_LT(Clock::now() - released, 500ms);
  SlotTicket t = mt.get();
  CoordinatorStatus s = status();
  EXPECT_EQ(s.mt_inflight, 1u);
  EXPECT_EQ(s.pt_inflight, 1u);
  mt_proc->release(t);
  near_proc->release(near_pt);
}

TEST_P(Conformance, MtPrefersItsOwnProcessPtAsVictim) {
  auto local = make(2), remote = make(2);
  SlotTicket local_pt = local->acquire(IoClass::PT, 1);
  SlotTicket remote_pt = remote->acquire(IoClass::PT, 50);
  auto mt = acquire_async(*local, IoClass::MT);
  auto deadline = Clock::now() + 3s;
  while (!local->yield_requested(local_pt) && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(local->yield_requested(local_pt)) << "the local PT was not chosen";
  EXPECT_FALSE(remote->yield_requested(remote_pt)) << "a remote PT was chosen although a local one ran";
  local->release(local_pt);
  SlotTicket t = mt.get();
  local->release(t);
  remote->release(remote_pt);
}

// A queued MT is served before a PT that queued earlier.
TEST_P(Conformance, QueuedMtIsServedBeforeQueuedPt) {
  auto c = make(1, 3000, /*mt_throttle=*/true);
  SlotTicket held = c->acquire(IoClass::MT, 0);
  auto pt = acquire_async(*c, IoClass::PT, 1);
  EXPECT_TRUE(blocked(pt, 200ms));
  auto mt = acquire_async(*c, IoClass::MT);
  EXPECT_TRUE(blocked(mt, 200ms));
  c->release(held);
  ASSERT_FALSE(blocked(mt, 2000ms));
  EXPECT_TRUE(blocked(pt, 200ms)) << "the PT got the slot before the waiting MT";
  SlotTicket m = mt.get();
  c->release(m);
  SlotTicket p = pt.get();
  c->release(p);
}

TEST_P(Conformance, ReleaseIsIdempotent) {
  auto c = make(1);
  SlotTicket t = c->acquire(IoClass::PT, 1);
  SlotTicket copy = t;
  c->release(t);
  EXPECT_FALSE(t.valid());
  c->release(t);
  c->release(copy);  // a stale copy must not free somebody else's slot
  SlotTicket none;
  c->release(none);
  SlotTicket again = c->acquire(IoClass::PT, 1);
  SlotTicket stale = copy;
  c->release(stale);
  EXPECT_EQ(status().pt_inflight, 1u);
  c->release(again);
  EXPECT_EQ(status().pt_inflight, 0u);
}

TEST_P(Conformance, SetThresholdChangesTheCapLive) {
  auto c = make(1);
  SlotTicket a = c->acquire(IoClass::PT, 1);
  auto b = acquire_async(*c, IoClass::PT, 1);
  EXPECT_TRUE(blocked(b));
  std::string err;
  ASSERT_TRUE(admin()->set_threshold(2, &err)) << err;
  ASSERT_FALSE(blocked(b, 2000ms)) << "raising the threshold did not admit the waiter";
  SlotTicket bt = b.get();
  EXPECT_EQ(status().threshold, 2);
  c->release(a);
  c->release(bt);
}

// A process that leaves PPIOS_THRESHOLD unset obeys the cap stored for the target
// (ppios-coord set-threshold, calibrate --store).
TEST_P(Conformance, AnUnsetThresholdObeysTheStoredCap) {
  std::string err;
  ASSERT_TRUE(admin()->set_threshold(2, &err)) << err;
  auto c = make(-1), other = make(-1);
  EXPECT_EQ(status().threshold, 2);
  SlotTicket a = c->acquire(IoClass::PT, 1), b = other->acquire(IoClass::PT, 1);
  auto third = acquire_async(*c, IoClass::PT, 1);
  EXPECT_TRUE(blocked(third)) << "a PT of a process without a threshold of its own passed the stored cap 2";
  other->release(b);
  SlotTicket t = third.get();
  EXPECT_TRUE(t.valid());
  c->release(a);
  c->release(t);
}

// Queued PTs are served in the order they arrived, whatever their lead. The waiters arrive
// 300 ms apart, far beyond the node-local segment's bounded barging (2 ms), each in a
// process (and with node-many a node) of its own.
TEST_P(Conformance, QueuedPtsAreServedInArrivalOrder) {
  auto holder = make(1);
  std::vector<std::unique_ptr<Coordinator>> procs;
  for (int i = 0; i < 3; ++i) procs.push_back(make(1));
  SlotTicket held = holder->acquire(IoClass::PT, 1);
  const uint64_t leads[3] = {9, 5, 1};  // the first to arrive is the furthest ahead
  std::vector<std::future<SlotTicket>> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(acquire_async(*procs[i], IoClass::PT, leads[i]));
    // Queued before the next one starts, however slow the machine.
    for (auto deadline = Clock::now() + 5s; status().queued_pt < static_cast<uint64_t>(i + 1) && Clock::now() < deadline;)
      std::this_thread::sleep_for(10ms);
    ASSERT_EQ(status().queued_pt, static_cast<uint64_t>(i + 1)) << "waiter " << i << " did not queue";
    ASSERT_TRUE(blocked(waiters.back())) << "waiter " << i << " passed the cap";
  }
  holder->release(held);
  for (int i = 0; i < 3; ++i) {
    int served = -1;
    for (auto deadline = Clock::now() + 5s; served < 0 && Clock::now() < deadline;)
      for (int j = i; j < 3 && served < 0; ++j)
        if (waiters[j].wait_for(1ms) == std::future_status::ready) served = j;
    ASSERT_EQ(served, i) << "the slot went to waiter " << served << " before waiter " << i;
    SlotTicket t = waiters[i].get();
    procs[i]->release(t);
  }
}

// In a node-local segment a cap lowered below what is in flight asks that many PTs to
// yield, largest lead first.
TEST_P(Conformance, ALoweredCapAsksTheFurthestAheadPtsToYield) {
  if (GetParam() != "shm" && GetParam() != "node-one") GTEST_SKIP() << "the rule of a node-local segment";
  auto c = make(3);
  SlotTicket near_pt = c->acquire(IoClass::PT, 1), mid_pt = c->acquire(IoClass::PT, 5),
             far_pt = c->acquire(IoClass::PT, 9);
  EXPECT_FALSE(c->yield_requested(far_pt));
  std::string err;
  ASSERT_TRUE(admin()->set_threshold(1, &err)) << err;
  auto deadline = Clock::now() + 3s;
  while (!(c->yield_requested(far_pt) && c->yield_requested(mid_pt)) && Clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(c->yield_requested(far_pt)) << "the PT furthest ahead was not asked to yield";
  EXPECT_TRUE(c->yield_requested(mid_pt)) << "only one PT was asked to yield for 3 in flight at cap 1";
  EXPECT_FALSE(c->yield_requested(near_pt)) << "the PT closest to its MT was asked to yield";
  for (SlotTicket *t : {&near_pt, &mid_pt, &far_pt}) c->release(*t);
}

// A raised cap admits a waiter of another process (with node-many, of another node) at
// once: set-threshold wakes every node's agent. With a lease of 30 s an agent's own next
// sync is seconds away.
TEST_P(Conformance, ARaisedCapAdmitsAWaiterOfAnotherProcessAtOnce) {
  const int lease_ms = 30000;
  auto holder = make(1, lease_ms), other = make(1, lease_ms);
  SlotTicket a = holder->acquire(IoClass::PT, 1);
  if (GetParam() == "node-many") std::this_thread::sleep_for(300ms);  // the nodes' records settle
  auto b = acquire_async(*other, IoClass::PT, 1);
  ASSERT_TRUE(blocked(b));
  std::string err;
  auto raised = Clock::now();
  ASSERT_TRUE(admin()->set_threshold(2, &err)) << err;
  ASSERT_FALSE(blocked(b, 10000ms)) << "raising the threshold did not admit the other process's waiter";
  EXPECT_LT(Clock::now() - raised, 1500ms) << "the waiter was admitted only at a later sync";
  SlotTicket bt = b.get();
  holder->release(a);
  other->release(bt);
}

// The redis backend grants and releases on O(1) fast paths while nobody waits and keeps
// its counters (holders, queue lengths, pending yield requests) incrementally. Going from
// the fast paths into contention (queued PTs, an MT asking for a yield, hand-overs) and back
// must leave every count exact, and the fast paths must work again afterwards.
TEST_P(Conformance, FastPathThenContentionKeepsCountsExact) {
  auto c = make(2), other = make(2);
  SlotTicket a = c->acquire(IoClass::PT, 3), b = other->acquire(IoClass::PT, 8);  // fast paths
  CoordinatorStatus s = status();
  EXPECT_EQ(s.pt_inflight, 2u);
  EXPECT_EQ(s.queued_mt + s.queued_pt, 0u);
  auto pt = acquire_async(*c, IoClass::PT, 1);
  ASSERT_TRUE(blocked(pt));
  EXPECT_EQ(status().queued_pt, 1u);
  auto mt = acquire_async(*c, IoClass::MT);
  // The MT at the cap asks this process's own PT (a) to yield, not b which leads further.
  auto deadline = Clock::now() + 3s;
  while (!c->yield_requested(a) && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(c->yield_requested(a));
  EXPECT_FALSE(other->yield_requested(b));
  s = status();
  EXPECT_EQ(s.queued_mt, 1u);
  EXPECT_EQ(s.queued_pt, 1u);
  c->release(a);  // hand-over to the MT, not to the PT that queued first
  SlotTicket m = mt.get();
  EXPECT_TRUE(blocked(pt, 100ms)) << "a PT got the slot while the cap was reached";
  s = status();
  EXPECT_EQ(s.mt_inflight, 1u);
  EXPECT_EQ(s.pt_inflight, 1u);
  EXPECT_EQ(s.queued_mt, 0u);
  EXPECT_EQ(s.queued_pt, 1u);
  for (const auto &h : s.holders) EXPECT_FALSE(h.yield_requested) << "a yield request outlived its holder";
  other->release(b);  // hand-over to the queued PT
  SlotTicket p = pt.get();
  s = status();
  EXPECT_EQ(s.mt_inflight, 1u);
  EXPECT_EQ(s.pt_inflight, 1u);
  EXPECT_EQ(s.queued_mt + s.queued_pt, 0u);
  c->release(m);
  c->release(p);
  c->release(p);  // idempotent on the fast path too
  s = status();
  EXPECT_EQ(s.mt_inflight + s.pt_inflight + s.queued_mt + s.queued_pt, 0u);
  EXPECT_EQ(s.holders.size(), 0u);
  // Back on the fast paths: the cap is free again and still binds.
  SlotTicket x = other->acquire(IoClass::PT, 1), y = c->acquire(IoClass::MT, 0);
  auto z = acquire_async(*c, IoClass::PT, 1);
  EXPECT_TRUE(blocked(z));
  other->release(x);
  SlotTicket zt = z.get();
  c->release(y);
  c->release(zt);
  s = status();
  EXPECT_EQ(s.mt_inflight + s.pt_inflight + s.queued_mt + s.queued_pt, 0u);
  EXPECT_LE(s.max_inflight_seen, 2u);
}

// Shared test-owned counters: incremented after a grant, decremented before a release, so
// they never exceed what the coordinator really granted; a violation here is a real one.
// MTs and PTs in flight share one word (MT count << 32 | PT count) so that every check
// sees one consistent (m, p) pair: two separate loads could pair a PT count from before
// another PT left with an MT count from after an MT took its slot, a violation that never was.
struct SharedCounters {
  std::atomic<uint64_t> inflight;
  std::atomic<int> violations, grants;
};

void hammer(Coordinator &c, SharedCounters *sc, int64_t n, bool strict, Clock::time_point until, int seed) {
  std::mt19937 rng(seed);
  while (Clock::now() < until) {
    IoClass cls = rng() % 3 == 0 ? IoClass::MT : IoClass::PT;
    SlotTicket t = c.acquire(cls, rng() % 16);
    const uint64_t one = cls == IoClass::MT ? (uint64_t{1} << 32) : 1;
    uint64_t now = sc->inflight.fetch_add(one) + one;
    int64_t m = static_cast<int64_t>(now >> 32), p = static_cast<int64_t>(now & 0xffffffffu);
    bool ok = strict ? m + p <= n : (p == 0 || m + p <= n);
    if (!ok) sc->violations.fetch_add(1);
    sc->grants.fetch_add(1);
    for (int i = 0; i < 4 && !(cls == IoClass::PT && c.yield_requested(t)); ++i) std::this_thread::sleep_for(20us);
    sc->inflight.fetch_sub(one);
    c.release(t);
  }
}

void run_forked_hammer(Conformance *self, const CoordinatorOptions &opts, bool strict) {
  auto *sc = static_cast<SharedCounters *>(
      mmap(nullptr, sizeof(SharedCounters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (sc) SharedCounters{};
  const int kProcs = 6;
  auto until = Clock::now() + 1500ms;
  std::vector<pid_t> kids;
  for (int k = 0; k < kProcs; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string err;
      auto c = make_coordinator(opts, &err);
      if (!c) _exit(3);
      std::thread other([&] { hammer(*c, sc, opts.threshold, strict, until, 1000 + k); });
      hammer(*c, sc, opts.threshold, strict, until, k);
      other.join();
      c.reset();
      _exit(0);
    }
    kids.push_back(pid);
  }
  // Sample the coordinator's own view while the children run.
  int samples = 0, status_violations = 0;
  while (Clock::now() < until) {
    CoordinatorStatus s;
    std::string err;
    std::string dummy;
    std::unique_ptr<CoordinatorAdmin> a = make_coordinator_admin(opts, &dummy);
    if (a && a->status(&s, &err)) {
      ++samples;
      int64_t total = s.mt_inflight + s.pt_inflight;
      if (strict ? total > opts.threshold : (s.pt_inflight > 0 && total > opts.threshold)) ++status_violations;
    }
    std::this_thread::sleep_for(5ms);
  }
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  }
  EXPECT_EQ(sc->violations.load(), 0);
  EXPECT_EQ(status_violations, 0);
  EXPECT_GT(sc->grants.load(), 200) << "too little work to mean anything";
  EXPECT_GT(samples, 10);
  CoordinatorStatus end = self->status();
  EXPECT_EQ(end.mt_inflight + end.pt_inflight + end.queued_mt + end.queued_pt, 0u) << "slots leaked";
  if (strict) {
    EXPECT_LE(end.max_inflight_seen, static_cast<uint64_t>(opts.threshold));
  }
  munmap(sc, sizeof(SharedCounters));
}

TEST_P(Conformance, CapNeverExceededByForkedProcesses) { run_forked_hammer(this, options(3, 3000), false); }

TEST_P(Conformance, CapNeverExceededWithMtThrottle) { run_forked_hammer(this, options(2, 3000, true), true); }

TEST_P(Conformance, KilledHolderGivesSlotsBackWithinTheLease) {
  const int lease_ms = 800;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    std::string err;
    auto c = make_coordinator(options(2, lease_ms), &err);
    if (!c) _exit(3);
    SlotTicket a = c->acquire(IoClass::PT, 1), b = c->acquire(IoClass::PT, 2);
    (void)a;
    (void)b;
    char x = 'r';
    if (write(ready[1], &x, 1) != 1) _exit(4);
    pause();
    _exit(0);
  }
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(status().pt_inflight, 2u);
  auto c = make(2, lease_ms);
  auto waiter = acquire_async(*c, IoClass::PT, 1);
  EXPECT_TRUE(blocked(waiter, 200ms));
  auto killed = Clock::now();
  kill(child, SIGKILL);
  int st;
  waitpid(child, &st, 0);
  // The two-level backend: a node's share lives twice the lease on the server (so another
  // process of the node can take over as its agent first); the killed process was a node of
  // its own in node-many.
  const int returns_ms = GetParam() == "node-many" ? 2 * lease_ms : lease_ms;
  ASSERT_FALSE(blocked(waiter, std::chrono::milliseconds(returns_ms + 1500))) << "slots of the dead holder never came back";
  auto took = Clock::now() - killed;
  EXPECT_LT(took, std::chrono::milliseconds(returns_ms + 700));
  SlotTicket t = waiter.get();
  CoordinatorStatus s = status();
  EXPECT_EQ(s.pt_inflight, 1u);
  for (const auto &h : s.holders) EXPECT_NE(h.pid, child);
  c->release(t);
}

// A rank that ends without destroying its coordinator (the runtime keeps it to the end)
// leaves the target at exit all the same: it is no longer registered once it has exited,
// even while its pid still exists (a zombie, which a reap takes for alive: without the
// exit handler it stayed for its lease); with the two-level backend the node's last
// process also gives its share back (its record goes at once, not after twice the lease).
TEST_P(Conformance, ExitWithoutDestroyingLeavesTheTarget) {
  if (GetParam().rfind("redis", 0) == 0) GTEST_SKIP() << "the redis backend's processes leave with their lease";
  fflush(nullptr);  // the child's exit() flushes what it inherited
  pid_t child = fork();
  if (child == 0) {
    std::string err;
    auto c = make_coordinator(options(2, 3000), &err);
    if (!c) _exit(3);
    SlotTicket t = c->acquire(IoClass::PT, 1);
    c->release(t);
    c.release();  // kept to the end, as the runtime does
    exit(0);
  }
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // a zombie from here
  CoordinatorStatus s = status();
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  if (GetParam() == "shm") EXPECT_EQ(s.processes, 0u) << "the exited process is still registered";
  else EXPECT_TRUE(s.nodes.empty()) << "the node's share outlived its only process";
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::Values("shm", "redis-unix", "redis-tcp", "node-one", "node-many"),
                         [](const auto &info) {
                           std::string n = info.param;
                           for (auto &ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace ppios
