// The MT's side: every read and write the program does through the interposers passes
// through mt_read or mt_write, which number it as an MT transfer, take what the cache
// holds, hold a system slot (and, unless work-conserving, the process I/O token) only
// while it really goes to storage (MtStorageAccess), keep the call's errno, and count it.
// They also keep the MT's progress (transfers started and completed, how far its stdio
// streams have read), and wake the PT and the waiting threads that wait for it, only when
// one reaches the count it waits for.
//
// Threads and locks: mt_read, mt_write and note_mt_stream_end run on the MT; the waits
// (wait_for_mt, wait_for_mt_start, hold_speculation) and the stream look-ups on the PT or
// a waiting thread. The waits sleep under progress_mu_, which the MT takes only to wake
// them; mt_streams_mu_ guards the stream progress. Coordinator calls and storage I/O
// happen with neither held.
#include "Runtime.h"

#include <algorithm>
#include <cerrno>

#include "Clock.h"
#include "ErrnoGuard.h"
#include "ThreadState.h"

namespace ppios {

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

MtStorageAccess::~MtStorageAccess() {
  release();
  if (message_) {
    ErrnoGuard errno_guard;
    rt_.coherence_.acquire_point();
  }
}

void MtStorageAccess::may_wait() {
  if (may_wait_from_ns_ == 0) may_wait_from_ns_ = now_ns();
}

void MtStorageAccess::reaches(Reaches what) {
  exempt_ = what != Reaches::Storage;
  if (exempt_) may_wait();  // a pipe or a message may block without a slot
  if (what == Reaches::Messages && !message_) {
    message_ = true;
    ErrnoGuard errno_guard;
    rt_.coherence_.release_point();
  }
}

void MtStorageAccess::acquire() {
  may_wait();
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
  may_wait();
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
                         FunctionRef<ssize_t(size_t, MtStorageAccess &)> complete) {
  const int saved_errno = errno;
  const uint64_t seq = mt_started_.fetch_add(1, std::memory_order_acq_rel) + 1;
  notify_progress();  // a PT may wait for this start (PPIOS_PF_AFTER_SYNC)
  // The wait is timed from where the call may first wait (MtStorageAccess::may_wait); a
  // trace event needs the call's whole span.
  const bool whole_span = trace_.enabled();
  uint64_t begin = whole_span ? now_ns() : 0;
  size_t from_cache = 0;
  ssize_t result;
  {
    MtStorageAccess storage(*this);
    if (file != nullptr && length > 0 && caching()) {
      InFlightPolicy policy = mode() == Mode::PP ? InFlightPolicy::Wait : InFlightPolicy::NeedToken;
      if (policy == InFlightPolicy::Wait) storage.may_wait();  // for a prefetch in flight
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
    if (!whole_span) begin = storage.may_wait_from();
  }  // the slot's release keeps the call's errno
  ErrnoGuard call_errno;  // and so does the bookkeeping below
  const uint64_t end = begin != 0 ? now_ns() : 0;
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

ssize_t Runtime::mt_write(const FileKey *file, off_t offset, FunctionRef<ssize_t()> do_write,
                          Reaches reaches) {
  const int saved_errno = errno;
  const uint64_t seq = mt_started_.fetch_add(1, std::memory_order_acq_rel) + 1;
  notify_progress();
  const uint64_t begin = now_ns();
  ssize_t result;
  {
    MtStorageAccess storage(*this);
    storage.reaches(reaches);
    storage.acquire();
    if (file != nullptr) coherence_.begin_change(*file);
    errno = saved_errno;
    result = do_write();
    if (result > 0) storage.add_bytes(static_cast<uint64_t>(result));
    if (file != nullptr) {
      ErrnoGuard errno_guard;  // the write's errno
      coherence_.end_change(*file);
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
  // Until a PT starts no entry can be passed (the cache learns the progress at the MT's
  // first transfer after that).
  if (!caching() || !cache_.used()) return;
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
  // The MT's stream asks for the block at `offset` once its line reaches it; at its last
  // refill it stood at most a block before p.end.
  const off_t to_go = offset - p.end;
  const uint64_t at = p.transfer + static_cast<uint64_t>(std::max<off_t>(0, to_go) / per_transfer);
  return std::max(next, at);
}

}  // namespace ppios
