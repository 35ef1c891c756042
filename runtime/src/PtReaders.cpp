// The PT readers (PPIOS_MODE=ppios, PPIOS_PT_READERS > 1): the PT reserves each
// prefetch's entry in program order and hands its fill to a reader, running on while
// fewer fills are out than reader_fills_allowed; an entry in flight always has a reader
// on it, so an MT that claims it waits for one sub-read at most. A reader fills in
// sub-reads under a slot of its own, through its own copy of the descriptor, and adds its
// CPU time to the PT's for the back-off. Readers start on demand, up to PPIOS_PT_READERS.
//
// Threads and locks: hand_to_reader runs on the PT, reader_main on each reader;
// readers_mu_ guards the job queue and the counts, and is never held during a fill.
#include "Runtime.h"

#include <chrono>

#include "Clock.h"
#include "DetachedThread.h"
#include "RuntimeInternal.h"
#include "ThreadState.h"

namespace ppios {

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

}  // namespace ppios
