// The waiting threads: each takes the lowest-numbered read-after-write job the PT
// queued (Runtime::prefetch), waits until the MT has done every transfer before it, and
// fetches it into the cache, with the length recomputed from the file's size then.
// Threads start on demand, up to PPIOS_MAX_WT, and end at shutdown.
//
// Threads and locks: waiting_thread_main runs on each waiting thread; wt_mu_ guards the
// job queue and the counts, and is never held while a job waits or fetches.
#include "Runtime.h"

#include <sys/stat.h>

#include <algorithm>

#include "Clock.h"
#include "RuntimeInternal.h"
#include "ThreadState.h"

namespace ppios {

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

}  // namespace ppios
