#include "IoScheduler.h"

#include "Clock.h"

namespace ppios {

void IoScheduler::acquire_mt(TokenTimes *times) {
  if (!enabled_) return;
  std::unique_lock<std::mutex> lock(mu_);
  times->asked_ns = now_ns();
  mt_waiting_.fetch_add(1, std::memory_order_acq_rel);
  cv_.wait(lock, [&] { return !held_; });
  mt_waiting_.fetch_sub(1, std::memory_order_acq_rel);
  held_ = true;
  times->granted_ns = now_ns();
}

bool IoScheduler::prefetch_may_run(uint64_t seq) const {
  return !held_ && mt_waiting_.load(std::memory_order_acquire) == 0 &&
         (prefetch_waiting_.empty() || *prefetch_waiting_.begin() >= seq);
}

bool IoScheduler::wait_for_turn(uint64_t seq) {
  if (!enabled_) return true;
  std::unique_lock<std::mutex> lock(mu_);
  auto me = prefetch_waiting_.insert(seq);
  cv_.wait(lock, [&] {
    return stopped_ || (!held_ && mt_waiting_.load(std::memory_order_acquire) == 0 &&
                        *prefetch_waiting_.begin() == seq);
  });
  prefetch_waiting_.erase(me);
  cv_.notify_all();  // the next lowest waiter may now be eligible
  return !stopped_;
}

bool IoScheduler::try_acquire_prefetch(uint64_t seq, TokenTimes *times) {
  if (!enabled_) return true;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || !prefetch_may_run(seq)) return false;
  held_ = true;
  times->asked_ns = times->granted_ns = now_ns();
  return true;
}

bool IoScheduler::acquire_prefetch(uint64_t seq, TokenTimes *times) {
  for (;;) {
    if (!wait_for_turn(seq)) return false;
    if (try_acquire_prefetch(seq, times)) return true;
  }
}

void IoScheduler::release(TokenTimes *times) {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    times->released_ns = now_ns();
  }
  cv_.notify_all();
}

void IoScheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

size_t IoScheduler::prefetch_waiters() {
  std::lock_guard<std::mutex> lock(mu_);
  return prefetch_waiting_.size();
}

}  // namespace ppios
