// Shared-memory slot table: the whole node-local scheduling policy lives here.
//
// Locking: one process-shared robust mutex (ShmLayout::mutex) guards every field of the
// segment (including the controller lease, the completed-bytes counter and the learned
// curve of PPIOS_THRESHOLD=auto) except the atomics read without it (HolderEntry::ticket and ::yield for
// yield_requested(), WaiterEntry::granted as the futex word, ProcEntry::lease_deadline_ms).
// It is the only lock in this file; nothing else is taken while it is held. A process
// killed while holding it leaves EOWNERDEAD, after which the counters are recomputed
// from the tables (they are the only derived state).
//
// Waiters sleep on a futex in their own WaiterEntry, and whoever frees a slot hands it to
// the next waiter before waking it, so a wake-up cannot be lost and nobody races for a
// slot after waking. Sleeps are bounded so a waiter also notices dead holders itself.
#include "ShmSlotTable.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/futex.h>
#include <new>
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
constexpr uint64_t kMagic = 0x3230434f53505050ULL;  // "PPPSOC02"
constexpr const char *kSegmentPrefix = "/ppios-coord-v2.";
constexpr uint32_t kMaxProcs = 1024;
constexpr uint32_t kMaxHolders = 4096;
constexpr uint32_t kMaxWaiters = 4096;
constexpr uint32_t kIndexBits = 16;
constexpr int kCurveMax = 256;  // learned B(k) is kept for k = 1..kCurveMax  // ids are (generation << 16) | (index + 1)

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
};

struct WaiterEntry {
  uint64_t id;  // 0: free
  uint32_t proc;
  uint8_t cls;
  uint8_t throttle;
  uint64_t lead;
  uint64_t seq;                    // arrival order
  std::atomic<uint32_t> granted;   // futex word: 0 waiting, 1 granted
  uint64_t ticket;                 // valid once granted
};

uint64_t make_id(uint64_t gen, uint32_t index) { return (gen << kIndexBits) | (index + 1); }
uint32_t id_index(uint64_t id) { return static_cast<uint32_t>(id & ((1u << kIndexBits) - 1)) - 1; }
uint64_t id_gen(uint64_t id) { return id >> kIndexBits; }

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // system-wide on a node, so leases compare across processes
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

uint64_t own_pid_namespace() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

void futex_wake(std::atomic<uint32_t> *word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait(std::atomic<uint32_t> *word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

}  // namespace

struct ShmLayout {
  uint64_t magic;
  uint64_t layout_size;
  std::atomic<uint32_t> ready;
  pthread_mutex_t mutex;
  int64_t threshold;  // -1: none stored
  uint32_t mt, pt, queued_mt, queued_pt;
  uint64_t next_gen, next_seq, max_inflight_seen;
  uint32_t holder_hw, waiter_hw;  // one past the highest entry ever used: scans stop there
  uint32_t holder_hint;
  // PPIOS_THRESHOLD=auto
  uint64_t bytes_done;        // completed bytes reported at release
  uint32_t auto_mode;         // 1: the controller may change the cap
  uint64_t ctl_owner;         // process handle of the controller, 0: none
  int64_t ctl_deadline_ms;
  double curve_mibps[kCurveMax + 1];  // index k; 0: not measured
  ProcEntry procs[kMaxProcs];
  HolderEntry holders[kMaxHolders];
  WaiterEntry waiters[kMaxWaiters];
};

namespace {

// Everything below runs with the table mutex held.
struct Policy {
  ShmLayout &s;

  bool no_cap() const { return s.threshold < 0; }
  bool mt_grantable(bool throttle) const {
    if (no_cap()) return true;
    int64_t total = static_cast<int64_t>(s.mt) + s.pt;
    if (total < s.threshold) return true;
    // Past the cap an MT only waits for PTs to yield; when MTs alone fill it, it proceeds
    // unless MT throttling was asked for.
    return !throttle && s.pt == 0;
  }
  bool pt_grantable() const { return no_cap() || static_cast<int64_t>(s.mt) + s.pt < s.threshold; }

  bool proc_alive(uint32_t index, uint64_t gen) const {
    return index < kMaxProcs && s.procs[index].gen == gen && gen != 0;
  }

  uint64_t grant(uint32_t proc, IoClass cls, uint64_t lead) {
    for (uint32_t n = 0; n < kMaxHolders; ++n) {
      uint32_t i = (s.holder_hint + n) % kMaxHolders;
      HolderEntry &h = s.holders[i];
      if (h.ticket.load(std::memory_order_relaxed) != 0) continue;
      uint64_t id = make_id(++s.next_gen, i);
      h.proc = proc;
      h.cls = static_cast<uint8_t>(cls);
      h.lead = lead;
      h.yield.store(0, std::memory_order_relaxed);
      h.ticket.store(id, std::memory_order_release);
      s.holder_hint = (i + 1) % kMaxHolders;
      s.holder_hw = std::max(s.holder_hw, i + 1);
      if (cls == IoClass::MT) ++s.mt; else ++s.pt;
      s.max_inflight_seen = std::max<uint64_t>(s.max_inflight_seen, s.mt + s.pt);
      return id;
    }
    return 0;
  }

  void free_holder(HolderEntry &h) {
    if (h.cls == static_cast<uint8_t>(IoClass::MT)) --s.mt; else --s.pt;
    h.ticket.store(0, std::memory_order_release);
    h.yield.store(0, std::memory_order_relaxed);
  }

  void free_waiter(WaiterEntry &w) {
    if (w.cls == static_cast<uint8_t>(IoClass::MT)) --s.queued_mt; else --s.queued_pt;
    w.id = 0;
  }

  // The waiter stops counting as queued here; its entry is freed when its thread collects
  // the ticket (poll) or its process is dropped.
  void hand_over(WaiterEntry &w, uint64_t ticket) {
    if (w.cls == static_cast<uint8_t>(IoClass::MT)) --s.queued_mt; else --s.queued_pt;
    w.ticket = ticket;
    w.granted.store(1, std::memory_order_release);
    futex_wake(&w.granted);
  }

  std::vector<uint32_t> waiters_in_order(IoClass cls) const {
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i < s.waiter_hw; ++i) {
      const WaiterEntry &w = s.waiters[i];
      if (w.id != 0 && w.granted.load(std::memory_order_relaxed) == 0 && w.cls == static_cast<uint8_t>(cls))
        out.push_back(i);
    }
    std::sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) { return s.waiters[a].seq < s.waiters[b].seq; });
    return out;
  }

  // Hands free slots to waiters: MTs first, in arrival order, then PTs while no MT waits.
  // A granted waiter stays in its entry (granted = 1) until its thread collects the ticket.
  void promote() {
    if (s.queued_mt + s.queued_pt == 0) return;
    uint32_t mt_left = 0;
    for (uint32_t i : waiters_in_order(IoClass::MT)) {
      WaiterEntry &w = s.waiters[i];
      uint64_t t = mt_grantable(w.throttle) ? grant(w.proc, IoClass::MT, 0) : 0;
      if (t) hand_over(w, t); else ++mt_left;
    }
    if (mt_left == 0) {
      for (uint32_t i : waiters_in_order(IoClass::PT)) {
        if (!pt_grantable()) break;
        WaiterEntry &w = s.waiters[i];
        uint64_t t = grant(w.proc, IoClass::PT, w.lead);
        if (!t) break;
        hand_over(w, t);
      }
    }
    request_yields();
  }

  // Asks enough PT holders to yield that every waiting MT can run: the waiting MT's own
  // process's PT first (it competes with that MT for the same process anyway), otherwise
  // the PT furthest ahead of its MT (its data is needed last).
  void request_yields() {
    if (s.pt == 0) return;
    std::vector<uint32_t> mts = waiters_in_order(IoClass::MT);
    if (mts.empty()) return;
    int64_t total = static_cast<int64_t>(s.mt) + s.pt;
    int64_t need = no_cap() ? 0 : total - s.threshold + static_cast<int64_t>(mts.size());
    need = std::min<int64_t>(need, s.pt);
    int64_t flagged = 0;
    for (uint32_t i = 0; i < s.holder_hw; ++i) {
      const HolderEntry &h = s.holders[i];
      if (h.ticket.load(std::memory_order_relaxed) && h.cls == static_cast<uint8_t>(IoClass::PT) &&
          h.yield.load(std::memory_order_relaxed))
        ++flagged;
    }
    for (size_t k = static_cast<size_t>(std::max<int64_t>(flagged, 0)); k < mts.size() && flagged < need; ++k) {
      uint32_t mt_proc = s.waiters[mts[k]].proc;
      HolderEntry *best = nullptr;
      bool best_local = false;
      for (uint32_t i = 0; i < s.holder_hw; ++i) {
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

  // Drops processes whose lease ran out or whose pid is gone, with their slots and waiters.
  bool reap() {
    int64_t now = now_ms();
    uint64_t ns = own_pid_namespace();
    bool freed = false;
    for (uint32_t p = 0; p < kMaxProcs; ++p) {
      ProcEntry &pe = s.procs[p];
      if (pe.gen == 0) continue;
      bool expired = pe.lease_deadline_ms.load(std::memory_order_relaxed) < now;
      bool gone = ns != 0 && pe.pidns == ns && kill(pe.pid, 0) != 0 && errno == ESRCH;
      if (!expired && !gone) continue;
      drop_process(p);
      freed = true;
    }
    return freed;
  }

  void drop_process(uint32_t p) {
    for (uint32_t i = 0; i < s.holder_hw; ++i) {
      HolderEntry &h = s.holders[i];
      if (h.ticket.load(std::memory_order_relaxed) && h.proc == p) free_holder(h);
    }
    for (uint32_t i = 0; i < s.waiter_hw; ++i) {
      WaiterEntry &w = s.waiters[i];
      if (w.id == 0 || w.proc != p) continue;
      if (w.granted.load(std::memory_order_relaxed)) {
        // Granted but never collected: the ticket was already counted in a holder entry
        // (freed above); just forget the waiter.
        w.id = 0;
      } else {
        free_waiter(w);
      }
      futex_wake(&w.granted);
    }
    s.procs[p].gen = 0;
  }

  // Recomputes the counters after a process died inside the critical section.
  void repair() {
    s.mt = s.pt = s.queued_mt = s.queued_pt = 0;
    for (uint32_t i = 0; i < s.holder_hw; ++i) {
      const HolderEntry &h = s.holders[i];
      if (!h.ticket.load(std::memory_order_relaxed)) continue;
      if (h.cls == static_cast<uint8_t>(IoClass::MT)) ++s.mt; else ++s.pt;
    }
    for (uint32_t i = 0; i < s.waiter_hw; ++i) {
      const WaiterEntry &w = s.waiters[i];
      if (w.id == 0 || w.granted.load(std::memory_order_relaxed)) continue;
      if (w.cls == static_cast<uint8_t>(IoClass::MT)) ++s.queued_mt; else ++s.queued_pt;
    }
  }

  uint64_t register_process(int lease_ms) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      for (uint32_t p = 0; p < kMaxProcs; ++p) {
        ProcEntry &pe = s.procs[p];
        if (pe.gen != 0) continue;
        pe.gen = ++s.next_gen;
        pe.pid = static_cast<int32_t>(getpid());
        pe.pidns = own_pid_namespace();
        gethostname(pe.host, sizeof pe.host);
        pe.host[sizeof pe.host - 1] = 0;
        pe.lease_deadline_ms.store(now_ms() + lease_ms, std::memory_order_relaxed);
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

std::string ShmSlotTable::segment_name(const std::string &target) {
  // Keep the name readable; add a hash when characters had to be replaced so that two
  // targets never share a segment.
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
  return kSegmentPrefix + clean;
}

std::unique_ptr<ShmSlotTable> ShmSlotTable::open(const std::string &target, bool create, std::string *error) {
  const std::string name = segment_name(target);
  auto fail = [&](const std::string &what) -> std::unique_ptr<ShmSlotTable> {
    if (error) *error = "ppios: shm coordinator segment " + name + ": " + what;
    return nullptr;
  };
  bool creator = false;
  int fd = -1;
  if (create) {
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
    creator = fd >= 0;
    if (fd < 0 && errno != EEXIST) return fail(strerror(errno));
  }
  if (fd < 0) {
    fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
      if (errno == ENOENT && !create) {
        if (error) *error = "";
        return nullptr;
      }
      return fail(strerror(errno));
    }
  }
  if (creator) {
    fchmod(fd, 0666);  // processes of other users on the node share the cap too
    if (ftruncate(fd, sizeof(ShmLayout)) != 0) {
      int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      return fail(std::string("ftruncate: ") + strerror(e));
    }
  } else {
    // The creator may still be sizing the segment.
    struct stat st;
    int64_t deadline = now_ms() + 2000;
    while (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) < sizeof(ShmLayout) && now_ms() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != sizeof(ShmLayout)) {
      close(fd);
      return fail("has an unexpected size (an older ppios?); run `ppios-coord reset` when no job uses it");
    }
  }
  void *mem = mmap(nullptr, sizeof(ShmLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return fail(std::string("mmap: ") + strerror(errno));
  auto *layout = static_cast<ShmLayout *>(mem);
  if (creator) {
    // ftruncate zero-filled the segment, which is a valid empty state for every table.
    new (layout) ShmLayout;
    layout->magic = kMagic;
    layout->layout_size = sizeof(ShmLayout);
    layout->threshold = -1;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&layout->mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    layout->ready.store(1, std::memory_order_release);
  } else {
    int64_t deadline = now_ms() + 2000;
    while (layout->ready.load(std::memory_order_acquire) == 0 && now_ms() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (layout->ready.load(std::memory_order_acquire) == 0 || layout->magic != kMagic ||
        layout->layout_size != sizeof(ShmLayout)) {
      munmap(mem, sizeof(ShmLayout));
      return fail("is not initialised or from another ppios version; run `ppios-coord reset` when no job uses it");
    }
  }
  return std::unique_ptr<ShmSlotTable>(new ShmSlotTable(layout));
}

bool ShmSlotTable::unlink(const std::string &target, std::string *error) {
  std::string name = segment_name(target);
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
    if (error) *error = "ppios: cannot remove " + name + ": " + strerror(errno);
    return false;
  }
  return true;
}

ShmSlotTable::ShmSlotTable(ShmLayout *layout) : layout_(layout) {}

ShmSlotTable::~ShmSlotTable() { munmap(layout_, sizeof(ShmLayout)); }

void ShmSlotTable::lock() const {
  int rc = pthread_mutex_lock(&layout_->mutex);
  if (rc == EOWNERDEAD) {
    Policy{*layout_}.repair();
    pthread_mutex_consistent(&layout_->mutex);
  }
}

void ShmSlotTable::unlock() const { pthread_mutex_unlock(&layout_->mutex); }

bool ShmSlotTable::register_process(int lease_ms, std::atomic<uint64_t> *handle) {
  lock();
  uint64_t h = Policy{*layout_}.register_process(lease_ms);
  handle->store(h, std::memory_order_relaxed);
  unlock();
  return h != 0;
}

void ShmSlotTable::renew(int lease_ms, std::atomic<uint64_t> *handle) {
  lock();
  Policy p{*layout_};
  if (p.reap()) p.promote();
  uint32_t index;
  if (p.ensure_registered(handle, lease_ms, &index))
    layout_->procs[index].lease_deadline_ms.store(now_ms() + lease_ms, std::memory_order_relaxed);
  unlock();
}

void ShmSlotTable::unregister(std::atomic<uint64_t> *handle) {
  lock();
  Policy p{*layout_};
  uint64_t h = handle->load(std::memory_order_relaxed);
  if (h != 0 && p.proc_alive(id_index(h), id_gen(h))) {
    p.drop_process(id_index(h));
    p.promote();
  }
  handle->store(0, std::memory_order_relaxed);
  unlock();
}

ShmSlotTable::Outcome ShmSlotTable::acquire_or_enqueue(std::atomic<uint64_t> *handle, int lease_ms,
                                                       const Request &r, uint64_t *ticket, uint64_t *waiter_id) {
  lock();
  ShmLayout &s = *layout_;
  Policy p{s};
  uint32_t proc;
  if (!p.ensure_registered(handle, lease_ms, &proc)) {
    unlock();
    return Outcome::TableFull;
  }
  bool grantable = r.cls == IoClass::MT ? p.mt_grantable(r.mt_throttle)
                                        : p.pt_grantable() && s.queued_mt == 0 && s.queued_pt == 0;
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
    w.id = make_id(++s.next_gen, i);
    w.proc = proc;
    w.cls = static_cast<uint8_t>(r.cls);
    w.throttle = r.mt_throttle;
    w.lead = r.lead;
    w.seq = ++s.next_seq;
    w.ticket = 0;
    w.granted.store(0, std::memory_order_relaxed);
    s.waiter_hw = std::max(s.waiter_hw, i + 1);
    if (r.cls == IoClass::MT) ++s.queued_mt; else ++s.queued_pt;
    *waiter_id = w.id;
    // A dead holder may be what blocks us; look before sleeping.
    p.reap();
    p.promote();
    unlock();
    return Outcome::Queued;
  }
  unlock();
  return Outcome::TableFull;
}

void ShmSlotTable::wait(uint64_t waiter_id, int timeout_ms) {
  WaiterEntry &w = layout_->waiters[id_index(waiter_id)];
  futex_wait(&w.granted, 0, timeout_ms);
}

bool ShmSlotTable::poll(uint64_t waiter_id, uint64_t *ticket, bool *lost) {
  lock();
  ShmLayout &s = *layout_;
  WaiterEntry &w = s.waiters[id_index(waiter_id)];
  *lost = false;
  bool done = false;
  if (w.id != waiter_id) {
    *lost = true;
  } else if (w.granted.load(std::memory_order_acquire)) {
    *ticket = w.ticket;
    w.id = 0;  // counted as a holder since the hand-over; the waiter entry is just freed
    done = true;
  } else {
    Policy p{s};
    if (p.reap()) p.promote();
    else p.request_yields();  // the cap may have been lowered or a flagged PT finished
    if (w.id != waiter_id) {
      *lost = true;
    } else if (w.granted.load(std::memory_order_acquire)) {
      *ticket = w.ticket;
      w.id = 0;
      done = true;
    }
  }
  unlock();
  return done;
}

void ShmSlotTable::release(uint64_t ticket, uint64_t bytes) {
  if (ticket == 0) return;
  uint32_t i = id_index(ticket);
  if (i >= kMaxHolders) return;
  lock();
  HolderEntry &h = layout_->holders[i];
  if (h.ticket.load(std::memory_order_relaxed) == ticket) {
    layout_->bytes_done += bytes;
    Policy p{*layout_};
    p.free_holder(h);
    p.promote();
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
  lock();
  if (layout_->threshold < 0 && wanted >= 0) {
    layout_->threshold = wanted;
    Policy{*layout_}.promote();
  }
  int64_t stored = layout_->threshold;
  unlock();
  return stored;
}

void ShmSlotTable::set_threshold(int64_t n) {
  lock();
  layout_->threshold = n < 0 ? -1 : n;
  layout_->auto_mode = 0;
  Policy{*layout_}.promote();
  unlock();
}

int64_t ShmSlotTable::enable_auto() {
  lock();
  layout_->auto_mode = 1;
  if (layout_->threshold < 1) {
    layout_->threshold = 1;
    Policy{*layout_}.promote();
  }
  int64_t cap = layout_->threshold;
  unlock();
  return cap;
}

bool ShmSlotTable::lead_controller(std::atomic<uint64_t> *handle, int lease_ms) {
  lock();
  ShmLayout &s = *layout_;
  Policy p{s};
  uint32_t me;
  bool ours = false;
  if (p.ensure_registered(handle, lease_ms, &me)) {
    uint64_t mine = handle->load(std::memory_order_relaxed);
    uint64_t owner = s.ctl_owner;
    bool owner_live = owner != 0 && p.proc_alive(id_index(owner), id_gen(owner)) && s.ctl_deadline_ms >= now_ms();
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
  lock();
  if (layout_->ctl_owner != 0 && layout_->ctl_owner == handle->load(std::memory_order_relaxed)) layout_->ctl_owner = 0;
  unlock();
}

void ShmSlotTable::control_sample(uint64_t *bytes, int64_t *cap, uint32_t *inflight, uint32_t *queued, bool *auto_on) {
  lock();
  const ShmLayout &s = *layout_;
  *bytes = s.bytes_done;
  *cap = s.threshold;
  *inflight = s.mt + s.pt;
  *queued = s.queued_mt + s.queued_pt;
  *auto_on = s.auto_mode != 0;
  unlock();
}

void ShmSlotTable::set_learned_cap(int64_t k) {
  lock();
  if (layout_->auto_mode && k >= 1) {
    layout_->threshold = k;
    Policy{*layout_}.promote();
  }
  unlock();
}

void ShmSlotTable::store_curve(const std::vector<std::pair<int, double>> &curve) {
  lock();
  for (double &v : layout_->curve_mibps) v = 0;
  for (const auto &[k, mibps] : curve)
    if (k >= 1 && k <= kCurveMax) layout_->curve_mibps[k] = mibps;
  unlock();
}

void ShmSlotTable::snapshot(CoordinatorStatus *out) {
  lock();
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
  out->processes = 0;
  for (uint32_t i = 0; i < kMaxProcs; ++i) out->processes += s.procs[i].gen != 0;
  out->holders.clear();
  for (uint32_t i = 0; i < s.holder_hw; ++i) {
    const HolderEntry &h = s.holders[i];
    if (!h.ticket.load(std::memory_order_relaxed)) continue;
    HolderInfo info;
    const ProcEntry &pe = s.procs[h.proc];
    info.host = pe.host;
    info.pid = pe.pid;
    info.cls = static_cast<IoClass>(h.cls);
    info.lead = h.lead;
    info.yield_requested = h.yield.load(std::memory_order_relaxed) != 0;
    out->holders.push_back(info);
  }
  out->auto_threshold = s.auto_mode != 0;
  out->controller_host.clear();
  out->controller_pid = 0;
  if (s.ctl_owner != 0 && p.proc_alive(id_index(s.ctl_owner), id_gen(s.ctl_owner)) && s.ctl_deadline_ms >= now_ms()) {
    out->controller_host = s.procs[id_index(s.ctl_owner)].host;
    out->controller_pid = s.procs[id_index(s.ctl_owner)].pid;
  }
  out->curve.clear();
  for (int k = 1; k <= kCurveMax; ++k)
    if (s.curve_mibps[k] > 0) out->curve.emplace_back(k, s.curve_mibps[k]);
  unlock();
}

}  // namespace ppios
