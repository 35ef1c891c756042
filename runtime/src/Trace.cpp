#include "Trace.h"

#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cstdio>
#include <set>
#include <system_error>

#include "ErrnoGuard.h"
#include "OutputFile.h"

namespace ppios {

void Trace::name_file(const FileKey &key, int fd) {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (names_.count(key)) return;
  }
  ErrnoGuard keep_errno;  // called from inside the program's I/O calls
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n > 0) name_path(key, std::string(path, static_cast<size_t>(n)));
}

void Trace::name_path(const FileKey &key, const std::string &path) {
  if (!enabled_ || path.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  names_.emplace(key, path);
}

Trace::~Trace() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stop_writer(lock);
  }
  if (spill_fd_ >= 0) close(spill_fd_);
}

void Trace::event(const char *name, int tid, uint64_t begin_ns, uint64_t end_ns,
                  const FileKey *key, int64_t offset, int64_t bytes, int64_t seq,
                  const char *aux_name, int64_t aux, const void *site, const char *src) {
  if (!enabled_) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (kept_ >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back(Event{name, tid, begin_ns, end_ns, key ? *key : FileKey{}, key != nullptr,
                          offset, bytes, seq, aux_name, aux, site, src});
  ++kept_;
  if (events_.size() >= kChunkEvents) queue_full_chunk(lock);
}

void Trace::queue_full_chunk(std::unique_lock<std::mutex> &lock) {
  if (writer_pid_ != 0 && writer_pid_ != getpid()) {
    // A forked child: the writer did not survive the fork, and the child never writes its
    // parent's trace. Its events are only counted.
    dropped_ += events_.size();
    kept_ -= events_.size();
    events_.clear();
    return;
  }
  if (!writer_stop_ && !writer_.joinable()) {
    // The writer takes no asynchronous signal (the program's handlers run on the
    // program's threads); the mask is inherited at creation, so there is no window.
    writer_pid_ = getpid();
    sigset_t blocked, saved_mask;
    sigfillset(&blocked);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigdelset(&blocked, sig);
    pthread_sigmask(SIG_BLOCK, &blocked, &saved_mask);
    try {
      writer_ = std::thread([this] { writer_main(); });
    } catch (const std::system_error &) {
      // The system refused a thread (ulimit -v): this thread spills, as below.
    }
    pthread_sigmask(SIG_SETMASK, &saved_mask, nullptr);
  }
  room_cv_.wait(lock, [&] { return queued_.size() < kMaxQueued || writer_stop_ || !writer_.joinable(); });
  // Another thread may have queued the chunk while this one waited.
  if (events_.size() < kChunkEvents) return;
  if (writer_stop_ || !writer_.joinable()) {
    // The writer is gone (write() ran: a late event at exit) or was refused a thread: the
    // chunk is spilled by this thread, as before the writer existed.
    std::vector<Event> chunk;
    chunk.swap(events_);
    lock.unlock();
    bool written = spill(chunk);
    lock.lock();
    if (!written) dropped_ += chunk.size(), kept_ -= chunk.size();
    return;
  }
  queued_.push_back(std::move(events_));
  events_ = std::vector<Event>();
  events_.reserve(kChunkEvents);
  work_cv_.notify_one();
}

void Trace::writer_main() {
  pthread_setname_np(pthread_self(), "ppios-trace");  // what ps -L and the tests see
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return !queued_.empty() || writer_stop_; });
    if (queued_.empty()) break;  // stopped, and everything queued is written
    std::vector<Event> chunk = std::move(queued_.front());
    queued_.pop_front();
    lock.unlock();
    const bool written = spill(chunk);
    const size_t n = chunk.size();
    std::vector<Event>().swap(chunk);  // freed before the next one is taken
    lock.lock();
    if (!written) dropped_ += n, kept_ -= n;
    room_cv_.notify_all();
  }
}

void Trace::stop_writer(std::unique_lock<std::mutex> &lock) {
  writer_stop_ = true;
  work_cv_.notify_all();
  room_cv_.notify_all();
  if (!writer_.joinable()) return;
  if (writer_pid_ != getpid()) {
    writer_.detach();  // a forked child's copy of a thread that is not there
    return;
  }
  std::thread writer = std::move(writer_);
  lock.unlock();
  writer.join();  // it writes what is queued first
  lock.lock();
}

// Appends the chunk to the spill file as raw Event records (the names they point to are
// string literals of this process: read back only by this process).
bool Trace::spill(const std::vector<Event> &chunk) {
  std::lock_guard<std::mutex> spill_lock(spill_mu_);
  if (spill_fd_ < 0 && spill_pid_ == 0) {
    // A file without a name in the trace's directory (O_TMPFILE); where the file system
    // has none, a new one (O_EXCL: nothing planted there is used) unlinked at once.
    spill_pid_ = getpid();
    size_t slash = prefix_.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : prefix_.substr(0, slash);
    spill_fd_ = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (spill_fd_ < 0) {
      std::string path = prefix_ + ".spill." + std::to_string(spill_pid_);
      spill_fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (spill_fd_ >= 0) unlink(path.c_str());
    }
  }
  if (spill_fd_ < 0 || spill_pid_ != getpid()) return false;
  const char *p = reinterpret_cast<const char *>(chunk.data());
  size_t left = chunk.size() * sizeof(Event);
  off_t at = static_cast<off_t>(spilled_ * sizeof(Event));
  while (left > 0) {
    ssize_t n = pwrite(spill_fd_, p, left, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n, at += n, left -= static_cast<size_t>(n);
  }
  if (left != 0) return false;
  spilled_ += chunk.size();
  return true;
}

namespace {
// The first object dl_iterate_phdr reports is the executable; its dlpi_addr is the load
// bias of a PIE (0 for a fixed-address executable).
int first_object(struct dl_phdr_info *info, size_t, void *data) {
  *static_cast<uintptr_t *>(data) = static_cast<uintptr_t>(info->dlpi_addr);
  return 1;
}

void json_string(FILE *f, const std::string &s) {
  std::fputc('"', f);
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') std::fprintf(f, "\\%c", c);
    else if (c < 0x20) std::fprintf(f, "\\u%04x", c);
    else std::fputc(c, f);
  }
  std::fputc('"', f);
}
}  // namespace

void describe_executable(std::string *path, uintptr_t *load_base) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  path->assign(exe, n > 0 ? static_cast<size_t>(n) : 0);
  *load_base = 0;
  dl_iterate_phdr(first_object, load_base);
}

void Trace::write_event(FILE *f, const Event &e, int rank, uint64_t origin_ns, bool *first) const {
  uint64_t b = e.begin_ns > origin_ns ? e.begin_ns - origin_ns : 0;
  uint64_t d = e.end_ns > e.begin_ns ? e.end_ns - e.begin_ns : 0;
  std::fprintf(f, "%s{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{",
               *first ? "" : ",\n", e.name, rank, e.tid, b / 1000.0, d / 1000.0);
  *first = false;
  const char *sep = "";
  if (e.has_key) {
    auto it = names_.find(e.key);
    std::fputs("\"file\":", f);
    json_string(f, it != names_.end() ? it->second
                                      : std::to_string(e.key.dev) + ":" + std::to_string(e.key.ino));
    sep = ",";
  }
  if (e.offset >= 0) { std::fprintf(f, "%s\"offset\":%lld", sep, static_cast<long long>(e.offset)); sep = ","; }
  if (e.bytes >= 0) { std::fprintf(f, "%s\"bytes\":%lld", sep, static_cast<long long>(e.bytes)); sep = ","; }
  if (e.seq >= 0) { std::fprintf(f, "%s\"seq\":%lld", sep, static_cast<long long>(e.seq)); sep = ","; }
  if (e.aux_name != nullptr && e.aux >= 0)
    { std::fprintf(f, "%s\"%s\":%lld", sep, e.aux_name, static_cast<long long>(e.aux)); sep = ","; }
  if (e.site != nullptr) {
    std::fprintf(f, "%s\"site\":%llu", sep, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(e.site)));
    sep = ",";
  }
  if (e.src != nullptr) {
    std::fprintf(f, "%s\"src\":", sep);
    json_string(f, e.src);
  }
  std::fputs("}}", f);
}

bool Trace::write(const std::string &prefix, int rank, uint64_t origin_ns, const std::string &other_data,
                  std::string *error) {
  // The same instant on both clocks, read back to back: the realtime origin is off by the
  // few nanoseconds between the two reads.
  timespec mono, real;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  const int64_t mono_now = static_cast<int64_t>(mono.tv_sec) * 1000000000 + mono.tv_nsec;
  const int64_t real_now = static_cast<int64_t>(real.tv_sec) * 1000000000 + real.tv_nsec;
  const int64_t origin_unix_ns = real_now - (mono_now - static_cast<int64_t>(origin_ns));
  std::string exe;
  uintptr_t exe_base = 0;
  describe_executable(&exe, &exe_base);
  std::unique_lock<std::mutex> lock(mu_);
  stop_writer(lock);  // every full chunk is in the spill file from here on
  std::string path = prefix + "." + std::to_string(rank) + ".json";
  std::string problem;
  int fd = open_output_file(path, /*truncate=*/true, &problem);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : nullptr;
  if (f == nullptr) {
    if (fd >= 0) close(fd);
    *error = "cannot write trace " + (problem.empty() ? path : problem);
    return false;
  }
  std::fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"rank\":%d,\"dropped_events\":%llu,"
               "\"origin_mono_ns\":%llu,\"origin_unix_ns\":%lld,\"exe_base\":%llu,\"exe\":", rank,
               static_cast<unsigned long long>(dropped_), static_cast<unsigned long long>(origin_ns),
               static_cast<long long>(origin_unix_ns), static_cast<unsigned long long>(exe_base));
  json_string(f, exe);
  std::fprintf(f, "%s%s},\"traceEvents\":[\n", other_data.empty() ? "" : ",", other_data.c_str());
  // Events first (the spilled chunks, older, read back a chunk at a time), then a name
  // for each thread they came from: the trace format does not care about the order.
  bool first = true;
  std::set<int> tids;
  auto emit = [&](const Event &e) {
    write_event(f, e, rank, origin_ns, &first);
    tids.insert(e.tid);
  };
  {
    std::lock_guard<std::mutex> spill_lock(spill_mu_);
    std::vector<Event> chunk(kChunkEvents);
    for (uint64_t done = 0; spill_fd_ >= 0 && spill_pid_ == getpid() && done < spilled_;) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(kChunkEvents, spilled_ - done));
      ssize_t n = pread(spill_fd_, chunk.data(), want * sizeof(Event),
                        static_cast<off_t>(done * sizeof(Event)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || n % static_cast<ssize_t>(sizeof(Event)) != 0) break;
      size_t got = static_cast<size_t>(n) / sizeof(Event);
      for (size_t i = 0; i < got; ++i) emit(chunk[i]);
      done += got;
    }
  }
  for (const Event &e : events_) emit(e);
  for (int tid : tids) {
    std::string tname = tid == kTraceMT            ? "MT (main thread)"
                        : tid == kTracePT          ? "PT (prefetch thread)"
                        : tid >= kTraceFirstReader ? "PT reader " + std::to_string(tid - kTraceFirstReader)
                                                   : "WT " + std::to_string(tid - kTraceFirstWT);
    std::fprintf(f, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
                 first ? "" : ",\n", rank, tid);
    json_string(f, tname);
    std::fputs("}}", f);
    first = false;
  }
  std::fputs("\n]}\n", f);
  if (std::fclose(f) != 0) {
    *error = "cannot write trace " + path;
    return false;
  }
  return true;
}

}  // namespace ppios
