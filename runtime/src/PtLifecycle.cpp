// The PT's lifecycle: start_pt starts the one PT (once per process, never in mode off,
// never after shutdown began) as a detached thread that takes no asynchronous signal and
// runs the program's slice; pt_ended, on the PT once the slice is over, releases its
// resources and tells shutdown it ended. Under an address-space limit the runtime's
// threads share the existing malloc arenas (limit_thread_arenas). check_pt_cpu is the
// back-off's CPU rule, run on the PT only: it stops the PT for good when its CPU costs a
// main thread that waits for a core.
//
// Locks: lifecycle_mu_ guards the PT's state (started, running, its thread); nothing else
// is taken with it.
#include "Runtime.h"

#include <malloc.h>
#include <sys/resource.h>

#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "Clock.h"
#include "DetachedThread.h"
#include "ErrnoGuard.h"
#include "MpiTypes.h"
#include "RuntimeInternal.h"
#include "ThreadState.h"

namespace ppios {

namespace {
struct PtStart {
  void (*entry)(void *);
  std::vector<char> ctx;
};
}  // namespace

void Runtime::start_pt(void (*entry)(void *), const void *ctx, size_t ctx_size) {
  if (mode() == Mode::Off) {  // no PT: what the start block opened for it is closed now
    PtResources::get().release_all(cache_);
    return;
  }
  mpi_type_sizes_init();
  {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (pt_started_ || stopping()) return;
    pt_started_ = true;
    pt_running_ = true;
    // From now on the MT's reads look in the cache: this is the MT, so every read it
    // makes after this line sees it, and the PT reserves nothing before.
    cache_.mark_used();
    mt_tid_ = gettid();
    int finalized = 0;
    MPI_Finalized(&finalized);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }
  limit_thread_arenas();
  snapshot_environment();  // before the PT exists: it reads only the snapshot
  auto *start = new PtStart{entry, std::vector<char>(static_cast<const char *>(ctx),
                                                     static_cast<const char *>(ctx) + ctx_size)};
  std::lock_guard<std::mutex> lock(lifecycle_mu_);  // pt_thread_ is set before the PT ends
  // The PT (and the WTs it starts) take no asynchronous signal: the program's handlers
  // run on the program's threads, as without ppios. Faults stay deliverable for the
  // fault net, and so does SIGABRT, which abort() raises on its own thread (not every
  // abort() unblocks it first); one sent to the process that lands here is passed on to
  // the program's threads (SignalTable). The mask is inherited at creation, so there is
  // no window.
  sigset_t blocked, saved_mask;
  sigfillset(&blocked);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigdelset(&blocked, sig);
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
    PtResources::get().release_all(cache_);
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

}  // namespace ppios
