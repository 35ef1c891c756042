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

bool IoScheduler::acquire_prefetch(uint64_t seq, TokenTimes *times) {
  if (!enabled_) return true;
  std::unique_lock<std::mutex> lock(mu_);
  times->asked_ns = now_ns();
  auto me = prefetch_waiting_.insert(seq);
  cv_.wait(lock, [&] {
    return stopped_ || (!held_ && mt_waiting_.load(std::memory_order_acquire) == 0 &&
                        *prefetch_waiting_.begin() == seq);
  });
  prefetch_waiting_.erase(me);
  if (stopped_) {
    cv_.notify_all();  // the next lowest waiter may now be eligible
    return false;
  }
  held_ = true;
  times->granted_ns = now_ns();
  return true;
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
