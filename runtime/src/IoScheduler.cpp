#include "IoScheduler.h"

#include "Clock.h"

namespace ppios {

void IoScheduler::acquire_mt(TokenTimes *times) {
  if (!enabled_) return;
  std::unique_lock<std::mutex> lock(mu_);
  times->asked_ns = now_ns();
  mt_waiting_.fetch_add(1, std::memory_order_acq_rel);
  cv_.wait(lock, [&] { return !mt_holds_ && reading_.empty(); });
  mt_waiting_.fetch_sub(1, std::memory_order_acq_rel);
  mt_holds_ = true;
  times->hold = TokenTimes::Hold::MT;
  times->granted_ns = now_ns();
}

void IoScheduler::acquire_claim(uint64_t seq, TokenTimes *times) {
  if (!enabled_) return;
  std::unique_lock<std::mutex> lock(mu_);
  times->asked_ns = now_ns();
  claimed_.insert(seq);  // from now on no sub-read of it starts
  cv_.wait(lock, [&] { return reading_.count(seq) == 0; });
  times->hold = TokenTimes::Hold::Claim;
  times->seq = seq;
  times->granted_ns = now_ns();
}

bool IoScheduler::prefetch_may_run(uint64_t seq) const {
  if (mt_holds_ || reading_.size() >= static_cast<size_t>(prefetch_width_) ||
      mt_waiting_.load(std::memory_order_acquire) > 0 || claimed_.count(seq))
    return false;
  for (uint64_t queued : prefetch_waiting_)
    if (!claimed_.count(queued)) return queued == seq;
  return false;
}

IoScheduler::Turn::Turn(IoScheduler &scheduler, uint64_t seq) : scheduler_(scheduler), seq_(seq) {
  if (!scheduler_.enabled_) return;
  std::lock_guard<std::mutex> lock(scheduler_.mu_);
  place_ = scheduler_.prefetch_waiting_.insert(seq_);
  queued_ = true;
}

IoScheduler::Turn::~Turn() {
  if (!queued_) return;
  {
    std::lock_guard<std::mutex> lock(scheduler_.mu_);
    scheduler_.prefetch_waiting_.erase(place_);
  }
  scheduler_.cv_.notify_all();  // whoever is next in the queue may now run
}

bool IoScheduler::Turn::wait() {
  if (!scheduler_.enabled_) return true;
  std::unique_lock<std::mutex> lock(scheduler_.mu_);
  scheduler_.cv_.wait(lock, [&] { return scheduler_.stopped_ || scheduler_.prefetch_may_run(seq_); });
  return !scheduler_.stopped_;
}

bool IoScheduler::Turn::take(TokenTimes *times) {
  if (!scheduler_.enabled_) return true;
  std::lock_guard<std::mutex> lock(scheduler_.mu_);
  if (scheduler_.stopped_ || !scheduler_.prefetch_may_run(seq_)) return false;
  scheduler_.reading_.insert(seq_);
  times->hold = TokenTimes::Hold::Prefetch;
  times->seq = seq_;
  scheduler_.prefetch_waiting_.erase(place_);
  queued_ = false;
  times->asked_ns = times->granted_ns = now_ns();
  return true;
}

bool IoScheduler::acquire_prefetch(uint64_t seq, TokenTimes *times) {
  Turn turn(*this, seq);
  for (;;) {
    if (!turn.wait()) return false;
    if (turn.take(times)) return true;
  }
}

void IoScheduler::release(TokenTimes *times) {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (times->hold) {
      case TokenTimes::Hold::MT: mt_holds_ = false; break;
      case TokenTimes::Hold::Claim: claimed_.erase(claimed_.find(times->seq)); break;
      case TokenTimes::Hold::Prefetch: reading_.erase(reading_.find(times->seq)); break;
      case TokenTimes::Hold::None: break;
    }
    times->hold = TokenTimes::Hold::None;
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
