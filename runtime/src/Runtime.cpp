#include "Runtime.h"

#include "GlibcStream.h"

#include <malloc.h>
#include <sys/resource.h>

#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "Clock.h"
#include "DetachedThread.h"
#include "ErrnoGuard.h"
#include "ThreadState.h"
#include "MpiTypes.h"
#include "OutputFile.h"
#include "ppios/ppios.h"

namespace ppios {
namespace {

Runtime *g_runtime = nullptr;  // created once, never destroyed: the PT may outlive main()
thread_local int t_trace_tid = kTraceMT;

// How long shutdown waits, silently, for the PT and WTs to notice the stop before it
// writes the outputs without them: they only ever touch the never-freed runtime, and
// exit must never be delayed by a PT (a stuck slice is ended by exit itself).
constexpr auto kStopGrace = std::chrono::milliseconds(100);

// CPU time of the calling thread, 0 if unknown.
uint64_t thread_cpu_ns() {
  struct timespec cpu{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) != 0) return 0;
  return static_cast<uint64_t>(cpu.tv_sec) * 1000000000u + static_cast<uint64_t>(cpu.tv_nsec);
}

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

}  // namespace

void Runtime::load() {
  if (g_runtime != nullptr) return;
  Config config;
  std::string error;
  if (!Config::parse([](const char *name) { return std::getenv(name); }, &config, &error)) {
    std::fprintf(stderr, "ppios: %s\n", error.c_str());
    std::exit(2);
  }
  g_runtime = new Runtime(config);
  // The PT's descriptors take high numbers (PtResources::adopt_fd). Growing the
  // descriptor table there once the process has threads waits for an RCU grace period
  // (milliseconds, on the PT's path); grown now, while the process has one thread, it
  // costs nothing later.
  if (config.mode != Mode::Off) {
    int probe = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, PtResources::high_fd_base());
    if (probe >= 0) close(probe);
  }
  // A child forked without exec has none of the parent's threads (no PT) and may hold
  // copies of runtime locks that were held at the fork: everything passes straight
  // through in it, and it never writes the parent's statistics or trace.
  pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true, std::memory_order_relaxed); });
  std::atexit([] {
    if (!g_forked_child.load(std::memory_order_relaxed)) g_runtime->shutdown();
  });
}

Runtime &Runtime::get() {
  if (g_runtime == nullptr) load();  // only if the library constructor did not run
  return *g_runtime;
}

Runtime::Runtime(const Config &config)
    : config_(config),
      start_ns_(now_ns()),
      cache_(config.cache_bytes),
      backoff_(config.backoff && config.mode != Mode::Off),
      scheduler_(config.mode == Mode::Intra || config.mode == Mode::PPIOS ||
                     config.mode == Mode::PPIOSStrict,
                 config.mode == Mode::PPIOS ? config.pt_readers : 1),
      trace_(config.trace_prefix) {
  cache_.set_free_observer([this](const FileKey &key, bool used) {
    count_backoff(backoff_.record_entry(key, used));
  });
  if (config.mode == Mode::PPIOS || config.mode == Mode::PPIOSStrict) {
    std::string error;
    coordinator_ = make_coordinator(config.coordinator, &error);
    if (!coordinator_) {
      std::fprintf(stderr, "ppios: %s\n", error.c_str());
      std::exit(2);
    }
  } else {
    coordinator_ = make_unlimited_coordinator();
  }
}

// ------------------------------------------------------------------ main thread

void MtStorageAccess::take_token(const uint64_t *claim_seq) {
  if (token_held_) return;
  token_held_ = true;
  if (claim_seq) rt_.scheduler_.acquire_claim(*claim_seq, &token_);
  else rt_.scheduler_.acquire_mt(&token_);
  if (rt_.scheduler_.enabled()) {
    rt_.stats_.mt_token_wait_ns += token_.granted_ns - token_.asked_ns;
    rt_.trace_.event("mt_token_wait", kTraceMT, token_.asked_ns, token_.granted_ns, nullptr, -1, -1);
  }
}

void MtStorageAccess::acquire() {
  if (slot_held_ || exempt_) return;
  ErrnoGuard errno_guard;
  if (!rt_.work_conserving()) take_token();
  slot_held_ = true;
  slot_asked_ns_ = now_ns();
  slot_ = rt_.coordinator_->acquire(IoClass::MT, 0);
  slot_granted_ns_ = now_ns();
  rt_.stats_.mt_slot_wait_ns += slot_granted_ns_ - slot_asked_ns_;
  storage_begin_ns_ = rt_.trace_.enabled() ? now_ns() : 0;
}

void MtStorageAccess::claim_in_flight(uint64_t seq) {
  ErrnoGuard errno_guard;
  if (rt_.work_conserving()) take_token(&seq);
  else acquire();
}

void MtStorageAccess::end_claim() {
  if (!rt_.work_conserving() || !token_held_) return;
  token_held_ = false;
  rt_.scheduler_.release(&token_);
}

void MtStorageAccess::release() {
  // After the program's call: its errno stands (a futex wake of the slot table or the
  // token may fail with EAGAIN when a waiter moved on meanwhile).
  ErrnoGuard errno_guard;
  if (slot_held_) {
    slot_held_ = false;
    const uint64_t bytes = slot_.bytes;
    // Storage: from the grant to the end of the program's call (the caller releases
    // right after it), told apart from the slot's own release, which may be a round trip.
    if (rt_.trace_.enabled())
      rt_.trace_.event("storage", kTraceMT, storage_begin_ns_, now_ns(), nullptr, -1,
                       static_cast<int64_t>(bytes));
    rt_.coordinator_->release(slot_);
    if (rt_.trace_.enabled())
      rt_.trace_.event("slot", kTraceMT, slot_asked_ns_, now_ns(), nullptr, -1,
                       static_cast<int64_t>(bytes), -1, "slot_wait_ns",
                       static_cast<int64_t>(slot_granted_ns_ - slot_asked_ns_));
  }
  if (token_held_) {
    token_held_ = false;
    rt_.scheduler_.release(&token_);
  }
}

ssize_t Runtime::mt_read(const CachedFile *file, off_t offset, size_t length, char *buffer,
                         const std::function<ssize_t(size_t, MtStorageAccess &)> &complete) {
  const int saved_errno = errno;
  const uint64_t seq = mt_started_.fetch_add(1, std::memory_order_acq_rel) + 1;
  notify_progress();  // a PT may wait for this start (PPIOS_PF_AFTER_SYNC)
  const uint64_t begin = now_ns();
  size_t from_cache = 0;
  ssize_t result;
  {
    MtStorageAccess storage(*this);
    if (file != nullptr && length > 0 && caching()) {
      InFlightPolicy policy = mode() == Mode::PP ? InFlightPolicy::Wait : InFlightPolicy::NeedToken;
      ServeResult served = cache_.serve(file->key, file->stamp, offset, length, buffer, policy);
      if (served.needs_token) {
        // A prefetch of these bytes is in flight: claim it (waiting for at most its
        // current sub-read) and use what it has fetched so far.
        storage.claim_in_flight(served.in_flight_seq);
        served = cache_.serve(file->key, file->stamp, offset, length, buffer, InFlightPolicy::Claim);
        storage.end_claim();
      }
      from_cache = served.bytes;
    }
    errno = saved_errno;  // the call's errno is the original call's, not our probes'
    result = complete(from_cache, storage);
    if (result > 0 && static_cast<size_t>(result) > from_cache) storage.add_bytes(static_cast<size_t>(result) - from_cache);
  }  // the slot's release keeps the call's errno
  ErrnoGuard call_errno;  // and so does the bookkeeping below
  const uint64_t end = now_ns();
  stats_.mt_read_calls++;
  stats_.mt_read_wait_ns += end - begin;
  if (result >= 0) {
    stats_.mt_read_bytes += static_cast<uint64_t>(result);
    stats_.hit_bytes += std::min<uint64_t>(from_cache, static_cast<uint64_t>(result));
    if (t_thread.call_site != nullptr && !config_.stats_path.empty())
      sites_.add(t_thread.call_site, static_cast<uint64_t>(result),
                 std::min<uint64_t>(from_cache, static_cast<uint64_t>(result)), end - begin);
  }
  trace_.event(from_cache == length && length > 0 ? "read (hit)" : from_cache > 0 ? "read (partial)" : "read",
               kTraceMT, begin, end, file ? &file->key : nullptr, offset, result,
               static_cast<int64_t>(seq), "cached", static_cast<int64_t>(from_cache), t_thread.call_site);
  mt_done(seq);
  return result;
}

ssize_t Runtime::mt_write(const FileKey *file, off_t offset, size_t length,
                          const std::function<ssize_t()> &do_write,
                          const std::function<bool(FileStamp *)> &refresh, bool storage_io) {
  const int saved_errno = errno;
  const uint64_t seq = mt_started_.fetch_add(1, std::memory_order_acq_rel) + 1;
  notify_progress();
  const uint64_t begin = now_ns();
  ssize_t result;
  {
    MtStorageAccess storage(*this);
    if (!storage_io) storage.exempt();
    storage.acquire();
    if (file != nullptr && caching()) cache_.begin_write(*file, offset, length);
    errno = saved_errno;
    result = do_write();
    if (result > 0) storage.add_bytes(static_cast<uint64_t>(result));
    if (file != nullptr && caching()) {
      ErrnoGuard errno_guard;  // the write's errno, not the refresh's
      FileStamp stamp;
      bool known = refresh(&stamp);
      cache_.end_write(*file, offset, length, known ? &stamp : nullptr);
    }
  }  // the slot's release keeps the call's errno
  ErrnoGuard call_errno;  // and so does the bookkeeping below
  const uint64_t end = now_ns();
  stats_.mt_write_calls++;
  stats_.mt_write_wait_ns += end - begin;
  if (result > 0) stats_.mt_write_bytes += static_cast<uint64_t>(result);
  trace_.event("write", kTraceMT, begin, end, file, offset, result, static_cast<int64_t>(seq),
               nullptr, -1, t_thread.call_site);
  mt_done(seq);
  return result;
}

void Runtime::mt_done(uint64_t seq) {
  mt_completed_.store(seq, std::memory_order_release);
  if (!caching()) return;
  cache_.mt_progress(seq);
  notify_progress();
}

// A waiter stores its wake_at_* and then reads the progress counters; the MT stores a
// counter and then reads wake_at_*. With a full fence between each pair at least one
// of them sees the other's store: the waiter does not sleep, or the MT wakes it.
void Runtime::notify_progress() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (mt_started_.load(std::memory_order_relaxed) >= wake_at_start_.load(std::memory_order_relaxed) ||
      mt_completed_.load(std::memory_order_relaxed) >= wake_at_done_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(progress_mu_);
    progress_cv_.notify_all();
  }
}

void Runtime::wait_progress(const std::atomic<uint64_t> &progress, uint64_t target,
                            std::multiset<uint64_t> &waits, std::atomic<uint64_t> &wake_at) {
  if (progress.load(std::memory_order_acquire) >= target) return;
  std::unique_lock<std::mutex> lock(progress_mu_);
  auto mine = waits.insert(target);
  wake_at.store(*waits.begin(), std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  progress_cv_.wait(lock, [&] { return stopping() || progress.load(std::memory_order_acquire) >= target; });
  waits.erase(mine);
  wake_at.store(waits.empty() ? UINT64_MAX : *waits.begin(), std::memory_order_relaxed);
}

bool Runtime::mt_has_started(uint64_t seq) const {
  return mt_started_.load(std::memory_order_acquire) >= seq;
}

uint64_t Runtime::lead_of(uint64_t seq) const {
  uint64_t done = mt_completed_.load(std::memory_order_acquire);
  return seq > done ? seq - done : 0;
}

// ------------------------------------------------------------------ prefetch thread

namespace {
struct PtStart {
  void (*entry)(void *);
  std::vector<char> ctx;
};
}  // namespace

void Runtime::start_pt(void (*entry)(void *), const void *ctx, size_t ctx_size) {
  if (mode() == Mode::Off) return;
  mpi_type_sizes_init();
  {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (pt_started_ || stopping()) return;
    pt_started_ = true;
    pt_running_ = true;
    mt_tid_ = gettid();
    int finalized = 0;
    MPI_Finalized(&finalized);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }
  limit_thread_arenas();
  auto *start = new PtStart{entry, std::vector<char>(static_cast<const char *>(ctx),
                                                     static_cast<const char *>(ctx) + ctx_size)};
  std::lock_guard<std::mutex> lock(lifecycle_mu_);  // pt_thread_ is set before the PT ends
  // The PT (and the WTs it starts) take no asynchronous signal: the program's handlers
  // run on the program's threads, as without ppios. Faults stay deliverable for the
  // fault net. The mask is inherited at creation, so there is no window.
  sigset_t blocked, saved_mask;
  sigfillset(&blocked);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigdelset(&blocked, sig);
  pthread_sigmask(SIG_BLOCK, &blocked, &saved_mask);
  // Detached: shutdown() waits for it through pt_running_, with a time limit.
  const bool started = start_detached_thread(
      [this, start] {
        t_thread.role = ThreadRole::PT;
        t_trace_tid = kTracePT;
        PtStop why = run_pt_slice(start->entry, start->ctx.empty() ? nullptr : start->ctx.data());
        delete start;
        pt_ended(why);
      },
      0, &pt_thread_);
  pthread_sigmask(SIG_SETMASK, &saved_mask, nullptr);
  if (!started) {  // the program runs unprefetched, as in mode off
    delete start;
    pt_running_ = false;
    pt_stop_.store(static_cast<int>(PtStop::NoThread), std::memory_order_release);
  }
}

// Under an address-space limit (ulimit -v), the runtime's threads must not take address
// space the program may need: glibc gives every thread that allocates an arena of its own,
// reserving 64 MiB, and whichever thread gets there first wins. With a finite RLIMIT_AS the
// PT and the waiting threads share the existing arenas instead (M_ARENA_MAX, set before
// they exist; it changes where the program's later threads allocate, never what they get).
void Runtime::limit_thread_arenas() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    mallopt(M_ARENA_MAX, 1);
}

void Runtime::pt_ended(PtStop why) {
  PtResources::get().release_all(cache_);
  stats_.pt_cpu_ns = thread_cpu_ns();
  if (why == PtStop::Fault) stats_.pt_faults++;
  pt_stop_.store(static_cast<int>(why), std::memory_order_release);
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  pt_running_ = false;
  lifecycle_cv_.notify_all();
}

void Runtime::prefetch(int fd, const struct stat &st, off_t offset, size_t length,
                       size_t requested, uint64_t seq, unsigned flags) {
  if (mode() == Mode::Off || stopping()) return;
  if (length == 0 && !(flags & PPIOS_PF_AFTER_WRITE)) return;
  stats_.pt_prefetch_calls++;
  trace_.name_file(key_of(st), fd);
  if (flags & PPIOS_PF_AFTER_WRITE) {
    // Read after write: a waiting thread issues it once the MT has done every transfer
    // before `seq`; the PT itself runs on.
    std::unique_lock<std::mutex> lock(wt_mu_);
    // At most four jobs per waiting thread queue up. The PT waits for room, as it waits
    // for cache room, rather than dropping the prefetch: it is ahead of the MT, and the
    // queue drains as the MT does its writes (a program that writes a file and reads it
    // back had most of its read-back dropped). Without waiting threads (PPIOS_MAX_WT=0)
    // the prefetch is dropped.
    const size_t bound = 4 * static_cast<size_t>(config_.max_waiting_threads);
    if (bound > 0 && wt_jobs_.size() >= bound) {
      const uint64_t wait_begin = now_ns();
      wt_room_cv_.wait(lock, [&] { return wt_jobs_.size() < bound || stopping(); });
      stats_.pt_room_wait_ns += now_ns() - wait_begin;
    }
    if (stopping()) return;
    // A high number, like the PT's own: the program's open() calls keep their numbers.
    int copy = bound > 0 ? PtResources::get().dup_for_helper(fd) : -1;
    if (copy < 0) {
      stats_.wt_dropped++;
      return;
    }
    WaitingJob job{copy, offset, requested, seq, t_thread.pt_site};
    auto pos = std::find_if(wt_jobs_.begin(), wt_jobs_.end(),
                            [&](const WaitingJob &j) { return j.seq > seq; });
    wt_jobs_.insert(pos, job);
    // Every idle waiting thread may already be woken for a job still queued: count those.
    if (wt_jobs_.size() > static_cast<size_t>(wt_idle_) && wt_threads_ < config_.max_waiting_threads) {
      int index = wt_threads_++;
      if (!start_detached_thread([this, index] { waiting_thread_main(index); }, kHelperThreadStack)) {
        --wt_threads_;
        if (wt_threads_ == 0) {  // nobody will run the job: drop it (a later one may get a thread)
          wt_jobs_.erase(std::find_if(wt_jobs_.begin(), wt_jobs_.end(),
                                      [&](const WaitingJob &j) { return j.fd == copy; }));
          PtResources::get().close_helper_fd(copy);
          stats_.wt_dropped++;
          return;
        }
      }
    }
    wt_cv_.notify_one();
    return;
  }
  if (pt_uses_readers()) hand_to_reader(fd, key_of(st), stamp_of(st), offset, length, seq);
  else fetch(fd, key_of(st), stamp_of(st), offset, length, seq, t_trace_tid);
}

ssize_t Runtime::prefetch_copy(int fd, off_t offset, size_t count, uint64_t seq, unsigned flags,
                               char *buffer, bool *stopped) {
  size_t got = 0;
  struct stat st;
  *stopped = false;
  // Bytes another rank wrote before a synchronization the MT has not reached yet are
  // not in the file yet: wait for the MT to pass it, even in mode off.
  if (flags & PPIOS_PF_AFTER_SYNC) wait_for_mt_start(seq);
  if (flags & PPIOS_PF_AFTER_WRITE) wait_for_mt(seq);
  if ((flags & (PPIOS_PF_AFTER_SYNC | PPIOS_PF_AFTER_WRITE)) && stopping()) {
    *stopped = true;
    return -1;
  }
  if (mode() != Mode::Off && !stopping()) {
    stats_.pt_prefetch_calls++;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && offset >= 0 && offset < st.st_size) {
      trace_.name_file(key_of(st), fd);
      size_t length = std::min<size_t>(count, static_cast<size_t>(st.st_size - offset));
      got = fetch(fd, key_of(st), stamp_of(st), offset, length, seq, t_trace_tid, buffer);
    }
  }
  // Whatever the cache did not give us (no room, already cached, EOF moved), read directly.
  while (got < count) {
    ssize_t n = pread(fd, buffer + got, count - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return got > 0 ? static_cast<ssize_t>(got) : -1;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

void Runtime::wait_for_mt(uint64_t seq) {
  if (seq > 0) wait_progress(mt_completed_, seq - 1, done_waits_, wake_at_done_);
}

void Runtime::wait_for_mt_start(uint64_t seq) {
  wait_progress(mt_started_, seq, start_waits_, wake_at_start_);
}

void Runtime::hold_speculation(uint64_t seq) {
  if (seq <= kSpeculationWindow || mt_has_started(seq - kSpeculationWindow)) return;
  uint64_t started = now_ns();
  wait_for_mt_start(seq - kSpeculationWindow / 2);
  stats_.pt_speculation_wait_ns += now_ns() - started;
}

void Runtime::note_mt_stream_end(const FileKey &key, off_t end) {
  const uint64_t now = mt_started_.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(mt_streams_mu_);
  MtStreamProgress &p = mt_streams_[key];
  if (p.first_end < 0 || end < p.end) {  // the first top-up, or the stream went back
    p.first_end = end;
    p.first_transfer = now;
  }
  p.end = end;
  p.transfer = now;
}

off_t Runtime::mt_stream_end(const FileKey &key) {
  std::lock_guard<std::mutex> lock(mt_streams_mu_);
  auto it = mt_streams_.find(key);
  return it == mt_streams_.end() ? -1 : it->second.end;
}

uint64_t Runtime::mt_stream_transfer_at(const FileKey &key, off_t offset) {
  const uint64_t next = mt_started_.load(std::memory_order_acquire) + 1;
  std::lock_guard<std::mutex> lock(mt_streams_mu_);
  auto it = mt_streams_.find(key);
  if (it == mt_streams_.end()) return next + kSpeculationWindow;
  const MtStreamProgress &p = it->second;
  if (p.transfer <= p.first_transfer || p.end <= p.first_end) return next + kSpeculationWindow;
  const off_t per_transfer =
      std::max<off_t>(1, (p.end - p.first_end) / static_cast<off_t>(p.transfer - p.first_transfer));
  // The MT's stream asks for `offset` once it has consumed all but half a line buffer
  // before it; at the last top-up it had a full buffer, ending at p.end, unread.
  const off_t to_go = offset - p.end + static_cast<off_t>(kLineBufferBytes / 2);
  const uint64_t at = p.transfer + static_cast<uint64_t>(std::max<off_t>(0, to_go) / per_transfer);
  return std::max(next, at);
}

// PPIOS_STATS "pt_sites": one prefetch of the calling PT's or WT's current source line.
void Runtime::count_site(uint64_t bytes, bool late) {
  if (t_thread.pt_site != nullptr && !config_.stats_path.empty())
    sites_.add_prefetch(t_thread.pt_site, bytes, late);
}

void Runtime::count_backoff(BackoffReason why) {
  if (why == BackoffReason::None) return;
  stats_.pt_backoffs++;
  if (why == BackoffReason::Late) stats_.pt_backoff_late++;
  if (why == BackoffReason::Unused) stats_.pt_backoff_unused++;
}

// The back-off's CPU rule, on the PT thread, judged over windows of at least 50 ms. The
// PT's CPU costs the program when the cores are oversubscribed: then a CPU second it takes
// is one a main thread (its own, or another rank's) waits for. A window is bad when
//  - the MT spent at least a third of its runnable time waiting for a core (run-queue
//    wait, /proc/<pid>/task/<tid>/schedstat): the cores are oversubscribed;
//  - the PT and its readers used at least half as much CPU as the MT, and at least 5% of
//    the window;
//  - fewer than a quarter of the MT's bytes so far came from the cache (after 4 MT
//    reads): with more, the PT was measured to pay for its CPU (bench/never-slower,
//    latept at P=2).
// Two bad windows in a row stop the PT for good.
void Runtime::check_pt_cpu() {
  if (!config_.backoff || pt_backed_off() || mt_tid_ <= 0) return;
  const uint64_t now = now_ns();
  if (cpu_window_.wall_ns != 0 && now - cpu_window_.wall_ns < 50000000u) return;
  ErrnoGuard errno_guard;
  const uint64_t pt_cpu_now = thread_cpu_ns();
  if (pt_cpu_now == 0) return;
  char path[64], text[128];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", static_cast<int>(mt_tid_));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return;
  text[n] = '\0';
  unsigned long long mt_cpu = 0, mt_delay = 0;
  if (std::sscanf(text, "%llu %llu", &mt_cpu, &mt_delay) != 2) return;
  CpuWindow w;
  w.wall_ns = now;
  w.pt_ns = pt_cpu_now + stats_.pt_reader_cpu_ns.load(std::memory_order_relaxed);
  w.mt_cpu_ns = mt_cpu;
  w.mt_delay_ns = mt_delay;
  const CpuWindow last = cpu_window_;
  cpu_window_ = w;
  if (last.wall_ns == 0) return;  // the first look only starts a window
  const uint64_t wall = w.wall_ns - last.wall_ns, pt_cpu = w.pt_ns - last.pt_ns;
  const uint64_t cpu = w.mt_cpu_ns - last.mt_cpu_ns, delay = w.mt_delay_ns - last.mt_delay_ns;
  const bool oversubscribed = delay > 0 && 3 * delay >= cpu + delay;
  const bool costly = 2 * pt_cpu >= cpu && 20 * pt_cpu >= wall;
  const uint64_t calls = stats_.mt_read_calls.load();
  const uint64_t read_bytes = stats_.mt_read_bytes.load(), hit = stats_.hit_bytes.load();
  const bool paying = calls < 4 || 4 * hit >= read_bytes;
  if (!oversubscribed || !costly || paying) {
    cpu_bad_windows_ = 0;
    return;
  }
  if (++cpu_bad_windows_ < 2) return;
  stats_.pt_backoffs++;
  stats_.pt_backoff_cpu++;
  pt_backed_off_.store(true, std::memory_order_release);
}

size_t Runtime::fetch(int fd, const FileKey &key, const FileStamp &stamp, off_t offset,
                      size_t length, uint64_t seq, int trace_tid, char *copy_to) {
  CacheEntry *entry = begin_fetch(key, stamp, offset, length, seq, trace_tid);
  if (entry == nullptr) return 0;
  return mode() == Mode::PP ? fill_whole(entry, fd, key, offset, length, seq, trace_tid, copy_to)
                            : fill_in_subreads(entry, fd, key, offset, length, seq, trace_tid, copy_to);
}

CacheEntry *Runtime::begin_fetch(const FileKey &key, const FileStamp &stamp, off_t offset,
                                 size_t length, uint64_t seq, int trace_tid) {
  if (t_thread.role == ThreadRole::PT) check_pt_cpu();
  // The file is backed off: prefetching it has not paid off lately.
  if (backoff_.skip(key, seq, mt_started_.load(std::memory_order_acquire))) {
    stats_.pt_backoff_skips++;
    return nullptr;
  }
  // Too late: the MT has started this transfer itself (it reads what it does not find).
  if (mt_has_started(seq)) {
    stats_.pt_late++;
    count_site(0, true);
    count_backoff(backoff_.record_prefetch(key, true));
    return nullptr;
  }
  CacheEntry *entry = nullptr;
  uint64_t wait_begin = now_ns();
  ReserveResult reserved = cache_.reserve(key, stamp, offset, length, seq, &entry);
  uint64_t wait_end = now_ns();
  stats_.pt_room_wait_ns += wait_end - wait_begin;
  if (wait_end - wait_begin > 100000)
    trace_.event("room_wait", trace_tid, wait_begin, wait_end, &key, offset,
                 static_cast<int64_t>(length), static_cast<int64_t>(seq), nullptr, -1, nullptr,
                 t_thread.pt_site);
  if (reserved != ReserveResult::Reserved) {
    if (reserved != ReserveResult::Stopped) stats_.pt_skipped++;
    return nullptr;
  }
  return entry;
}

size_t Runtime::end_fetch(CacheEntry *entry, const FileKey &key, bool ok, uint64_t fetched,
                          bool late, char *copy_to) {
  size_t copied = copy_to ? cache_.copy_fetched(entry, copy_to) : 0;
  cache_.finish(entry, ok);
  count_backoff(backoff_.record_prefetch(key, late));
  count_site(fetched, late);
  return copied;
}

// Plain pre-execution prefetching (PPIOS_MODE=pp): the whole request at once, no scheduling.
size_t Runtime::fill_whole(CacheEntry *entry, int fd, const FileKey &key, off_t offset,
                           size_t length, uint64_t seq, int trace_tid, char *copy_to) {
  const char *src = t_thread.pt_site;  // the trace's "src" of this prefetch's events
  uint64_t begin = now_ns();
  size_t remaining = 0;
  char *dest;
  uint64_t fetched = 0;
  bool ok = true;
  while ((dest = cache_.fill_pointer(entry, &remaining)) != nullptr && remaining > 0) {
    off_t at = offset + static_cast<off_t>(length - remaining);
    const uint64_t io_begin = trace_.enabled() ? now_ns() : 0;
    ssize_t n = pread(fd, dest, remaining, at);
    if (trace_.enabled())
      trace_.event("storage", trace_tid, io_begin, now_ns(), &key, at, n, static_cast<int64_t>(seq),
                   nullptr, -1, nullptr, src);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    fetched += static_cast<uint64_t>(n);
    stats_.pt_read_bytes += static_cast<uint64_t>(n);
    if (!cache_.filled(entry, static_cast<size_t>(n))) break;
  }
  trace_.event("prefetch", trace_tid, begin, now_ns(), &key, offset, static_cast<int64_t>(length),
               static_cast<int64_t>(seq), nullptr, -1, nullptr, src);
  return end_fetch(entry, key, ok, fetched, false, copy_to);
}

// Scheduled prefetching: preemptible sub-reads, each under a share of the process I/O
// token; the system slot is kept across sub-reads until the MT or the coordinator wants
// it. The prefetcher never waits for the token while holding a slot, nor for a slot while
// holding the token: either could keep its own MT waiting for more than a sub-read.
size_t Runtime::fill_in_subreads(CacheEntry *entry, int fd, const FileKey &key, off_t offset,
                                 size_t length, uint64_t seq, int trace_tid, char *copy_to) {
  const char *src = t_thread.pt_site;  // the trace's "src" of this prefetch's events
  SlotTicket slot;
  uint64_t slot_asked = 0, slot_granted = 0;
  auto release_slot = [&] {
    if (!slot.valid()) return;
    const uint64_t bytes = slot.bytes;
    coordinator_->release(slot);
    if (trace_.enabled())
      trace_.event("slot", trace_tid, slot_asked, now_ns(), &key, -1, static_cast<int64_t>(bytes),
                   static_cast<int64_t>(seq), "slot_wait_ns",
                   static_cast<int64_t>(slot_granted - slot_asked), nullptr, src);
  };
  uint64_t fetched = 0;
  bool ok = true;
  for (;;) {
    IoScheduler::Turn turn(scheduler_, seq);
    if (!slot.valid()) {
      if (!turn.wait()) break;  // stopping
      // The MT may have claimed the entry or started its transfer while we waited: a
      // slot for it would only be given back (after waiting for it at a full cap).
      size_t left = 0;
      if (cache_.fill_pointer(entry, &left) == nullptr || left == 0 || mt_has_started(seq)) break;
      slot_asked = now_ns();
      slot = coordinator_->acquire(IoClass::PT, lead_of(seq));
      slot_granted = now_ns();
      stats_.pt_slot_wait_ns += slot_granted - slot_asked;
    }
    TokenTimes token;
    if (!turn.take(&token)) {
      release_slot();  // the MT (or a nearer prefetch) came first: wait without it
      if (stopping()) break;
      continue;
    }
    size_t remaining = 0;
    char *dest = cache_.fill_pointer(entry, &remaining);
    // Once the MT has started this transfer, fetching more only delays it: it takes what
    // is here and reads the rest itself.
    if (dest == nullptr || remaining == 0 || mt_has_started(seq)) {
      scheduler_.release(&token);
      break;
    }
    size_t chunk = std::min(remaining, config_.subread_bytes);
    off_t at = offset + static_cast<off_t>(length - remaining);
    ssize_t n;
    const uint64_t io_begin = trace_.enabled() ? now_ns() : 0;
    do n = pread(fd, dest, chunk, at);
    while (n < 0 && errno == EINTR);
    if (trace_.enabled())
      trace_.event("storage", trace_tid, io_begin, now_ns(), &key, at, n, static_cast<int64_t>(seq),
                   nullptr, -1, nullptr, src);
    bool wanted = n > 0 && cache_.filled(entry, static_cast<size_t>(n));
    if (n > 0) {
      stats_.pt_read_bytes += static_cast<uint64_t>(n);
      stats_.pt_subreads++;
      slot.bytes += static_cast<uint64_t>(n);
      fetched += static_cast<uint64_t>(n);
    }
    ok = n >= 0;
    bool more = wanted && static_cast<size_t>(n) == chunk && remaining > chunk;
    bool mt_wants = scheduler_.mt_waiting();
    bool told_to_yield = coordinator_->yield_requested(slot);
    if (!more || mt_wants || told_to_yield) {
      release_slot();
      if (more) stats_.pt_yields++;
    }
    scheduler_.release(&token);
    trace_.event("subread", trace_tid, token.granted_ns, token.released_ns, &key, at,
                 n, static_cast<int64_t>(seq), nullptr, -1, nullptr, src);
    if (!more) break;
  }
  release_slot();
  // Late: the MT started the transfer before a single byte of it was fetched.
  const bool late = fetched == 0 && mt_has_started(seq);
  return end_fetch(entry, key, ok, fetched, late, copy_to);
}

// ------------------------------------------------------------------ PT readers

bool Runtime::pt_uses_readers() const {
  return work_conserving() && config_.pt_readers > 1 && t_thread.role == ThreadRole::PT;
}

void Runtime::hand_to_reader(int fd, const FileKey &key, const FileStamp &stamp, off_t offset,
                             size_t length, uint64_t seq) {
  // The PT runs on while a reader is free: at most reader_fills_allowed() fills are handed
  // out. It waits before it reserves, so that an entry in flight always has a reader on it
  // (an MT that claims one waits for its sub-read in progress).
  {
    std::unique_lock<std::mutex> lock(readers_mu_);
    const uint64_t wait_begin = now_ns();
    for (;;) {
      if (stopping()) break;
      const size_t allowed = reader_fills_allowed(seq);
      if (reader_jobs_.size() + readers_busy_ < allowed) break;
      // A reader's end wakes us. Held back to one fill, the MT's progress may allow more
      // before that: look again soon.
      if (allowed < static_cast<size_t>(config_.pt_readers))
        readers_room_cv_.wait_for(lock, std::chrono::milliseconds(5));
      else
        readers_room_cv_.wait(lock);
    }
    stats_.pt_reader_wait_ns += now_ns() - wait_begin;
    if (stopping()) return;
  }
  // Reserved here, on the PT, so that entries are reserved in the program's order and the
  // PT (not a reader) waits for cache room. Only the PT hands out jobs, so the free
  // reader it waited for is still free.
  CacheEntry *entry = begin_fetch(key, stamp, offset, length, seq, t_trace_tid);
  if (entry == nullptr) return;
  // The reader reads through a copy of the descriptor: the slice may close its own
  // before the read is done. A high number, like the PT's own.
  int copy = PtResources::get().dup_for_helper(fd);
  if (copy < 0) {  // out of descriptors: read it here instead
    fill_in_subreads(entry, fd, key, offset, length, seq, t_trace_tid, nullptr);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    // Every idle reader may already be woken for a job still queued: count those.
    const bool needs_thread = reader_jobs_.size() + 1 > static_cast<size_t>(readers_idle_) &&
                              reader_threads_ < config_.pt_readers;
    const int index = reader_threads_;
    if (!needs_thread || start_detached_thread([this, index] { reader_main(index); }, kHelperThreadStack)) {
      if (needs_thread) ++reader_threads_;
      reader_jobs_.push_back(ReaderJob{copy, key, offset, length, seq, entry, t_thread.pt_site});
      readers_cv_.notify_one();
      return;
    }
  }
  // The system refused a reader thread: read it here, as with one reader.
  PtResources::get().close_helper_fd(copy);
  fill_in_subreads(entry, fd, key, offset, length, seq, t_trace_tid, nullptr);
}

// Every reader while the MT is at most pt_readers transfers behind the prefetch: the PT is
// not ahead, and one stream does not keep it ahead (E2 at P = 4: 10 MiB/s a stream against
// an MT that computes through 21 MiB/s). Further ahead, one fill at a time: the PT already
// keeps ahead, and more streams would only take bandwidth from others on the device,
// among them jobs the coordinator does not see (E3 at P = 1: two readers far ahead of the
// MT slowed a neighbour that does not prefetch by x1.28, for a gain of 3%).
size_t Runtime::reader_fills_allowed(uint64_t seq) const {
  return lead_of(seq) <= static_cast<uint64_t>(config_.pt_readers) ? static_cast<size_t>(config_.pt_readers) : 1;
}

void Runtime::reader_main(int index) {
  t_trace_tid = kTraceFirstReader + index;
  t_thread.role = ThreadRole::Reader;
  std::unique_lock<std::mutex> lock(readers_mu_);
  for (;;) {
    ++readers_idle_;
    readers_cv_.wait(lock, [&] { return stopping() || !reader_jobs_.empty(); });
    --readers_idle_;
    if (reader_jobs_.empty()) break;  // stopping, and nothing left to hand back
    ReaderJob job = reader_jobs_.front();
    reader_jobs_.pop_front();
    ++readers_busy_;
    lock.unlock();
    t_thread.pt_site = job.site;
    const uint64_t cpu_before = thread_cpu_ns();
    if (stopping()) cache_.finish(job.entry, false);  // drops it: nobody will read it now
    else fill_in_subreads(job.entry, job.fd, job.key, job.offset, job.length, job.seq, t_trace_tid, nullptr);
    // The PT's CPU is the PT's and its readers': the back-off's CPU rule weighs both.
    stats_.pt_reader_cpu_ns += thread_cpu_ns() - cpu_before;
    PtResources::get().close_helper_fd(job.fd);
    lock.lock();
    --readers_busy_;
    readers_room_cv_.notify_one();
  }
  --reader_threads_;
  lifecycle_cv_.notify_all();
}

void Runtime::waiting_thread_main(int index) {
  const int tid = kTraceFirstWT + index;
  t_trace_tid = tid;
  t_thread.role = ThreadRole::WT;
  std::unique_lock<std::mutex> lock(wt_mu_);
  for (;;) {
    ++wt_idle_;
    wt_cv_.wait(lock, [&] { return stopping() || !wt_jobs_.empty(); });
    --wt_idle_;
    if (stopping()) break;
    WaitingJob job = wt_jobs_.front();
    wt_jobs_.pop_front();
    wt_room_cv_.notify_one();
    ++wt_running_;
    lock.unlock();
    run_waiting_job(job, tid);
    PtResources::get().close_helper_fd(job.fd);
    lock.lock();
    --wt_running_;
  }
  --wt_threads_;
  lifecycle_cv_.notify_all();
}

void Runtime::run_waiting_job(const WaitingJob &job, int trace_tid) {
  t_thread.pt_site = job.site;
  uint64_t begin = now_ns();
  wait_for_mt(job.seq);
  trace_.event("wt_wait", trace_tid, begin, now_ns(), nullptr, job.offset,
               static_cast<int64_t>(job.requested), static_cast<int64_t>(job.seq), nullptr, -1,
               nullptr, job.site);
  if (stopping()) return;
  stats_.wt_started++;
  struct stat st;
  if (fstat(job.fd, &st) != 0 || !S_ISREG(st.st_mode) || job.offset >= st.st_size) return;
  size_t length = std::min<size_t>(job.requested, static_cast<size_t>(st.st_size - job.offset));
  fetch(job.fd, key_of(st), stamp_of(st), job.offset, length, job.seq, trace_tid);
}

// ------------------------------------------------------------------ shutdown and outputs

int Runtime::rank() const {
  if (rank_ >= 0) return rank_;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int r = 0;
  if (initialized && !finalized && MPI_Comm_rank(MPI_COMM_WORLD, &r) == MPI_SUCCESS) return r;
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char *v = std::getenv(name)) return std::atoi(v);
  return 0;
}

bool Runtime::pt_running() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  return pt_running_ && !stopping();
}

void Runtime::handoff_post(unsigned slot, intptr_t handle) {
  std::lock_guard<std::mutex> lock(handoff_mu_);
  handoffs_[slot] = handle;
  handoff_cv_.notify_all();
}

bool Runtime::handoff_take(unsigned slot, intptr_t *handle) {
  std::unique_lock<std::mutex> lock(handoff_mu_);
  handoff_cv_.wait(lock, [&] { return stopping() || handoffs_.count(slot) > 0; });
  auto it = handoffs_.find(slot);
  if (it == handoffs_.end()) return false;
  *handle = it->second;
  handoffs_.erase(it);
  return true;
}

void Runtime::shutdown() {
  {
    std::unique_lock<std::mutex> lock(lifecycle_mu_);
    if (shut_down_) return;
    shut_down_ = true;
    rank_ = rank();
  }
  stopping_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    handoff_cv_.notify_all();
  }
  cache_.stop();
  scheduler_.stop();
  {
    std::lock_guard<std::mutex> lock(progress_mu_);
    progress_cv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(wt_mu_);
    wt_cv_.notify_all();
    wt_room_cv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    readers_cv_.notify_all();
    readers_room_cv_.notify_all();
  }
  // Silently and briefly: the PT escapes at its next poll or runtime call. One that has
  // not ended by then keeps running until exit ends it; nothing it may touch is ever
  // destroyed (the runtime lives on).
  const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  {
    std::unique_lock<std::mutex> lock(lifecycle_mu_);
    lifecycle_cv_.wait_until(lock, deadline, [&] { return !pt_running_; });
    if (pt_running_) {
      clockid_t clock;
      struct timespec cpu{};
      if (pthread_getcpuclockid(pt_thread_, &clock) == 0 && clock_gettime(clock, &cpu) == 0)
        stats_.pt_cpu_ns = static_cast<uint64_t>(cpu.tv_sec) * 1000000000u +
                           static_cast<uint64_t>(cpu.tv_nsec);
    }
  }
  for (auto [mu, threads] : {std::pair{&wt_mu_, &wt_threads_}, std::pair{&readers_mu_, &reader_threads_}}) {
    std::unique_lock<std::mutex> lock(*mu);
    while (*threads > 0 && std::chrono::steady_clock::now() < deadline) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
  }
  write_outputs();
}

// CPU time of the whole process (every thread) so far: with pt_cpu_s it tells how much
// of the work was the prefetch thread's.
static double process_cpu_s() {
  struct timespec cpu{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) != 0) return 0.0;
  return static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) * 1e-9;
}

void Runtime::write_outputs() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  if (!config_.stats_path.empty()) {
    CacheCounters cache = cache_.counters();
    const double s = 1e-9;
    auto u = [](const std::atomic<uint64_t> &v) { return std::to_string(v.load()); };
    std::string json = "{\"rank\":" + std::to_string(rank_) + ",\"pid\":" + std::to_string(getpid()) +
        ",\"host\":\"" + host + "\",\"mode\":\"" + mode_name(mode()) +
        "\",\"coordinator\":\"" + coordinator_->name() +
        "\",\"wall_s\":" + format_double((now_ns() - start_ns_) * s);
#define PPIOS_STATS_COUNT(name) json += ",\"" #name "\":" + u(stats_.name);
#define PPIOS_STATS_TIME(name) json += ",\"" #name "_s\":" + format_double(stats_.name##_ns * s);
    PPIOS_STATS_FIELDS(PPIOS_STATS_COUNT, PPIOS_STATS_TIME)
#undef PPIOS_STATS_COUNT
#undef PPIOS_STATS_TIME
    const PtStop pt_stop = static_cast<PtStop>(pt_stop_.load(std::memory_order_acquire));
    json += ",\"pt_stop\":\"" + std::string(pt_started_ ? pt_stop_name(pt_stop) : "none") + "\"" +
        ",\"pt_mismatch\":" + std::to_string(cache.unserved_entries) +
        ",\"cpu_s\":" + format_double(process_cpu_s()) +
        ",\"pt_unused_bytes\":" + std::to_string(cache.unused_bytes) +
        ",\"slot_wait_s\":" + format_double((stats_.mt_slot_wait_ns + stats_.pt_slot_wait_ns) * s) +
        ",\"cache_limit_bytes\":" + std::to_string(cache_.capacity()) +
        ",\"cache_peak_bytes\":" + std::to_string(cache.peak_bytes) +
        ",\"cache_evicted_entries\":" + std::to_string(cache.evicted_entries) +
        ",\"cache_invalidated_entries\":" + std::to_string(cache.invalidated_entries);
    // The MT's reads per call site (program calls through the interposers only).
    std::string exe;
    uintptr_t exe_base = 0;
    describe_executable(&exe, &exe_base);
    // A JSON string's text: quotes and backslashes escaped, control characters dropped.
    auto json_escaped = [](const std::string &text) {
      std::string out;
      for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) >= 0x20) out += c;
      }
      return out;
    };
    json += ",\"exe\":\"" + json_escaped(exe) + "\",\"exe_base\":" + std::to_string(exe_base) + ",\"sites\":[";
    const char *sep = "";
    for (const auto &[site, c] : sites_.snapshot()) {
      json += std::string(sep) + "{\"site\":" + std::to_string(site) + ",\"calls\":" + std::to_string(c.calls) +
          ",\"bytes\":" + std::to_string(c.bytes) + ",\"hit_bytes\":" + std::to_string(c.hit_bytes) +
          ",\"read_wait_s\":" + format_double(c.wait_ns * s) + "}";
      sep = ",";
    }
    // The PT's prefetches per source line (ppios-cc's "file:line:col").
    json += "],\"pt_sites\":[";
    sep = "";
    for (const auto &[src, c] : sites_.prefetch_snapshot()) {
      json += std::string(sep) + "{\"src\":\"" + json_escaped(src ? src : "") +
          "\",\"prefetches\":" + std::to_string(c.prefetches) + ",\"bytes\":" +
          std::to_string(c.bytes) + ",\"late\":" + std::to_string(c.late) + "}";
      sep = ",";
    }
    json += "]}\n";
    // One write with O_APPEND: lines from many ranks never interleave.
    std::string problem;
    int fd = open_output_file(config_.stats_path, /*truncate=*/false, &problem);
    if (fd >= 0 && write(fd, json.data(), json.size()) != static_cast<ssize_t>(json.size()))
      problem = config_.stats_path + ": " + std::strerror(errno);
    if (!problem.empty()) std::fprintf(stderr, "ppios: cannot write PPIOS_STATS=%s\n", problem.c_str());
    if (fd >= 0) close(fd);
  }
  if (trace_.enabled()) {
    std::string error;
    // What ppios-report needs to name the process and judge the cap (-1: no cap given).
    const CoordinatorOptions &c = config_.coordinator;
    std::string about = "\"pid\":" + std::to_string(getpid()) + ",\"host\":\"" + host +
        "\",\"mode\":\"" + mode_name(mode()) + "\",\"coordinator\":\"" + coordinator_->name() +
        "\",\"threshold\":" + (c.auto_threshold ? std::string("\"auto\"") : std::to_string(c.threshold));
    if (!trace_.write(config_.trace_prefix, rank_, start_ns_, about, &error))
      std::fprintf(stderr, "ppios: %s\n", error.c_str());
  }
}

}  // namespace ppios

// Parse the configuration when the library is loaded, so that a bad PPIOS_* value stops
// the program before it does anything.
__attribute__((constructor)) static void ppios_load() { ppios::Runtime::load(); }
