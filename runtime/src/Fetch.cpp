// Prefetching: prefetch and prefetch_copy are the PT's requests. A read after a write is
// queued for a waiting thread (the PT waits for room in the queue rather than drop it);
// any other is fetched into the cache by the caller, or handed to a PT reader.
// prefetch_copy also copies the bytes to the PT and reads directly what the cache did not
// give it. A fetch reserves its cache entry (begin_fetch: back-off, lateness, cache room)
// and fills it: whole and unscheduled in pp (fill_whole), else in sub-reads
// (fill_in_subreads), each under a share of the process I/O token and a system slot kept
// until the MT or the coordinator wants it, never waiting for the token while holding a
// slot nor for a slot while holding the token. end_fetch publishes the entry and counts
// it for the back-off and the call-site statistics.
//
// Threads and locks: on the PT, a waiting thread or a PT reader. prefetch holds wt_mu_
// only to queue a job; the cache and the scheduler take their own locks. Coordinator
// calls and storage I/O happen with none held.
#include "Runtime.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "Clock.h"
#include "DetachedThread.h"
#include "RuntimeInternal.h"
#include "ThreadState.h"
#include "ppios/ppios.h"

namespace ppios {

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

}  // namespace ppios
