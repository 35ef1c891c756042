// The back-off's per-file judgement, and the cache reporting freed entries to it.
#include <gtest/gtest.h>

#include <vector>

#include "Backoff.h"
#include "PrefetchCache.h"

using ppios::BackoffReason;
using ppios::FileKey;
using ppios::FileStamp;
using ppios::PrefetchBackoff;

namespace {
const FileKey kA{1, 10};
const FileKey kB{1, 11};

// Number of skip() calls that return true in a row, for transfers the MT is at.
uint64_t skips(PrefetchBackoff &b, const FileKey &key) {
  uint64_t n = 0;
  while (b.skip(key, 10, 9)) ++n;
  return n;
}
}  // namespace

TEST(Backoff, MostlyLatePrefetchesBackTheFileOffThenProbeAgain) {
  PrefetchBackoff b(true);
  BackoffReason why = BackoffReason::None;
  int calls = 0;
  while (why == BackoffReason::None && calls < 100) {
    why = b.record_prefetch(kA, calls % 4 != 0);  // 3 in 4 late
    ++calls;
  }
  EXPECT_EQ(why, BackoffReason::Late);
  EXPECT_EQ(calls, static_cast<int>(PrefetchBackoff::kWindow));
  EXPECT_TRUE(b.backed_off(kA));
  EXPECT_FALSE(b.backed_off(kB));  // per file
  EXPECT_FALSE(b.skip(kB, 10, 9));
  // Skipping ahead: a transfer further ahead than kLead still goes (and counts).
  EXPECT_FALSE(b.skip(kA, 9 + PrefetchBackoff::kLead + 1, 9));
  EXPECT_TRUE(b.skip(kA, 9 + PrefetchBackoff::kLead, 9));
  EXPECT_EQ(skips(b, kA), PrefetchBackoff::kFirstSkip - 2);
  // Probing again: still late, so the next back-off is twice as long.
  for (uint32_t i = 0; i < PrefetchBackoff::kWindow; ++i) b.record_prefetch(kA, true);
  EXPECT_EQ(skips(b, kA), 2 * PrefetchBackoff::kFirstSkip);
}

TEST(Backoff, PrefetchesThatPayOffAreNeverBackedOff) {
  PrefetchBackoff b(true);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(b.record_prefetch(kA, i % 3 == 0), BackoffReason::None);  // 1 in 3 late
    EXPECT_EQ(b.record_entry(kA, i % 5 != 0), BackoffReason::None);     // 4 in 5 used
  }
  EXPECT_FALSE(b.skip(kA, 10, 9));
}

TEST(Backoff, UnusedEntriesBackTheFileOff) {
  PrefetchBackoff b(true);
  BackoffReason why = BackoffReason::None;
  for (uint32_t i = 0; i < PrefetchBackoff::kWindow && why == BackoffReason::None; ++i)
    why = b.record_entry(kA, false);
  EXPECT_EQ(why, BackoffReason::Unused);
  EXPECT_TRUE(b.backed_off(kA));
  EXPECT_TRUE(b.skip(kA, 1000, 1));  // every call, however far ahead
}

TEST(Backoff, DisabledNeverBacksOff) {
  PrefetchBackoff b(false);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(b.record_prefetch(kA, true), BackoffReason::None);
  EXPECT_FALSE(b.skip(kA, 10, 9));
}

TEST(Backoff, TheCacheReportsEveryFreedEntryWithBytes) {
  ppios::PrefetchCache cache(1 << 20);
  std::vector<std::pair<FileKey, bool>> freed;
  cache.set_free_observer([&](const FileKey &key, bool used) { freed.emplace_back(key, used); });
  FileStamp stamp{};
  // Entry 1 is read by the MT; entry 2 never, and is evicted once the MT passed it.
  for (uint64_t seq : {1u, 2u}) {
    ppios::CacheEntry *e = nullptr;
    ASSERT_EQ(cache.reserve(kA, stamp, static_cast<off_t>(seq * 4096), 4096, seq, &e),
              ppios::ReserveResult::Reserved);
    size_t remaining = 0;
    char *dest = cache.fill_pointer(e, &remaining);
    std::fill(dest, dest + remaining, 'x');
    cache.filled(e, remaining);
    cache.finish(e, true);
  }
  char buf[4096];
  EXPECT_EQ(cache.serve(kA, stamp, 4096, 4096, buf, ppios::InFlightPolicy::NeedToken).bytes, 4096u);
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_TRUE(freed[0].second);
  cache.mt_progress(2);
  cache.invalidate_file(kA);
  ASSERT_EQ(freed.size(), 2u);
  EXPECT_FALSE(freed[1].second);
}
