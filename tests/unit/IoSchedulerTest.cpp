#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "IoScheduler.h"

using ppios::IoScheduler;
using ppios::TokenTimes;
using namespace std::chrono_literals;

namespace {

// Not an ASSERT: a test must go on to join its threads whatever happens.
void wait_for_waiters(IoScheduler &s, size_t n) {
  for (int i = 0; i < 5000 && s.prefetch_waiters() < n; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(s.prefetch_waiters(), n);
}

}  // namespace

// While a prefetcher streams sub-reads, each MT acquisition waits for at most the
// sub-read in progress, and no sub-read starts while the MT waits.
TEST(IoScheduler, MainThreadWaitsForAtMostOneSubRead) {
  IoScheduler s(true);
  std::atomic<bool> done{false};
  std::mutex log_mu;
  std::vector<TokenTimes> subreads;
  std::thread pt([&] {
    while (!done) {
      TokenTimes t;
      if (!s.acquire_prefetch(1, &t)) break;
      std::this_thread::sleep_for(300us);  // the sub-read
      s.release(&t);
      std::lock_guard<std::mutex> lock(log_mu);
      subreads.push_back(t);
    }
  });
  std::vector<TokenTimes> mt;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(200us);
    TokenTimes t;
    s.acquire_mt(&t);
    std::this_thread::sleep_for(50us);  // the MT's own access
    s.release(&t);
    mt.push_back(t);
  }
  done = true;
  pt.join();
  ASSERT_GT(subreads.size(), 10u);
  int behind_one = 0;
  for (const TokenTimes &w : mt) {
    int in_progress = 0;
    for (const TokenTimes &r : subreads) {
      EXPECT_FALSE(r.granted_ns > w.asked_ns && r.granted_ns < w.granted_ns)
          << "a sub-read was granted while the MT waited";
      if (r.granted_ns <= w.asked_ns && w.asked_ns < r.released_ns) ++in_progress;
    }
    EXPECT_LE(in_progress, 1);
    behind_one += in_progress;
  }
  EXPECT_GT(behind_one, 0) << "the test never made the MT wait behind a sub-read";
}

TEST(IoScheduler, PrefetchersGoInSequenceOrder) {
  IoScheduler s(true);
  TokenTimes mt;
  s.acquire_mt(&mt);
  std::mutex mu;
  std::vector<uint64_t> order;
  std::vector<std::thread> threads;
  for (uint64_t seq : {30, 10, 20}) {
    threads.emplace_back([&, seq] {
      TokenTimes t;
      if (!s.acquire_prefetch(seq, &t)) {
        ADD_FAILURE() << "prefetcher " << seq << " was refused";
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(seq);
      }
      s.release(&t);
    });
    wait_for_waiters(s, threads.size());
  }
  s.release(&mt);
  for (auto &t : threads) t.join();
  EXPECT_EQ(order, (std::vector<uint64_t>{10, 20, 30}));
}

TEST(IoScheduler, StopWakesWaitingPrefetchers) {
  IoScheduler s(true);
  TokenTimes mt;
  s.acquire_mt(&mt);
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      TokenTimes t;
      if (!s.acquire_prefetch(static_cast<uint64_t>(i), &t)) ++refused;
    });
  wait_for_waiters(s, 3);
  s.stop();
  for (auto &t : threads) t.join();
  EXPECT_EQ(refused, 3);
  s.release(&mt);
}

// A prefetcher keeps its place in the queue while it is not taking the token (e.g. while
// it acquires a system slot): a later prefetcher with a higher number cannot overtake it.
TEST(IoScheduler, AQueuedPrefetcherKeepsItsPlace) {
  IoScheduler s(true);
  IoScheduler::Turn near(s, 5);
  ASSERT_TRUE(near.wait());
  std::atomic<bool> far_ran{false};
  std::thread far([&] {
    TokenTimes t;
    if (s.acquire_prefetch(9, &t)) {
      far_ran = true;
      s.release(&t);
    }
  });
  wait_for_waiters(s, 2);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(far_ran) << "the later prefetch overtook the nearer one";
  TokenTimes t;
  EXPECT_TRUE(near.take(&t));
  s.release(&t);
  far.join();
  EXPECT_TRUE(far_ran);
}

TEST(IoScheduler, DisabledNeverBlocks) {
  IoScheduler s(false);
  TokenTimes a, b, c;
  s.acquire_mt(&a);
  s.acquire_mt(&b);  // would deadlock if the token existed
  EXPECT_TRUE(s.acquire_prefetch(1, &c));
  EXPECT_FALSE(s.mt_waiting());
}

// PPIOS_PT_READERS: up to `width` prefetch sub-reads share the token at once, never
// more, and the MT's hold stays exclusive: it waits for every sub-read in progress and
// none starts while it holds the token.
TEST(IoScheduler, ReadersShareTheTokenUpToItsWidthAndTheMainThreadAlone) {
  IoScheduler s(true, 2);
  std::atomic<bool> done{false};
  std::atomic<int> in_progress{0}, most{0}, mt_in{0};
  std::atomic<int> overlapped_mt{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&, r] {
      for (uint64_t seq = static_cast<uint64_t>(r); !done; seq += 3) {
        TokenTimes t;
        if (!s.acquire_prefetch(seq, &t)) break;
        int now = ++in_progress;
        for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {}
        if (mt_in) ++overlapped_mt;
        std::this_thread::sleep_for(200us);  // the sub-read
        --in_progress;
        s.release(&t);
      }
    });
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(500us);
    TokenTimes t;
    s.acquire_mt(&t);
    ++mt_in;
    if (in_progress > 0) ++overlapped_mt;
    std::this_thread::sleep_for(100us);  // the MT's claim
    --mt_in;
    s.release(&t);
  }
  done = true;
  s.stop();
  for (std::thread &t : readers) t.join();
  EXPECT_EQ(most.load(), 2) << "sub-reads in progress at once";
  EXPECT_EQ(overlapped_mt.load(), 0) << "a sub-read ran while the MT held the token";
}

// The work-conserving MT claims one prefetch: it waits for that prefetch's sub-read in
// progress only, no sub-read of it starts while claimed, and the other prefetches read on.
TEST(IoScheduler, AClaimPausesOnlyTheClaimedPrefetch) {
  IoScheduler s(true, 2);
  TokenTimes near, far;
  ASSERT_TRUE(s.acquire_prefetch(5, &near));
  ASSERT_TRUE(s.acquire_prefetch(6, &far));
  std::atomic<bool> claimed{false};
  TokenTimes claim;
  std::thread mt([&] {
    s.acquire_claim(5, &claim);
    claimed = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(claimed) << "the claim did not wait for the claimed prefetch's sub-read";
  s.release(&near);
  for (int i = 0; i < 5000 && !claimed; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(claimed) << "the claim waited for another prefetch's sub-read";
  mt.join();
  // While claimed: prefetch 5 may not start again, prefetch 7 may (a share is free).
  IoScheduler::Turn again(s, 5);
  TokenTimes t5, t7;
  EXPECT_FALSE(again.take(&t5));
  EXPECT_TRUE(s.acquire_prefetch(7, &t7)) << "a prefetch behind the claimed one was held up";
  s.release(&t7);
  s.release(&far);
  s.release(&claim);
  EXPECT_TRUE(again.take(&t5));
  s.release(&t5);
}
