// Shared-memory slot table: the whole node-local scheduling policy lives here.
//
// Locking: one lock in the segment (ShmLayout::lock, a futex word holding the owner's
// thread id) guards every field of the segment (including the controller lease, the
// completed-bytes counter and the learned curve of PPIOS_THRESHOLD=auto) except the atomics
// read without it (HolderEntry::ticket and ::yield for yield_requested(),
// WaiterEntry::granted as the futex word, WaiterEntry::id and ::ticket, which a granted
// waiter's poll() collects and frees without it, ProcEntry::lease_deadline_ms, and the
// node agent's bell). Futex wake-ups of waiters are sent after the lock is let go. It is the only
// lock in this file; nothing else is taken while it is held.
//
// Every wait on it is bounded: a holder whose thread is gone, or that stays the same
// (thread and acquisition count) for the caller's lease (a rank stopped by SIGSTOP, a
// hostile process), is taken over, and the counters are recomputed from the tables (they
// are the only derived state). A waiter that cannot take it within twice the lease gives
// up and its caller proceeds without a slot. A holder that was taken over and resumes
// finds the lock no longer its own at unlock and leaves it alone.
//
// Nothing read from the segment is trusted: indexes are bounded before use, processes
// with a lease further away than the longest lease are expired, holders and waiters of
// processes that are not registered are dropped, an impossible threshold means no cap,
// and counters that disagree with the tables are recomputed.
//
// Waiters sleep on a futex in their own WaiterEntry, and whoever frees a slot hands it to
// the next waiter before waking it, so a wake-up cannot be lost and nobody races for a
// slot after waking. The one exception is bounded barging (kBargeUs): a short PT hold is
// not handed to a PT that has waited less than kBargeUs, and that waiter's sleep ends
// when it turns that old, so it takes such a slot itself. Sleeps are bounded so a waiter
// also notices dead holders itself.
#include "ShmSlotTable.h"

#include "CoordinatorNotices.h"
#include "ppios/NodeSecret.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <set>
#include <fcntl.h>
#include <linux/futex.h>
#include <new>
#include <optional>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace ppios {
namespace {

// The layout version is in the segment's name as well as in its magic: builds with
// different layouts (an upgrade, or several checkouts on one machine) then use different
// segments instead of refusing each other's. Bump both whenever ShmLayout changes.
constexpr uint64_t kMagic = 0x3730434f53505050ULL;  // "PPPSOC07"
constexpr const char *kSegmentPrefix = "/ppios-coord-v7.";
constexpr const char *kShmDir = "/dev/shm";
constexpr uint32_t kMaxProcs = 1024;
constexpr uint32_t kMaxHolders = 4096;
constexpr uint32_t kMaxWaiters = 4096;
constexpr uint32_t kIndexBits = 16;  // ids are (generation << 16) | (index + 1)
constexpr uint64_t kGenMask = (1ULL << (64 - kIndexBits)) - 1;
constexpr int kCurveMax = 256;  // learned B(k) is kept for k = 1..kCurveMax
// A reap scans every table and asks the kernel about every process: at each enqueue it
// cost a third of a saturated node's time. Waiters reap at most this often (renew() and
// the admin paths always do), so a dead holder still frees its slots within a few ms.
constexpr int64_t kReapEveryMs = 2;
// Bounded barging. Handing a slot to a sleeping waiter costs a futex wake-up and a context
// switch (some 7 us of CPU on the project machine): when every access holds its slot only
// a few microseconds, that hand-over is all a saturated node does. So a PT slot held less
// than kShortHoldUs is not handed over at release while the oldest PT waiter has waited
// less than kBargeUs: it is left free, and the next PT to ask (usually the thread that
// released it) takes it without a switch. A waiter wakes itself when it turns kBargeUs old
// and takes a slot left free; from then on releases hand over to it. So a PT waits at
// most kBargeUs longer than in arrival order, a slot stays free at most that long, and
// neither MTs (never barged past; a waiting MT stops it) nor long holds (handed over as
// ever) are affected.
constexpr int64_t kShortHoldUs = 100;
constexpr int64_t kBargeUs = 2000;

struct ProcEntry {
  uint64_t gen;  // 0: free
  int32_t pid;
  uint64_t pidns;  // inode of /proc/self/ns/pid: pid checks are only valid in our namespace
  char host[64];
  std::atomic<int64_t> lease_deadline_ms;
};

struct HolderEntry {
  std::atomic<uint64_t> ticket;  // 0: free
  uint32_t proc;
  uint8_t cls;
  uint64_t lead;
  std::atomic<uint32_t> yield;
  int64_t granted_us;  // when it was granted: a short hold may be barged (kShortHoldUs)
};

struct WaiterEntry {
  // 0: free. Set under the lock; its own thread frees a granted entry without the lock
  // (poll()'s compare-and-swap from its id to 0), which is why it is atomic.
  std::atomic<uint64_t> id;
  uint32_t proc;
  uint8_t cls;
  uint8_t mt_at_cap;  // MtAtCap of an MT waiter
  uint64_t lead;
  uint64_t seq;                    // arrival order
  std::atomic<int64_t> since_us;   // when it was queued (read by its own wait() without the lock)
  std::atomic<uint32_t> granted;   // futex word: 0 waiting, 1 granted
  std::atomic<uint64_t> ticket;    // valid once granted (read by poll() without the lock)
};

// The segment's lock. A futex word rather than a pthread mutex: its whole state is three
// integers, so bytes written into it by anyone can delay a waiter (bounded) but never
// make the C library follow a pointer or fail in an undefined way.
struct SegmentLock {
  std::atomic<uint32_t> owner;     // 0: free, else the holder's thread id (futex word)
  std::atomic<uint32_t> sleepers;  // threads in futex_wait on owner: unlock wakes only then
  std::atomic<uint32_t> taken;     // acquisitions so far: a waiter tells a new holder from a stuck one
  std::atomic<uint64_t> owner_ns;  // pid namespace of the holder: its tid is only checked in ours
};

uint64_t make_id(uint64_t gen, uint32_t index) { return (gen << kIndexBits) | (index + 1); }
uint32_t id_index(uint64_t id) { return static_cast<uint32_t>(id & ((1u << kIndexBits) - 1)) - 1; }
uint64_t id_gen(uint64_t id) { return id >> kIndexBits; }

int64_t now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // system-wide on a node, so leases compare across processes
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

uint64_t own_pid_namespace() {
  static const uint64_t ns = [] {
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  }();
  return ns;
}

// gettid() costs a system call; the lock takes it twice per operation. The cache is
// per thread and dropped in a forked child (whose thread has a new id).
std::atomic<uint32_t> fork_generation{0};
uint32_t current_tid() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
  thread_local uint32_t tid = 0, generation = 0;
  uint32_t g = fork_generation.load(std::memory_order_relaxed);
  if (tid == 0 || generation != g) {
    tid = static_cast<uint32_t>(syscall(SYS_gettid));
    generation = g;
  }
  return tid;
}

// kill(2) accepts any thread id of the namespace; ESRCH means no such thread.
bool thread_gone(uint32_t tid) { return tid == 0 || tid > INT_MAX || (kill(static_cast<pid_t>(tid), 0) != 0 && errno == ESRCH); }

void futex_wake(std::atomic<uint32_t> *word, int count = INT_MAX) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

// Waiters handed a slot are woken once the segment lock is let go: woken while it is
// held, a waiter runs only to find the lock taken and sleeps again, on the lock. The list
// is per thread (filled and flushed by the thread holding the lock); when full, the
// oldest wakes go out at once.
struct PendingWakes {
  std::atomic<uint32_t> *words[32];
  int count = 0;
};
thread_local PendingWakes pending_wakes;

void wake_after_unlock(std::atomic<uint32_t> *word) {
  PendingWakes &p = pending_wakes;
  if (p.count == static_cast<int>(sizeof p.words / sizeof p.words[0])) {
    for (int i = 0; i < p.count; ++i) futex_wake(p.words[i]);
    p.count = 0;
  }
  p.words[p.count++] = word;
}

void flush_wakes() {
  PendingWakes &p = pending_wakes;
  for (int i = 0; i < p.count; ++i) futex_wake(p.words[i]);
  p.count = 0;
}

void futex_wait_us(std::atomic<uint32_t> *word, uint32_t expected, int64_t timeout_us) {
  timespec ts{static_cast<time_t>(timeout_us / 1000000), static_cast<long>(timeout_us % 1000000) * 1000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wait(std::atomic<uint32_t> *word, uint32_t expected, int timeout_ms) {
  futex_wait_us(word, expected, int64_t{timeout_ms} * 1000);
}

// One notice per process and kind: a stuck lock would otherwise be told at every access.
void warn_once(std::atomic<bool> &flag, const std::string &message) {
  if (!flag.exchange(true)) tell_notice(message);
}
std::atomic<bool> warned_takeover{false}, warned_lock_timeout{false};

}  // namespace

struct ShmLayout {
  uint64_t magic;
  uint64_t layout_size;
  std::atomic<uint32_t> ready;
  SegmentLock lock;
  uint32_t removed;  // 1: the name was removed; whoever mapped it must open it again
  uint32_t pinned;   // 1: ppios-coord stored state here: the last process leaving keeps it
  int64_t threshold;  // -1: none stored
  uint32_t mt, pt, queued_mt, queued_pt;
  uint64_t next_gen, next_seq, max_inflight_seen;
  int64_t last_reap_ms;  // see kReapEveryMs
  // The two-level backend's node agent sleeps on agent_bell (a futex word bumped by every
  // ring; woken only while agent_sleepers says someone sleeps on it). Rung when an MT
  // starts waiting, and when what is in flight drained under a lowered cap (`draining`).
  std::atomic<uint32_t> agent_bell, agent_sleepers;
  uint32_t draining;
  uint32_t holder_hw, waiter_hw;  // one past the highest entry ever used: scans stop there
  uint32_t proc_hw;               // the same for procs (a reap scanned all 1024 at every 2 ms)
  uint32_t holder_hint;
  // PPIOS_THRESHOLD=auto
  uint64_t bytes_done;        // completed bytes reported at release
  uint32_t auto_mode;         // 1: the controller may change the cap
  uint32_t mt_hold;           // 1: the controller holds MTs of MtAtCap::Learned at the cap
                              // (0 whenever auto_mode is: set_threshold clears it)
  uint64_t ctl_owner;         // process handle of the controller, 0: none
  int64_t ctl_deadline_ms;
  // The two-level backend: the target's cap on the server as this node's agent last saw it
  // (< 1: none or unknown), so the node stores it again after the server lost it, also
  // when no process that saw it is left.
  int64_t site_cap;
  double curve_mibps[kCurveMax + 1];  // index k; 0: not measured
  ProcEntry procs[kMaxProcs];
  HolderEntry holders[kMaxHolders];
  WaiterEntry waiters[kMaxWaiters];
};

namespace {

// Everything below runs with the table lock held.
struct Policy {
  ShmLayout &s;
  // The time of this operation in microseconds (0: not read yet). acquire and release read
  // it before taking the lock: a clock read inside it lengthens every critical section of
  // a busy segment, which its other threads then queue behind.
  int64_t now = 0;
  int64_t clock() {
    if (now == 0) now = now_us();
    return now;
  }

  uint32_t holder_bound() const { return std::min(s.holder_hw, kMaxHolders); }
  uint32_t waiter_bound() const { return std::min(s.waiter_hw, kMaxWaiters); }
  uint32_t proc_bound() const { return std::min(s.proc_hw, kMaxProcs); }
  uint64_t new_gen() {
    s.next_gen = (s.next_gen + 1) & kGenMask;
    if (s.next_gen == 0) s.next_gen = 1;
    return s.next_gen;
  }

  // Cheap checks at every lock: what a scan or the cap depends on is brought into range.
  void sanitize() {
    s.holder_hw = holder_bound();
    s.waiter_hw = waiter_bound();
    s.proc_hw = proc_bound();
    s.holder_hint %= kMaxHolders;
    // 0 is a cap too: a node of the two-level backend whose share is empty (PTs wait).
    if (s.threshold < -1 || s.threshold > kMaxThreshold) s.threshold = -1;
    if (uint64_t{s.mt} + s.pt > s.holder_hw || uint64_t{s.queued_mt} + s.queued_pt > s.waiter_hw) repair();
  }

  // A process index that names an entry in use (holders and waiters of others are orphans).
  bool proc_entry_valid(uint32_t index) const {
    return index < proc_bound() && s.procs[index].gen != 0;
  }

  bool no_cap() const { return s.threshold < 0; }
  bool mt_grantable(uint8_t rule) const {
    if (no_cap()) return true;
    int64_t total = static_cast<int64_t>(s.mt) + s.pt;
    if (total < s.threshold) return true;
    // Past the cap an MT only waits for PTs to yield; when MTs alone fill it, it proceeds
    // unless it waits at the cap (MtAtCap).
    if (s.pt != 0) return false;
    if (rule == static_cast<uint8_t>(MtAtCap::Learned)) return s.mt_hold == 0;
    return rule != static_cast<uint8_t>(MtAtCap::Wait);
  }
  bool pt_grantable() const { return no_cap() || static_cast<int64_t>(s.mt) + s.pt < s.threshold; }

  bool proc_alive(uint32_t index, uint64_t gen) const {
    return index < proc_bound() && s.procs[index].gen == gen && gen != 0;
  }

  uint32_t live_processes() const {
    uint32_t n = 0;
    for (uint32_t i = 0; i < proc_bound(); ++i) n += s.procs[i].gen != 0;
    return n;
  }

  uint64_t grant(uint32_t proc, IoClass cls, uint64_t lead) {
    for (uint32_t n = 0; n < kMaxHolders; ++n) {
      uint32_t i = (s.holder_hint + n) % kMaxHolders;
      HolderEntry &h = s.holders[i];
      if (h.ticket.load(std::memory_order_relaxed) != 0) continue;
      uint64_t id = make_id(new_gen(), i);
      h.proc = proc;
      h.cls = static_cast<uint8_t>(cls);
      h.lead = lead;
      h.yield.store(0, std::memory_order_relaxed);
      h.granted_us = clock();
      h.ticket.store(id, std::memory_order_release);
      s.holder_hint = (i + 1) % kMaxHolders;
      s.holder_hw = std::max(s.holder_hw, i + 1);
      if (cls == IoClass::MT) ++s.mt; else ++s.pt;
      s.max_inflight_seen = std::max<uint64_t>(s.max_inflight_seen, s.mt + s.pt);
      return id;
    }
    return 0;
  }

  // Counters never go below zero: in a corrupt segment they may not match the tables
  // (repair() recomputes them).
  static void decrement(uint32_t &counter) {
    if (counter > 0) --counter;
  }

  void free_holder(HolderEntry &h) {
    decrement(h.cls == static_cast<uint8_t>(IoClass::MT) ? s.mt : s.pt);
    h.ticket.store(0, std::memory_order_release);
    h.yield.store(0, std::memory_order_relaxed);
    if (s.draining && (no_cap() || static_cast<int64_t>(s.mt) + s.pt <= s.threshold)) {
      s.draining = 0;
      ring_agent();  // the slots above a lowered cap came back: they can move now
    }
  }

  void ring_agent() {
    s.agent_bell.fetch_add(1, std::memory_order_seq_cst);
    if (s.agent_sleepers.load(std::memory_order_seq_cst) != 0) wake_after_unlock(&s.agent_bell);
  }

  void free_waiter(WaiterEntry &w) {
    decrement(w.cls == static_cast<uint8_t>(IoClass::MT) ? s.queued_mt : s.queued_pt);
    w.id = 0;
  }

  // The waiter stops counting as queued here; its entry is freed when its thread collects
  // the ticket (poll) or its process is dropped.
  void hand_over(WaiterEntry &w, uint64_t ticket) {
    decrement(w.cls == static_cast<uint8_t>(IoClass::MT) ? s.queued_mt : s.queued_pt);
    w.ticket = ticket;
    w.granted.store(1, std::memory_order_release);
    wake_after_unlock(&w.granted);
  }

  std::vector<uint32_t> waiters_in_order(IoClass cls) const {
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i < waiter_bound(); ++i) {
      const WaiterEntry &w = s.waiters[i];
      if (w.id != 0 && w.granted.load(std::memory_order_relaxed) == 0 && w.cls == static_cast<uint8_t>(cls))
        out.push_back(i);
    }
    std::sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) { return s.waiters[a].seq < s.waiters[b].seq; });
    return out;
  }

  // The PT that has waited longest (kMaxWaiters: none): a saturated node hands one slot
  // per release, so one scan beats sorting the queue.
  uint32_t oldest_pt_waiter() const {
    uint32_t best = kMaxWaiters;
    for (uint32_t i = 0; i < waiter_bound(); ++i) {
      const WaiterEntry &w = s.waiters[i];
      if (w.id != 0 && w.granted.load(std::memory_order_relaxed) == 0 &&
          w.cls == static_cast<uint8_t>(IoClass::PT) && (best == kMaxWaiters || w.seq < s.waiters[best].seq))
        best = i;
    }
    return best;
  }

  // True while a free slot may go to a PT that asks rather than to the queued PTs: no MT
  // waits and the oldest queued PT has waited less than kBargeUs (see kShortHoldUs).
  bool pt_may_barge() {
    if (s.queued_mt != 0) return false;
    if (s.queued_pt == 0) return true;
    const uint32_t i = oldest_pt_waiter();
    return i != kMaxWaiters && clock() - s.waiters[i].since_us.load(std::memory_order_relaxed) < kBargeUs;
  }

  // Hands free slots to waiters: MTs first, in arrival order, then PTs while no MT waits.
  // A granted waiter stays in its entry (granted = 1) until its thread collects the ticket.
  // `barge` (a release after a short hold): PTs younger than kBargeUs are not handed one.
  void promote(bool barge = false) {
    if (s.queued_mt + s.queued_pt == 0) return;
    uint32_t mt_left = 0;
    if (s.queued_mt > 0) {
      for (uint32_t i : waiters_in_order(IoClass::MT)) {
        WaiterEntry &w = s.waiters[i];
        uint64_t t = mt_grantable(w.mt_at_cap) ? grant(w.proc, IoClass::MT, 0) : 0;
        if (t) hand_over(w, t); else ++mt_left;
      }
    }
    while (mt_left == 0 && pt_grantable()) {
      const uint32_t i = oldest_pt_waiter();
      if (i == kMaxWaiters) break;
      WaiterEntry &w = s.waiters[i];
      if (barge && clock() - w.since_us.load(std::memory_order_relaxed) < kBargeUs) break;
      uint64_t t = grant(w.proc, IoClass::PT, w.lead);
      if (!t) break;
      hand_over(w, t);
    }
    request_yields();
  }

  // Asks enough PT holders to yield that every waiting MT can run: the waiting MT's own
  // process's PT first (it competes with that MT for the same process anyway), otherwise
  // the PT furthest ahead of its MT (its data is needed last).
  void request_yields() {
    if (s.pt == 0 || s.queued_mt == 0) return;
    std::vector<uint32_t> mts = waiters_in_order(IoClass::MT);
    if (mts.empty()) return;
    int64_t total = static_cast<int64_t>(s.mt) + s.pt;
    int64_t need = no_cap() ? 0 : total - s.threshold + static_cast<int64_t>(mts.size());
    need = std::min<int64_t>(need, s.pt);
    int64_t flagged = 0;
    for (uint32_t i = 0; i < holder_bound(); ++i) {
      const HolderEntry &h = s.holders[i];
      if (h.ticket.load(std::memory_order_relaxed) && h.cls == static_cast<uint8_t>(IoClass::PT) &&
          h.yield.load(std::memory_order_relaxed))
        ++flagged;
    }
    for (size_t k = static_cast<size_t>(std::max<int64_t>(flagged, 0)); k < mts.size() && flagged < need; ++k) {
      uint32_t mt_proc = s.waiters[mts[k]].proc;
      HolderEntry *best = nullptr;
      bool best_local = false;
      for (uint32_t i = 0; i < holder_bound(); ++i) {
        HolderEntry &h = s.holders[i];
        if (!h.ticket.load(std::memory_order_relaxed) || h.cls != static_cast<uint8_t>(IoClass::PT) ||
            h.yield.load(std::memory_order_relaxed))
          continue;
        bool local = h.proc == mt_proc;
        if (!best || (local && !best_local) || (local == best_local && h.lead > best->lead)) {
          best = &h;
          best_local = local;
        }
      }
      if (!best) break;
      best->yield.store(1, std::memory_order_release);
      ++flagged;
    }
  }

  // After the cap was lowered below what is in flight (the two-level backend gives a
  // node's slots to another node's MTs): the PTs furthest ahead are asked to yield, so the
  // slots come back within one sub-read.
  void request_yields_above_cap() {
    if (no_cap()) return;
    int64_t excess = std::min<int64_t>(static_cast<int64_t>(s.mt) + s.pt - s.threshold, s.pt);
    for (uint32_t i = 0; i < holder_bound() && excess > 0; ++i) {
      const HolderEntry &h = s.holders[i];
      if (h.ticket.load(std::memory_order_relaxed) && h.cls == static_cast<uint8_t>(IoClass::PT) &&
          h.yield.load(std::memory_order_relaxed))
        --excess;
    }
    for (; excess > 0; --excess) {
      HolderEntry *best = nullptr;
      for (uint32_t i = 0; i < holder_bound(); ++i) {
        HolderEntry &h = s.holders[i];
        if (h.ticket.load(std::memory_order_relaxed) && h.cls == static_cast<uint8_t>(IoClass::PT) &&
            !h.yield.load(std::memory_order_relaxed) && (!best || h.lead > best->lead))
          best = &h;
      }
      if (!best) break;
      best->yield.store(1, std::memory_order_release);
    }
  }

  // Drops processes whose lease ran out (or lies further ahead than any lease can) or
  // whose pid is gone, with their slots and waiters; then slots and waiters that belong
  // to no registered process, and counters that disagree with the tables.
  bool reap() {
    int64_t now = now_ms();
    uint64_t ns = own_pid_namespace();
    bool freed = false;
    for (uint32_t p = 0; p < proc_bound(); ++p) {
      ProcEntry &pe = s.procs[p];
      if (pe.gen == 0) continue;
      int64_t deadline = pe.lease_deadline_ms.load(std::memory_order_relaxed);
      bool expired = deadline < now || deadline > now + kMaxLeaseMs;
      bool gone = ns != 0 && pe.pidns == ns && kill(pe.pid, 0) != 0 && errno == ESRCH;
      if (!expired && !gone) continue;
      drop_process(p);
      freed = true;
    }
    for (uint32_t i = 0; i < holder_bound(); ++i) {
      HolderEntry &h = s.holders[i];
      if (h.ticket.load(std::memory_order_relaxed) && !proc_entry_valid(h.proc)) {
        free_holder(h);
        freed = true;
      }
    }
    for (uint32_t i = 0; i < waiter_bound(); ++i) {
      WaiterEntry &w = s.waiters[i];
      if (w.id != 0 && !proc_entry_valid(w.proc)) {
        if (!w.granted.load(std::memory_order_relaxed)) free_waiter(w);
        w.id = 0;
        wake_after_unlock(&w.granted);
        freed = true;
      }
    }
    uint32_t mt = s.mt, pt = s.pt, qm = s.queued_mt, qp = s.queued_pt;
    repair();
    return freed || mt != s.mt || pt != s.pt || qm != s.queued_mt || qp != s.queued_pt;
  }

  // reap() for the waiters' paths: at most every kReapEveryMs (a forged time in the
  // future does not stop it).
  bool reap_if_due() {
    const int64_t now = now_ms();
    if (now >= s.last_reap_ms && now - s.last_reap_ms < kReapEveryMs) return false;
    s.last_reap_ms = now;
    return reap();
  }

  // The process holds a slot or has a waiter queued.
  bool proc_busy(uint32_t p) const {
    for (uint32_t i = 0; i < holder_bound(); ++i)
      if (s.holders[i].ticket.load(std::memory_order_relaxed) && s.holders[i].proc == p) return true;
    for (uint32_t i = 0; i < waiter_bound(); ++i)
      if (s.waiters[i].id != 0 && s.waiters[i].proc == p) return true;
    return false;
  }

  void drop_process(uint32_t p) {
    for (uint32_t i = 0; i < holder_bound(); ++i) {
      HolderEntry &h = s.holders[i];
      if (h.ticket.load(std::memory_order_relaxed) && h.proc == p) free_holder(h);
    }
    for (uint32_t i = 0; i < waiter_bound(); ++i) {
      WaiterEntry &w = s.waiters[i];
      if (w.id == 0 || w.proc != p) continue;
      if (w.granted.load(std::memory_order_relaxed)) {
        // Granted but never collected: the ticket was already counted in a holder entry
        // (freed above); just forget the waiter.
        w.id = 0;
      } else {
        free_waiter(w);
      }
      wake_after_unlock(&w.granted);
    }
    s.procs[p].gen = 0;
  }

  // Recomputes the counters from the tables (after a holder of the lock was taken over,
  // or when they disagree).
  void repair() {
    s.mt = s.pt = s.queued_mt = s.queued_pt = 0;
    for (uint32_t i = 0; i < holder_bound(); ++i) {
      const HolderEntry &h = s.holders[i];
      if (!h.ticket.load(std::memory_order_relaxed)) continue;
      if (h.cls == static_cast<uint8_t>(IoClass::MT)) ++s.mt; else ++s.pt;
    }
    for (uint32_t i = 0; i < waiter_bound(); ++i) {
      const WaiterEntry &w = s.waiters[i];
      if (w.id == 0 || w.granted.load(std::memory_order_relaxed)) continue;
      if (w.cls == static_cast<uint8_t>(IoClass::MT)) ++s.queued_mt; else ++s.queued_pt;
    }
  }

  uint64_t register_process(int lease_ms) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      for (uint32_t p = 0; p < kMaxProcs; ++p) {
        ProcEntry &pe = s.procs[p];
        if (pe.gen != 0 && p < proc_bound()) continue;  // past the mark: not in use, whatever it holds
        pe.gen = new_gen();
        pe.pid = static_cast<int32_t>(getpid());
        pe.pidns = own_pid_namespace();
        gethostname(pe.host, sizeof pe.host);
        pe.host[sizeof pe.host - 1] = 0;
        pe.lease_deadline_ms.store(now_ms() + lease_ms, std::memory_order_relaxed);
        s.proc_hw = std::max(s.proc_hw, p + 1);
        return make_id(pe.gen, p);
      }
      if (reap()) promote();
    }
    return 0;
  }

  // Returns our process index, re-registering when the entry was reaped.
  bool ensure_registered(std::atomic<uint64_t> *handle, int lease_ms, uint32_t *index) {
    uint64_t h = handle->load(std::memory_order_relaxed);
    if (h == 0 || !proc_alive(id_index(h), id_gen(h))) {
      h = register_process(lease_ms);
      handle->store(h, std::memory_order_relaxed);
      if (h == 0) return false;
    }
    *index = id_index(h);
    return true;
  }
};

}  // namespace

std::string ShmSlotTable::segment_name(const std::string &target, int64_t group) {
  // A group's segment keeps the name every member computes (its owner and mode checks
  // protect it); a private one is keyed with the user's node secret, so that nobody else
  // can take its name first (ppios/NodeSecret.h).
  const std::string fixed = predictable_name(target, group);
  if (group >= 0) return fixed;
  return "/" + keyed_segment_name(fixed.substr(1), node_secret());
}

std::string ShmSlotTable::predictable_name(const std::string &target, int64_t group) {
  // Keep the name readable; add a hash when characters had to be replaced so that two
  // targets never share a segment. The owner (uid, or g<gid> when shared with a group) is
  // part of the name: users never share a segment unless an admin chose a group.
  std::string clean;
  bool changed = false;
  for (char c : target) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.';
    clean += ok ? c : '_';
    changed |= !ok;
  }
  if (clean.size() > 180) {
    clean.resize(180);
    changed = true;
  }
  if (changed) {
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : target) h = (h ^ c) * 1099511628211ULL;
    char buf[20];
    snprintf(buf, sizeof buf, "-%016llx", static_cast<unsigned long long>(h));
    clean += buf;
  }
  std::string owner = group >= 0 ? "g" + std::to_string(group) : std::to_string(geteuid());
  return kSegmentPrefix + owner + "." + clean;
}

namespace {

// Allocates every page of the segment; "" or why not, naming a full /dev/shm.
std::string allocate_in_full(int fd) {
  int e = posix_fallocate(fd, 0, sizeof(ShmLayout));
  if (e == 0) return "";
  if (e == ENOSPC)
    return "cannot be allocated: /dev/shm has less than " + std::to_string(sizeof(ShmLayout) / 1024) + " KiB free";
  return std::string("cannot be allocated: ") + strerror(e);
}

// Refuses a segment someone else could have planted or can write: it must be a regular
// file of ours (private) or of our chosen group, with no access for anyone else.
std::string untrusted_reason(const struct stat &st, int64_t group) {
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  if (group < 0) {
    if (st.st_uid != geteuid())
      return "belongs to uid " + std::to_string(st.st_uid) + ", not to you (uid " + std::to_string(geteuid()) +
             "): someone else created it";
    if (st.st_mode & 077) return "is accessible to other users (mode " + std::to_string(st.st_mode & 0777) + ")";
  } else {
    if (st.st_gid != static_cast<gid_t>(group))
      return "belongs to group " + std::to_string(st.st_gid) + ", not to PPIOS_SHM_GROUP " + std::to_string(group);
    if (st.st_mode & 007) return "is accessible to users outside the group";
  }
  return "";
}

}  // namespace

std::unique_ptr<ShmSlotTable> ShmSlotTable::open(const std::string &target, int64_t group, bool create,
                                                 int lock_wait_ms, std::string *error) {
  const std::string name = segment_name(target, group);
  const std::string path = kShmDir + name;
  auto fail = [&](const std::string &what) -> std::unique_ptr<ShmSlotTable> {
    if (error) *error = "shm coordinator segment " + path + " " + what;
    return nullptr;
  };
  // Planted under our name (the names are predictable): said with what it costs and who
  // can end it, here and so in the job's notice, status, reset and gc.
  auto planted = [&](const std::string &why) {
    const std::string note = group >= 0 ? "" : predictable_name_note(node_secret());
    return fail(why + "; not used: until its owner or root removes it (as root: `ppios-coord gc`, or rm " + path +
                ") jobs of " + (group >= 0 ? "group " + std::to_string(group) : "uid " + std::to_string(geteuid())) +
                " on target '" + target + "' have no node-local cap" + (note.empty() ? "" : "; " + note));
  };
  // An open refused (a file of someone else's we may not write, a symlink): what is there.
  auto refused = [&](int e, const char *doing) {
    struct stat lst;
    if (lstat(path.c_str(), &lst) == 0)
      if (std::string why = untrusted_reason(lst, group); !why.empty()) return planted(why);
    return fail(std::string(doing) + strerror(e));
  };
  // open(2) on /dev/shm rather than shm_open(3) so O_NOFOLLOW is ours to see: a symlink
  // planted under the name is refused, not followed.
  const int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC;
  const mode_t mode = group >= 0 ? 0660 : 0600;
  bool creator = false;
  int fd = -1;
  if (create) {
    fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL, mode);
    creator = fd >= 0;
    if (fd < 0 && errno != EEXIST) return refused(errno, "cannot be created: ");
  }
  if (fd < 0) {
    fd = ::open(path.c_str(), flags);
    if (fd < 0) {
      if (errno == ENOENT && !create) {
        if (error) *error = "";
        return nullptr;
      }
      return refused(errno, "cannot be opened: ");
    }
  }
  if (creator) {
    // Exactly the mode asked for, whatever the umask; the group must be ours to give.
    if ((group >= 0 && fchown(fd, static_cast<uid_t>(-1), static_cast<gid_t>(group)) != 0) || fchmod(fd, mode) != 0) {
      int e = errno;
      close(fd);
      unlink(path.c_str());
      return fail(std::string("cannot be set up: ") + strerror(e));
    }
    // Sized by allocating every page now (zero-filled): a size set with ftruncate alone
    // leaves tmpfs pages to be allocated at their first write, which on a full /dev/shm
    // (any local user can fill it) is a SIGBUS in whichever process touches them first.
    if (std::string why = allocate_in_full(fd); !why.empty()) {
      close(fd);
      unlink(path.c_str());
      return fail(why);
    }
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return fail(std::string("cannot be examined: ") + strerror(errno));
  }
  if (std::string why = untrusted_reason(st, group); !why.empty()) {
    close(fd);
    return planted(why);
  }
  if (!creator) {
    // The creator may still be sizing the segment.
    int64_t deadline = now_ms() + 2000;
    while (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) < sizeof(ShmLayout) && now_ms() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != sizeof(ShmLayout)) {
      close(fd);
      return fail("has an unexpected size (corrupt, or an older ppios?); `ppios-coord reset --force` removes it");
    }
    // A segment sized by an older build (ftruncate) may still have pages that were never
    // written: they are allocated now, where a full /dev/shm is an error, not a SIGBUS.
    if (std::string why = allocate_in_full(fd); !why.empty()) {
      close(fd);
      return fail(why);
    }
  }
  void *mem = mmap(nullptr, sizeof(ShmLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return fail(std::string("cannot be mapped: ") + strerror(errno));
  auto *layout = static_cast<ShmLayout *>(mem);
  if (creator) {
    // posix_fallocate zero-filled the segment, which is a valid empty state for every
    // table and for the lock.
    new (layout) ShmLayout;
    layout->magic = kMagic;
    layout->layout_size = sizeof(ShmLayout);
    layout->threshold = -1;
    layout->site_cap = -1;
    layout->ready.store(1, std::memory_order_release);
  } else {
    int64_t deadline = now_ms() + 2000;
    while (layout->ready.load(std::memory_order_acquire) == 0 && now_ms() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (layout->ready.load(std::memory_order_acquire) == 0 || layout->magic != kMagic ||
        layout->layout_size != sizeof(ShmLayout)) {
      munmap(mem, sizeof(ShmLayout));
      return fail("is not initialised, corrupt or from another ppios version; `ppios-coord reset --force` removes it");
    }
  }
  return std::unique_ptr<ShmSlotTable>(new ShmSlotTable(layout, path, std::max(1, lock_wait_ms)));
}

namespace {

// A file another user planted under the predictable name of the caller's private segment
// of `target` while the caller's segments have keyed names: costs the caller's jobs
// nothing, but is said (one line) so that who looks at the target learns of it. "" when
// there is none.
std::string planted_at_predictable_name(const std::string &target, int64_t group) {
  if (group >= 0 || !node_secret().usable) return "";
  const std::string path = kShmDir + ShmSlotTable::predictable_name(target, group);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || untrusted_reason(st, group).empty()) return "";
  return "kept " + path + " (the predictable name of this target's segment) " + untrusted_reason(st, group) +
         "; your jobs use a name keyed with " + node_secret().path + " instead, so it costs them nothing" +
         (st.st_uid == geteuid() ? "" : "; only its owner or root can remove it (as root: `ppios-coord gc`)");
}

}  // namespace

bool ShmSlotTable::remove(const std::string &target, int64_t group, bool force, std::string *error,
                          std::string *note) {
  // Said whatever becomes of the segment itself; never removed here (another user's).
  if (std::string old = planted_at_predictable_name(target, group); !old.empty() && note) *note = old;
  std::string problem;
  auto table = open(target, group, false, 3000, &problem);
  const std::string path = kShmDir + segment_name(target, group);
  struct stat st;
  if (!table && !problem.empty() && lstat(path.c_str(), &st) == 0 && st.st_uid != geteuid() && geteuid() != 0) {
    // Planted by another user: the sticky /dev/shm lets only its owner or root remove it.
    if (error) *error = problem;
    return false;
  }
  if (table) {
    if (!table->lock()) {
      if (!force) {
        if (error) *error = "the segment " + table->name_ + " is locked by a process that does not let go; use --force";
        return false;
      }
    } else {
      Policy p{*table->layout_};
      p.reap();
      uint32_t live = p.live_processes();
      if (live > 0 && !force) {
        table->unlock();
        if (error)
          *error = std::to_string(live) + " process(es) are registered on target '" + target +
                   "'; removing it now would give them and later jobs separate caps (use --force to remove it anyway)";
        return false;
      }
      table->layout_->removed = 1;
      table->unlock();
    }
  }
  // A segment that could not be opened (planted, corrupt, another version) is removed by
  // name, and said.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    if (error) *error = "cannot remove " + path + ": " + strerror(errno);
    return false;
  }
  if (!table && !problem.empty() && note)
    *note = "removed a segment that could not be used: " + problem + (note->empty() ? "" : "\n" + *note);
  return true;
}

namespace {

// The runtime's change table (runtime/src/ChangeGenerations.cpp):
// "ppios-generations-v<layout>.<uid>", never keyed (docs/design/hardening.md says why).
constexpr const char *kGenerationsStem = "ppios-generations-v";

// What a file planted under one of the caller's names costs the caller's jobs, given
// whether they still use that name: a keyed name, or any name when there is no secret
// (then also why). `cost` is what they lose while it is there.
std::string planted_cost(const std::string &name, const NodeSecret &secret, const char *cost) {
  if (!secret.usable) return std::string("your jobs ") + cost + " while it is there (" + predictable_name_note(secret) + ")";
  if (is_keyed_segment_name(name, secret))
    return std::string("your jobs ") + cost + " while it is there (its keyed name was seen in /dev/shm; between jobs, " +
           "removing " + secret.path + " moves your segments to new names)";
  return "a predictable name your jobs no longer use (their names are keyed with " + secret.path +
         "), so it costs them nothing";
}

// gc's look at one change table: one planted under the caller's uid is said (and kept:
// not the caller's to remove), one planted under another uid's name is removed by root.
void planted_change_table(const char *name, std::vector<std::string> *removed, std::vector<std::string> *kept) {
  const char *p = name + strlen(kGenerationsStem);
  while (*p >= '0' && *p <= '9') ++p;
  if (*p != '.') return;
  char *end = nullptr;
  const long name_uid = strtol(p + 1, &end, 10);
  if (end == p + 1 || (*end != '\0' && *end != '.')) return;
  const std::string path = std::string(kShmDir) + "/" + name;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || static_cast<long>(st.st_uid) == name_uid) return;
  if (geteuid() == 0) {
    const std::string why = " (planted: it belongs to uid " + std::to_string(st.st_uid) + ", its name to uid " +
                            std::to_string(name_uid) + ", whose jobs may have had no change table)";
    if (::unlink(path.c_str()) == 0) removed->push_back(path + why);
    else kept->push_back(path + " (" + strerror(errno) + ")");
  } else if (name_uid == static_cast<long>(geteuid())) {
    kept->push_back(path + " (planted: it belongs to uid " + std::to_string(st.st_uid) + ", not to you; " +
                    "your jobs drop their prefetched bytes at every synchronization while it is there" +
                    "; only its owner or root can remove it: as root, `ppios-coord gc`)");
  }
}

}  // namespace

void ShmSlotTable::collect_garbage(bool include_pinned, std::vector<std::string> *removed,
                                   std::vector<std::string> *kept) {
  // A segment is in use exactly when some process maps it (a registered process always
  // does); /proc/<pid>/maps names it, with " (deleted)" once it was removed.
  std::set<std::string> mapped;
  if (DIR *proc = opendir("/proc")) {
    while (dirent *e = readdir(proc)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      FILE *maps = fopen((std::string("/proc/") + e->d_name + "/maps").c_str(), "re");
      if (!maps) continue;
      char line[4096];
      while (fgets(line, sizeof line, maps)) {
        const char *at = strstr(line, "/dev/shm/");
        if (!at || strncmp(at + 9, kNameStem, strlen(kNameStem)) != 0) continue;
        std::string path(at);
        while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
        mapped.insert(path);
      }
      fclose(maps);
    }
    closedir(proc);
  }
  DIR *dir = opendir(kShmDir);
  if (!dir) return;
  const NodeSecret &secret = node_secret();
  while (dirent *e = readdir(dir)) {
    if (strncmp(e->d_name, kGenerationsStem, strlen(kGenerationsStem)) == 0) {
      planted_change_table(e->d_name, removed, kept);
      continue;
    }
    if (strncmp(e->d_name, kNameStem, strlen(kNameStem)) != 0) continue;
    std::string path = std::string(kShmDir) + "/" + e->d_name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    // A segment name carries the uid (or g<gid>) of the jobs that use it: a file under
    // such a name that belongs to someone else was planted, and those jobs run without a
    // node-local cap while it is there.
    const std::string own_prefix = std::string(kShmDir) + kSegmentPrefix + std::to_string(geteuid()) + ".";
    const bool planted_on_us = path.rfind(own_prefix, 0) == 0 && st.st_uid != geteuid();
    long name_uid = -1;
    if (path.rfind(std::string(kShmDir) + kSegmentPrefix, 0) == 0) {
      const char *after = path.c_str() + strlen(kShmDir) + strlen(kSegmentPrefix);
      char *end = nullptr;
      const long v = strtol(after, &end, 10);
      if (end != after && *end == '.') name_uid = v;
    }
    const std::string planted = name_uid >= 0 && static_cast<long>(st.st_uid) != name_uid
                                    ? " (planted: it belongs to uid " + std::to_string(st.st_uid) + ", its name to uid " +
                                          std::to_string(name_uid) + ", whose jobs on its target had no node-local cap)"
                                    : "";
    if (st.st_uid != geteuid() && geteuid() != 0) {  // not ours to remove
      if (planted_on_us)
        kept->push_back(path + " (planted: it belongs to uid " + std::to_string(st.st_uid) + ", not to you; " +
                        planted_cost(e->d_name, secret, "have no node-local cap on its target") +
                        "; only its owner or root can remove it: as root, `ppios-coord gc`)");
      continue;
    }
    if (mapped.count(path)) {
      kept->push_back(path + " (in use)");
      continue;
    }
    if (!include_pinned && S_ISREG(st.st_mode) && path.rfind(std::string(kShmDir) + kSegmentPrefix, 0) == 0 &&
        static_cast<size_t>(st.st_size) == sizeof(ShmLayout)) {
      int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      bool pinned = false;
      if (fd >= 0) {
        void *mem = mmap(nullptr, sizeof(ShmLayout), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (mem != MAP_FAILED) {
          const auto *layout = static_cast<const ShmLayout *>(mem);
          pinned = layout->magic == kMagic && layout->pinned && !layout->removed;
          munmap(mem, sizeof(ShmLayout));
        }
      }
      if (pinned) {
        kept->push_back(path + " (holds a threshold set with ppios-coord; gc --pinned removes it)");
        continue;
      }
    }
    std::string why = planted;
    if (why.empty() && path.rfind(std::string(kShmDir) + kSegmentPrefix, 0) == 0 &&
        (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != sizeof(ShmLayout)))
      why = " (malformed: not a segment of this ppios version's size)";
    if (::unlink(path.c_str()) == 0) removed->push_back(path + why);
    else kept->push_back(path + " (" + strerror(errno) + ")");
  }
  closedir(dir);
}

ShmSlotTable::ShmSlotTable(ShmLayout *layout, std::string name, int lock_wait_ms)
    : layout_(layout), name_(std::move(name)), lock_wait_ms_(lock_wait_ms) {}

ShmSlotTable::~ShmSlotTable() { munmap(layout_, sizeof(ShmLayout)); }

bool ShmSlotTable::lock() const {
  SegmentLock &l = layout_->lock;
  const uint32_t me = current_tid();
  // The clock is read only once the lock was found taken: most locks are not.
  int64_t start = -1;
  uint32_t seen_owner = 0, seen_taken = 0;
  int64_t seen_since = 0;
  for (;;) {
    uint32_t cur = 0;
    if (l.owner.compare_exchange_strong(cur, me, std::memory_order_acquire)) {
      l.taken.fetch_add(1, std::memory_order_relaxed);
      l.owner_ns.store(own_pid_namespace(), std::memory_order_relaxed);
      Policy{*layout_}.sanitize();
      return true;
    }
    const uint32_t taken = l.taken.load(std::memory_order_relaxed);
    const int64_t now = now_ms();
    if (start < 0) start = seen_since = now;
    if (cur != seen_owner || taken != seen_taken) {
      seen_owner = cur;
      seen_taken = taken;
      seen_since = now;
    }
    const bool gone = now > seen_since && l.owner_ns.load(std::memory_order_relaxed) == own_pid_namespace() &&
                      thread_gone(cur);
    const bool stuck = now - seen_since >= lock_wait_ms_;
    if (gone || stuck) {
      if (l.owner.compare_exchange_strong(cur, me, std::memory_order_acquire)) {
        l.taken.fetch_add(1, std::memory_order_relaxed);
        l.owner_ns.store(own_pid_namespace(), std::memory_order_relaxed);
        if (stuck && !gone)
          warn_once(warned_takeover, "the lock of " + name_ + " was held by thread " + std::to_string(cur) +
                                         " for more than " + std::to_string(lock_wait_ms_) +
                                         " ms (a stopped or stuck process); taken over");
        Policy p{*layout_};
        p.sanitize();
        p.repair();  // the previous holder may have stopped halfway through an update
        return true;
      }
      continue;
    }
    if (now - start >= 2 * static_cast<int64_t>(lock_wait_ms_)) {
      warn_once(warned_lock_timeout, "the lock of " + name_ + " could not be taken within " +
                                         std::to_string(2 * lock_wait_ms_) +
                                         " ms; proceeding without node-local scheduling while it lasts");
      return false;
    }
    l.sleepers.fetch_add(1, std::memory_order_seq_cst);
    futex_wait(&l.owner, cur, 10);
    l.sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

void ShmSlotTable::unlock() const {
  SegmentLock &l = layout_->lock;
  uint32_t me = current_tid();
  // Fails only if the lock was taken over while we were stopped: it is no longer ours.
  l.owner.compare_exchange_strong(me, 0, std::memory_order_seq_cst);
  if (l.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(&l.owner, 1);
  flush_wakes();
}

ShmSlotTable::RegisterResult ShmSlotTable::register_process(int lease_ms, std::atomic<uint64_t> *handle) {
  if (!lock()) return RegisterResult::Unavailable;
  if (layout_->removed) {
    unlock();
    return RegisterResult::Removed;
  }
  uint64_t h = Policy{*layout_}.register_process(lease_ms);
  handle->store(h, std::memory_order_relaxed);
  unlock();
  return h != 0 ? RegisterResult::Registered : RegisterResult::TableFull;
}

void ShmSlotTable::renew(int lease_ms, std::atomic<uint64_t> *handle) {
  if (!lock()) return;
  Policy p{*layout_};
  if (p.reap()) p.promote();
  uint32_t index;
  if (p.ensure_registered(handle, lease_ms, &index))
    layout_->procs[index].lease_deadline_ms.store(now_ms() + lease_ms, std::memory_order_relaxed);
  unlock();
}

void ShmSlotTable::unregister(std::atomic<uint64_t> *handle, bool at_exit) {
  if (!lock()) return;  // the lease reaps what we held
  Policy p{*layout_};
  uint64_t h = handle->load(std::memory_order_relaxed);
  if (at_exit && h != 0 && p.proc_alive(id_index(h), id_gen(h)) && p.proc_busy(id_index(h))) {
    unlock();
    return;
  }
  if (h != 0 && p.proc_alive(id_index(h), id_gen(h))) {
    p.drop_process(id_index(h));
    p.promote();
  }
  handle->store(0, std::memory_order_relaxed);
  // The last one out removes the name (under the lock, so an opener that mapped it
  // meanwhile sees `removed` when it registers and opens it again); not at exit, see the
  // header.
  if (!at_exit && !layout_->pinned && !layout_->removed) {
    p.reap();
    if (p.live_processes() == 0) {
      layout_->removed = 1;
      ::unlink(name_.c_str());
    }
  }
  unlock();
}

ShmSlotTable::Outcome ShmSlotTable::acquire_or_enqueue(std::atomic<uint64_t> *handle, int lease_ms,
                                                       const Request &r, uint64_t *ticket, uint64_t *waiter_id) {
  const int64_t start_us = now_us();  // before the lock: see Policy::now
  if (!lock()) return Outcome::Unavailable;
  ShmLayout &s = *layout_;
  Policy p{s, start_us};
  uint32_t proc;
  if (!p.ensure_registered(handle, lease_ms, &proc)) {
    unlock();
    return Outcome::TableFull;
  }
  bool grantable = r.cls == IoClass::MT ? p.mt_grantable(static_cast<uint8_t>(r.mt_at_cap))
                                        : p.pt_grantable() && p.pt_may_barge();
  if (grantable) {
    *ticket = p.grant(proc, r.cls, r.cls == IoClass::PT ? r.lead : 0);
    if (*ticket) {
      unlock();
      return Outcome::Granted;
    }
  }
  for (uint32_t i = 0; i < kMaxWaiters; ++i) {
    WaiterEntry &w = s.waiters[i];
    if (w.id != 0) continue;
    w.id = make_id(p.new_gen(), i);
    w.proc = proc;
    w.cls = static_cast<uint8_t>(r.cls);
    w.mt_at_cap = static_cast<uint8_t>(r.mt_at_cap);
    w.lead = r.lead;
    w.seq = ++s.next_seq;
    w.since_us.store(p.clock(), std::memory_order_relaxed);
    w.ticket = 0;
    w.granted.store(0, std::memory_order_relaxed);
    s.waiter_hw = std::max(s.waiter_hw, i + 1);
    if (r.cls == IoClass::MT) ++s.queued_mt; else ++s.queued_pt;
    *waiter_id = w.id;
    // A dead holder may be what blocks us; look before sleeping (unless a waiter just did).
    p.reap_if_due();
    p.promote();
    // An MT waits: the node agent (two-level backend) wins slots for it.
    if (r.cls == IoClass::MT && !w.granted.load(std::memory_order_relaxed)) p.ring_agent();
    unlock();
    return Outcome::Queued;
  }
  unlock();
  return Outcome::TableFull;
}

void ShmSlotTable::wait(uint64_t waiter_id, int timeout_ms) {
  uint32_t i = id_index(waiter_id);
  if (i >= kMaxWaiters) return;
  WaiterEntry &w = layout_->waiters[i];
  int64_t timeout_us = int64_t{timeout_ms} * 1000;
  // A PT not yet kBargeUs old may find a slot left free for barging when it turns that
  // old (nobody hands it over then): it wakes to take it (poll()). Only atomics are read
  // here, without the lock, so an MT wakes then too (one poll more, at most once).
  const int64_t age = now_us() - w.since_us.load(std::memory_order_relaxed);
  if (age >= 0 && age < kBargeUs) timeout_us = std::min(timeout_us, kBargeUs - age + 50);
  futex_wait_us(&w.granted, 0, timeout_us);
}

ShmSlotTable::PollResult ShmSlotTable::poll(uint64_t waiter_id, uint64_t *ticket, uint64_t *grants) {
  uint32_t i = id_index(waiter_id);
  if (i >= kMaxWaiters) return PollResult::Lost;
  {
    // Granted: the hand-over already counted us as a holder, so collecting the ticket and
    // freeing the entry needs no lock. The compare-and-swap fails only when the entry is
    // no longer ours (our process was dropped): the locked path below says Lost.
    WaiterEntry &w = layout_->waiters[i];
    if (w.granted.load(std::memory_order_acquire)) {
      const uint64_t t = w.ticket.load(std::memory_order_relaxed);
      uint64_t mine = waiter_id;
      if (w.id.compare_exchange_strong(mine, 0, std::memory_order_acq_rel)) {
        *ticket = t;
        *grants = 0;
        return PollResult::Granted;
      }
    }
  }
  if (!lock()) return PollResult::Unavailable;
  ShmLayout &s = *layout_;
  WaiterEntry &w = s.waiters[i];
  auto collect = [&]() -> std::optional<PollResult> {
    if (w.id != waiter_id) return PollResult::Lost;
    if (!w.granted.load(std::memory_order_acquire)) return std::nullopt;
    *ticket = w.ticket;
    w.id = 0;  // counted as a holder since the hand-over; the waiter entry is just freed
    return PollResult::Granted;
  };
  auto result = collect();
  if (!result) {
    Policy p{s};
    p.reap_if_due();
    // Hands over what a dead holder or a barging release left free (and asks for yields:
    // the cap may have been lowered or a flagged PT finished).
    p.promote();
    result = collect();
  }
  *grants = s.next_gen;  // bumped by every grant (and registration)
  unlock();
  return result.value_or(PollResult::Waiting);
}

void ShmSlotTable::withdraw(uint64_t waiter_id) {
  uint32_t i = id_index(waiter_id);
  if (i >= kMaxWaiters || !lock()) return;
  Policy p{*layout_};
  WaiterEntry &w = layout_->waiters[i];
  if (w.id == waiter_id) {
    if (w.granted.load(std::memory_order_acquire)) {
      uint32_t h = id_index(w.ticket);
      if (h < kMaxHolders && layout_->holders[h].ticket.load(std::memory_order_relaxed) == w.ticket)
        p.free_holder(layout_->holders[h]);
      w.id = 0;
    } else {
      p.free_waiter(w);
    }
    p.promote();
  }
  unlock();
}

void ShmSlotTable::release(uint64_t ticket, uint64_t bytes) {
  if (ticket == 0) return;
  uint32_t i = id_index(ticket);
  if (i >= kMaxHolders) return;
  const int64_t start_us = now_us();  // before the lock: see Policy::now
  if (!lock()) return;  // the slot comes back with our lease, or when the lock is free again
  HolderEntry &h = layout_->holders[i];
  if (h.ticket.load(std::memory_order_relaxed) == ticket) {
    layout_->bytes_done += bytes;
    Policy p{*layout_, start_us};
    const bool short_pt = h.cls == static_cast<uint8_t>(IoClass::PT) && start_us - h.granted_us < kShortHoldUs;
    p.free_holder(h);
    p.promote(short_pt);
  }
  unlock();
}

bool ShmSlotTable::yield_requested(uint64_t ticket) const {
  uint32_t i = id_index(ticket);
  if (ticket == 0 || i >= kMaxHolders) return false;
  const HolderEntry &h = layout_->holders[i];
  return h.yield.load(std::memory_order_acquire) != 0 && h.ticket.load(std::memory_order_acquire) == ticket;
}

int64_t ShmSlotTable::adopt_threshold(int64_t wanted) {
  if (!lock()) return -1;
  if (layout_->threshold < 0 && wanted >= 0 && wanted <= kMaxThreshold) {
    layout_->threshold = wanted;
    Policy{*layout_}.promote();
  }
  int64_t stored = layout_->threshold;
  unlock();
  return stored;
}

bool ShmSlotTable::pin() {
  if (!lock()) return true;  // nothing to pin it with; the operation fails the same way
  bool ok = !layout_->removed;
  if (ok) layout_->pinned = 1;
  unlock();
  return ok;
}

void ShmSlotTable::set_threshold(int64_t n) {
  if (!lock()) return;
  layout_->threshold = n < 0 || n > kMaxThreshold ? -1 : n;
  layout_->auto_mode = 0;
  layout_->mt_hold = 0;
  layout_->draining = layout_->threshold >= 0 && int64_t{layout_->mt} + layout_->pt > layout_->threshold;
  Policy{*layout_}.promote();
  Policy{*layout_}.request_yields_above_cap();
  unlock();
}

bool ShmSlotTable::lower_threshold(int64_t by, bool keep_mts) {
  if (by <= 0 || !lock()) return false;
  ShmLayout &s = *layout_;
  const int64_t mts = keep_mts ? int64_t{s.mt} + s.queued_mt : 0;
  if (s.threshold > mts) {
    s.threshold = std::max(mts, s.threshold - by);
    s.draining = int64_t{s.mt} + s.pt > s.threshold;
    Policy{s}.request_yields_above_cap();
  }
  const bool draining = s.draining != 0;
  unlock();
  return draining;
}

void ShmSlotTable::raise_threshold(int64_t by) {
  if (by <= 0 || !lock()) return;
  ShmLayout &s = *layout_;
  if (s.threshold >= 0) {
    // `draining` stays: slots above a cap lowered before still ring the agent when back.
    s.threshold = std::min<int64_t>(kMaxThreshold, s.threshold + by);
    Policy{s}.promote();
  }
  unlock();
}

int64_t ShmSlotTable::enable_auto() {
  if (!lock()) return -1;
  if (!layout_->auto_mode) layout_->mt_hold = 0;  // learning starts over: MTs pass until measured
  layout_->auto_mode = 1;
  if (layout_->threshold < 1) {
    layout_->threshold = 1;
    Policy{*layout_}.promote();
  }
  int64_t cap = layout_->threshold;
  unlock();
  return cap;
}

void ShmSlotTable::remember_site_cap(int64_t cap) {
  if (!lock()) return;
  layout_->site_cap = cap >= 1 && cap <= kMaxThreshold ? cap : -1;
  unlock();
}

int64_t ShmSlotTable::site_cap() const {
  if (!lock()) return -1;
  const int64_t cap = layout_->site_cap;
  unlock();
  return cap >= 1 && cap <= kMaxThreshold ? cap : -1;
}

uint32_t ShmSlotTable::agent_bell() const { return layout_->agent_bell.load(std::memory_order_seq_cst); }

void ShmSlotTable::wait_agent_bell(uint32_t seen, int timeout_ms) {
  ShmLayout &s = *layout_;
  s.agent_sleepers.fetch_add(1, std::memory_order_seq_cst);
  futex_wait(&s.agent_bell, seen, timeout_ms);  // returns at once if it was rung since `seen`
  s.agent_sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void ShmSlotTable::ring_agent() {
  layout_->agent_bell.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&layout_->agent_bell);
}

bool ShmSlotTable::lead_controller(std::atomic<uint64_t> *handle, int lease_ms) {
  if (!lock()) return false;
  ShmLayout &s = *layout_;
  Policy p{s};
  uint32_t me;
  bool ours = false;
  if (p.ensure_registered(handle, lease_ms, &me)) {
    uint64_t mine = handle->load(std::memory_order_relaxed);
    uint64_t owner = s.ctl_owner;
    bool owner_live = owner != 0 && p.proc_alive(id_index(owner), id_gen(owner)) && s.ctl_deadline_ms >= now_ms() &&
                      s.ctl_deadline_ms <= now_ms() + kMaxLeaseMs;
    if (!owner_live || owner == mine) {
      s.ctl_owner = mine;
      s.ctl_deadline_ms = now_ms() + lease_ms;
      ours = true;
    }
  }
  unlock();
  return ours;
}

void ShmSlotTable::resign_controller(std::atomic<uint64_t> *handle) {
  if (!lock()) return;
  if (layout_->ctl_owner != 0 && layout_->ctl_owner == handle->load(std::memory_order_relaxed)) layout_->ctl_owner = 0;
  unlock();
}

bool ShmSlotTable::control_sample(uint64_t *bytes, int64_t *cap, uint32_t *inflight, uint32_t *queued,
                                  uint32_t *mt_demand, bool *auto_on, bool *mt_hold) {
  if (!lock()) return false;
  const ShmLayout &s = *layout_;
  *bytes = s.bytes_done;
  *cap = s.threshold;
  *inflight = s.mt + s.pt;
  *queued = s.queued_mt + s.queued_pt;
  *mt_demand = s.mt + s.queued_mt;
  *auto_on = s.auto_mode != 0;
  *mt_hold = s.mt_hold != 0;
  unlock();
  return true;
}

void ShmSlotTable::set_learned_cap(int64_t k, bool hold_mts) {
  if (!lock()) return;
  if (layout_->auto_mode && k >= 1 && k <= kMaxThreshold) {
    layout_->threshold = k;
    layout_->mt_hold = hold_mts;
    Policy{*layout_}.promote();
  }
  unlock();
}

void ShmSlotTable::store_curve(const std::vector<std::pair<int, double>> &curve) {
  if (!lock()) return;
  for (double &v : layout_->curve_mibps) v = 0;
  for (const auto &[k, mibps] : curve)
    if (k >= 1 && k <= kCurveMax) layout_->curve_mibps[k] = mibps;
  unlock();
}

namespace {

// Host names come from the segment: printable ASCII only, so status output (and its
// JSON) stays well-formed whatever was written there.
std::string printable(const char *text, size_t max) {
  std::string out(text, strnlen(text, max));
  for (char &c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  return out;
}

}  // namespace

bool ShmSlotTable::snapshot(CoordinatorStatus *out, std::string *error) {
  if (!lock()) {
    if (error) *error = "the lock of " + name_ + " is held by a process that does not let go";
    return false;
  }
  ShmLayout &s = *layout_;
  Policy p{s};
  if (p.reap()) p.promote();
  out->backend = "shm";
  out->threshold = s.threshold;
  out->mt_inflight = s.mt;
  out->pt_inflight = s.pt;
  out->queued_mt = s.queued_mt;
  out->queued_pt = s.queued_pt;
  out->max_inflight_seen = s.max_inflight_seen;
  out->processes = p.live_processes();
  out->holders.clear();
  for (uint32_t i = 0; i < p.holder_bound(); ++i) {
    const HolderEntry &h = s.holders[i];
    if (!h.ticket.load(std::memory_order_relaxed) || !p.proc_entry_valid(h.proc)) continue;
    HolderInfo info;
    const ProcEntry &pe = s.procs[h.proc];
    info.host = printable(pe.host, sizeof pe.host);
    info.pid = pe.pid;
    info.cls = h.cls == static_cast<uint8_t>(IoClass::MT) ? IoClass::MT : IoClass::PT;
    info.lead = h.lead;
    info.yield_requested = h.yield.load(std::memory_order_relaxed) != 0;
    out->holders.push_back(info);
  }
  out->auto_threshold = s.auto_mode != 0;
  out->mt_hold = s.mt_hold != 0;
  out->controller_host.clear();
  out->controller_pid = 0;
  if (s.ctl_owner != 0 && p.proc_alive(id_index(s.ctl_owner), id_gen(s.ctl_owner)) && s.ctl_deadline_ms >= now_ms()) {
    const ProcEntry &pe = s.procs[id_index(s.ctl_owner)];
    out->controller_host = printable(pe.host, sizeof pe.host);
    out->controller_pid = pe.pid;
  }
  out->curve.clear();
  for (int k = 1; k <= kCurveMax; ++k)
    if (std::isfinite(s.curve_mibps[k]) && s.curve_mibps[k] > 0 && s.curve_mibps[k] < 1e12)
      out->curve.emplace_back(k, s.curve_mibps[k]);
  unlock();
  return true;
}

void ShmSlotTable::hold_lock_for_test(int hold_ms) {
  if (!lock()) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  unlock();
}

bool ShmSlotTable::forge_for_test(const std::string &kind) {
  ShmLayout &s = *layout_;
  if (kind == "bounds") {
    s.holder_hw = s.waiter_hw = s.proc_hw = s.holder_hint = 0xFFFFFFFFu;
  } else if (kind == "phantoms") {
    // A process entry with a pid that is always alive (init) and a lease as long as any,
    // owning 1000 PT slots.
    ProcEntry &pe = s.procs[kMaxProcs - 1];
    pe.gen = 77;
    pe.pid = 1;
    pe.pidns = own_pid_namespace();
    pe.lease_deadline_ms.store(now_ms() + kMaxLeaseMs, std::memory_order_relaxed);
    for (uint32_t i = 0; i < 1000; ++i) {
      HolderEntry &h = s.holders[kMaxHolders - 1 - i];
      h.proc = kMaxProcs - 1;
      h.cls = static_cast<uint8_t>(IoClass::PT);
      h.ticket.store(make_id(1, kMaxHolders - 1 - i), std::memory_order_relaxed);
    }
    s.holder_hw = kMaxHolders;
    s.proc_hw = kMaxProcs;
    s.pt += 1000;
    s.threshold = 1;
  } else if (kind == "holder-index") {
    for (uint32_t i = 0; i < 8; ++i) {
      s.holders[i].proc = 0xFFFFFFFFu;
      s.holders[i].ticket.store(make_id(1, i), std::memory_order_relaxed);
    }
    s.holder_hw = std::max<uint32_t>(s.holder_hw, 8);
  } else if (kind == "counters") {
    s.mt = s.pt = s.queued_mt = s.queued_pt = 0xFFFFFFFFu;
  } else if (kind == "magic") {
    s.magic = 0;
  } else if (kind == "threshold") {
    s.threshold = 0;
  } else {
    return false;
  }
  return true;
}

}  // namespace ppios
