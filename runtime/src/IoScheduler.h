// Intra-process I/O scheduling (the PPIOS paper, Zhao, Yoshigoe and Xie, 2013, sec. 4.3):
// one storage access at a time per process, and the main thread always wins.
//
// The process I/O token is held for the length of one MT access or one PT/WT sub-read.
// Once an MT asks for the token, no new prefetch sub-read starts: the MT waits for at
// most the sub-read in progress. Among prefetching threads (the PT and the waiting
// threads) the one whose data is needed soonest (lowest sequence number) goes first.
// When disabled (PPIOS_MODE=pp or off) every call returns at once.
//
// In the work-conserving mode (PPIOS_MODE=ppios) the MT takes the token only to claim a
// prefetch in flight, not for its own storage accesses: the token then keeps prefetch
// sub-reads apart from each other and from claims, and the coordinator's cap (with its
// yield requests) keeps the MT first. PPIOS_MODE=ppios-strict and intra are the paper's
// rule: the MT holds the token for every storage access.
//
// The token may be shared by up to `prefetch_width` prefetch sub-reads at once
// (PPIOS_PT_READERS in PPIOS_MODE=ppios: the PT's readers each read under a system slot
// of their own). The MT's hold (acquire_mt) is exclusive all the same: it waits until
// every sub-read in progress has ended, and no new one starts while it waits. A claim
// (acquire_claim, the work-conserving mode's) pauses only the prefetch it claims: the
// MT waits for that prefetch's sub-read in progress, not for the other readers'.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>

namespace ppios {

// Times taken under the scheduler's lock, so that the order of MT waits and PT grants
// seen in a trace is the order in which they happened.
struct TokenTimes {
  uint64_t asked_ns = 0;
  uint64_t granted_ns = 0;
  uint64_t released_ns = 0;
  // What the hold is, for release(): an MT hold, a claim of prefetch `seq`, or a
  // prefetch sub-read of `seq`.
  enum class Hold : unsigned char { None, MT, Claim, Prefetch } hold = Hold::None;
  uint64_t seq = 0;
};

class IoScheduler {
 public:
  explicit IoScheduler(bool enabled, int prefetch_width = 1)
      : enabled_(enabled), prefetch_width_(prefetch_width < 1 ? 1 : prefetch_width) {}

  bool enabled() const { return enabled_; }

  // MT: blocks until the token is free (no sub-read holds a share of it). Never fails.
  void acquire_mt(TokenTimes *times);
  // MT, work-conserving: blocks until no sub-read of the prefetch for transfer `seq` is
  // in progress; none starts until release(). Never fails.
  void acquire_claim(uint64_t seq, TokenTimes *times);

  // A prefetching thread's (PT or WT) place in the queue for the token. The queue is
  // ordered by sequence number: the prefetch needed soonest goes first, and keeps its
  // place while it acquires a system slot.
  class Turn {
   public:
    Turn(IoScheduler &scheduler, uint64_t seq);
    ~Turn();  // leaves the queue unless take() succeeded
    Turn(const Turn &) = delete;
    Turn &operator=(const Turn &) = delete;
    // Blocks until the token has a free share, no MT waits and nobody is ahead in the
    // queue, without taking the token. False once stop() was called.
    bool wait();
    // Takes the token if that is so right now. A prefetcher holding a system slot uses
    // this instead of waiting, so that it never blocks on the token while holding a
    // slot (its MT may hold the token and wait for a slot).
    bool take(TokenTimes *times);

   private:
    IoScheduler &scheduler_;
    const uint64_t seq_;
    std::multiset<uint64_t>::iterator place_;
    bool queued_ = false;
  };

  // A Turn's wait() and take() until it succeeds; false once stopped.
  bool acquire_prefetch(uint64_t seq, TokenTimes *times);

  void release(TokenTimes *times);

  // True while an MT waits for the token: a prefetching thread checks it between
  // sub-reads to give way (and to give its system slot back).
  bool mt_waiting() const { return mt_waiting_.load(std::memory_order_acquire) > 0; }

  // Wakes every prefetching waiter; they return false from then on.
  void stop();

  // Number of prefetching threads waiting for the token (for tests and traces).
  size_t prefetch_waiters();

 private:
  const bool enabled_;
  const int prefetch_width_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool mt_holds_ = false;
  std::multiset<uint64_t> reading_;  // sequence numbers of the sub-reads in progress
  std::multiset<uint64_t> claimed_;  // prefetches the MT claims
  bool stopped_ = false;
  std::atomic<int> mt_waiting_{0};
  std::multiset<uint64_t> prefetch_waiting_;  // sequence numbers of queued PT/WTs

  // With mu_ held: the queued prefetcher `seq` may take the token now (the first in the
  // queue that is not claimed).
  bool prefetch_may_run(uint64_t seq) const;
};

}  // namespace ppios
