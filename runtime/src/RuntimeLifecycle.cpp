// The runtime's lifecycle: load() parses the configuration (exiting the program with a
// message if it is invalid) and creates the one Runtime, which is never destroyed, since
// the PT may outlive main(); the library constructor calls it, so a bad PPIOS_* value
// stops the program first. shutdown(), at exit and never in a forked child, is
// idempotent: it stops the PT, the waiting threads and the PT readers, waits for them
// briefly (kStopGrace) and then writes the statistics (PPIOS_STATS) and the trace
// whether or not they ended.
//
// The program's stdout and stderr are the program's: the runtime writes there only a
// configuration error that stops the run (load(), the coordinator's make). Whatever else it
// has to tell (a PT fault, the coordinator's notices, an output it could not write) goes to
// the statistics and, with PPIOS_VERBOSE=1, also to stderr.
//
// Locks: shutdown takes lifecycle_mu_, handoff_mu_, progress_mu_, wt_mu_ and readers_mu_
// one at a time, each only to set its state or wake its waiters; the outputs are
// written with none held. CoordinatorNotes::mu is a leaf.
#include "Runtime.h"

#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "ChangeGenerations.h"
#include "Clock.h"
#include "OutputFile.h"
#include "StreamHolds.h"
#include "ThreadState.h"

namespace ppios {
namespace {

Runtime *g_runtime = nullptr;  // created once, never destroyed: the PT may outlive main()

// How long shutdown waits, silently, for the PT and WTs to notice the stop before it
// writes the outputs without them: they only ever touch the never-freed runtime, and
// exit must never be delayed by a PT (a stuck slice is ended by exit itself).
constexpr auto kStopGrace = std::chrono::milliseconds(100);

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

// A JSON string's text: quotes and backslashes escaped, control characters dropped.
std::string json_escaped(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

// PPIOS_VERBOSE, for the coordinator's notices, which may come before the runtime exists
// (while it makes its coordinator) and after its outputs are written (at exit).
std::atomic<bool> g_verbose{false};

// A message that does not stop the run: on stderr with PPIOS_VERBOSE=1 only.
void say(const std::string &text) {
  if (g_verbose.load(std::memory_order_relaxed)) std::fprintf(stderr, "ppios: %s\n", text.c_str());
}

// What the coordinator told about this run, for PPIOS_STATS ("coordinator_notices",
// "threshold_conflict"). Never destroyed: a notice may come at exit. Each kind comes once
// per process, so the list stays short.
struct CoordinatorNotes {
  std::mutex mu;
  std::vector<std::string> texts;
  int64_t requested_threshold = -1, stored_threshold = -1;
};

CoordinatorNotes &coordinator_notes() {
  static CoordinatorNotes *notes = new CoordinatorNotes;
  return *notes;
}

void note_coordinator(const CoordinatorNotice &notice) {
  CoordinatorNotes &notes = coordinator_notes();
  {
    std::lock_guard<std::mutex> lock(notes.mu);
    notes.texts.push_back(notice.text);
    if (notice.stored_threshold >= 0) {
      notes.requested_threshold = notice.requested_threshold;
      notes.stored_threshold = notice.stored_threshold;
    }
  }
  say("warning: " + notice.text);
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
  // through in it, and it never writes the parent's statistics or trace. What the
  // pass-through path still asks (whose descriptor it is, the change table) is built now,
  // while the process has one thread: a function-local static whose construction another
  // thread had begun at the fork would make the child wait for it forever.
  PtResources::get();
  ChangeGenerations::node();
  pthread_atfork(nullptr, [] { Coherence::note_child(); },
                 [] {
                   g_forked_child.store(true, std::memory_order_relaxed);
                   StreamHolds::get().adopt_after_fork();
                 });
  // The standard streams write what descriptors 1 and 2 lead to: a file, when the program
  // was started with its output redirected to one (StreamHolds.h).
  {
    RuntimeScope scope;
    StreamHolds::get().hold_standard_streams(true);
  }
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
  g_verbose.store(config.verbose, std::memory_order_relaxed);
  set_coordinator_notice_sink(&note_coordinator);  // before the coordinator may tell anything
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
        "\",\"coordinator_scope\":\"" + cap_scope(*coordinator_) +
        "\",\"wall_s\":" + format_double((now_ns() - start_ns_) * s);
#define PPIOS_STATS_COUNT(name) json += ",\"" #name "\":" + u(stats_.name);
#define PPIOS_STATS_TIME(name) json += ",\"" #name "_s\":" + format_double(stats_.name##_ns * s);
    PPIOS_STATS_FIELDS(PPIOS_STATS_COUNT, PPIOS_STATS_TIME)
#undef PPIOS_STATS_COUNT
#undef PPIOS_STATS_TIME
    const PtStop pt_stop = static_cast<PtStop>(pt_stop_.load(std::memory_order_acquire));
    int fault_signal = 0;
    uintptr_t fault_address = 0;
    bool fault_has_address = false;
    pt_fault_seen(&fault_signal, &fault_address, &fault_has_address);
    char address[32] = "null";
    if (fault_has_address)
      std::snprintf(address, sizeof address, "\"0x%llx\"", static_cast<unsigned long long>(fault_address));
    json += ",\"pt_stop\":\"" + std::string(pt_started_ ? pt_stop_name(pt_stop) : "none") + "\"" +
        ",\"pt_fault_signal\":" + std::to_string(fault_signal) + ",\"pt_fault_address\":" + address +
        ",\"pt_mismatch\":" + std::to_string(cache.unserved_entries) +
        ",\"cpu_s\":" + format_double(process_cpu_s()) +
        ",\"pt_unused_bytes\":" + std::to_string(cache.unused_bytes) +
        ",\"slot_wait_s\":" + format_double((stats_.mt_slot_wait_ns + stats_.pt_slot_wait_ns) * s) +
        ",\"cache_limit_bytes\":" + std::to_string(cache_.capacity()) +
        ",\"cache_peak_bytes\":" + std::to_string(cache.peak_bytes) +
        ",\"cache_evicted_entries\":" + std::to_string(cache.evicted_entries) +
        ",\"cache_invalidated_entries\":" + std::to_string(cache.invalidated_entries) +
        ",\"coherence\":\"" + json_escaped(coherence_.mode()) + "\"";
    {
      CoordinatorNotes &notes = coordinator_notes();
      std::lock_guard<std::mutex> lock(notes.mu);
      json += ",\"threshold_conflict\":";
      if (notes.stored_threshold >= 0)
        json += "{\"requested\":" + std::to_string(notes.requested_threshold) +
            ",\"stored\":" + std::to_string(notes.stored_threshold) + "}";
      else
        json += "null";
      json += ",\"coordinator_notices\":[";
      const char *sep = "";
      for (const std::string &text : notes.texts) {
        json += std::string(sep) + "\"" + json_escaped(text) + "\"";
        sep = ",";
      }
      json += "]";
    }
    // The MT's reads per call site (program calls through the interposers only).
    std::string exe;
    uintptr_t exe_base = 0;
    describe_executable(&exe, &exe_base);
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
    if (!problem.empty()) say("cannot write PPIOS_STATS=" + problem);
    if (fd >= 0) close(fd);
  }
  if (trace_.enabled()) {
    std::string error;
    // What ppios-report needs to name the process and judge the cap (-1: no cap given).
    const CoordinatorOptions &c = config_.coordinator;
    std::string about = "\"pid\":" + std::to_string(getpid()) + ",\"host\":\"" + host +
        "\",\"mode\":\"" + mode_name(mode()) + "\",\"coordinator\":\"" + coordinator_->name() +
        "\",\"threshold\":" + (c.auto_threshold ? std::string("\"auto\"") : std::to_string(c.threshold));
    if (!trace_.write(config_.trace_prefix, rank_, start_ns_, about, &error)) say(error);
  }
}

}  // namespace ppios

// Parse the configuration when the library is loaded, so that a bad PPIOS_* value stops
// the program before it does anything.
__attribute__((constructor)) static void ppios_load() { ppios::Runtime::load(); }
