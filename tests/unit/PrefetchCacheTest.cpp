#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <map>
#include <thread>
#include <vector>

#include "PrefetchCache.h"

using namespace ppios;
using namespace std::chrono_literals;

namespace {

const FileKey kFile{1, 42};
const FileKey kOther{1, 43};
const FileStamp kStamp{1000, 7, 7};

// The byte at `offset` of the pretend file.
char byte_at(off_t offset) { return static_cast<char>(offset * 7 + 3); }

// Fetches [offset, offset+length) of the pretend file into a reserved entry.
ReserveResult prefetch(PrefetchCache &cache, off_t offset, size_t length, uint64_t seq,
                       const FileKey &key = kFile, size_t stop_after = SIZE_MAX) {
  CacheEntry *e = nullptr;
  ReserveResult r = cache.reserve(key, kStamp, offset, length, seq, &e);
  if (r != ReserveResult::Reserved) return r;
  size_t remaining;
  char *p = cache.fill_pointer(e, &remaining);
  if (p == nullptr) {  // no longer wanted (stopped, claimed or invalidated)
    cache.finish(e, false);
    return r;
  }
  size_t n = std::min(remaining, stop_after);
  for (size_t i = 0; i < n; ++i) p[i] = byte_at(offset + static_cast<off_t>(i));
  cache.filled(e, n);
  cache.finish(e, true);
  return r;
}

bool matches_file(const std::vector<char> &buf, off_t offset, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (buf[i] != byte_at(offset + static_cast<off_t>(i))) return false;
  return true;
}

size_t serve(PrefetchCache &cache, off_t offset, size_t length, std::vector<char> *buf,
             const FileStamp &stamp = kStamp) {
  buf->assign(length, 0);
  return cache.serve(kFile, stamp, offset, length, buf->data(), InFlightPolicy::Wait).bytes;
}

}  // namespace

TEST(PrefetchCache, ServesAWholeHitOnceAndFreesIt) {
  PrefetchCache cache(1 << 20);
  ASSERT_EQ(prefetch(cache, 100, 500, 1), ReserveResult::Reserved);
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 100, 500, &buf), 500u);
  EXPECT_TRUE(matches_file(buf, 100, 500));
  EXPECT_EQ(cache.counters().bytes_in_use, 0u);
  EXPECT_EQ(serve(cache, 100, 500, &buf), 0u) << "a consumed entry must be gone";
}

TEST(PrefetchCache, ServesTheCachedPrefixOfALongerRead) {
  PrefetchCache cache(1 << 20);
  prefetch(cache, 0, 100, 1);
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 50, 100, &buf), 50u);
  EXPECT_TRUE(matches_file(buf, 50, 50));
  EXPECT_EQ(serve(cache, 0, 10, &buf), 0u) << "entry read through its end is dropped";
}

TEST(PrefetchCache, ChainsAdjacentAndOverlappingEntries) {
  PrefetchCache cache(1 << 20);
  prefetch(cache, 0, 100, 1);
  prefetch(cache, 100, 100, 2);
  prefetch(cache, 150, 100, 3);  // overlaps the second one
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 10, 240, &buf), 240u);
  EXPECT_TRUE(matches_file(buf, 10, 240));
}

TEST(PrefetchCache, MissesOnAnotherFileAndBeforeTheEntry) {
  PrefetchCache cache(1 << 20);
  prefetch(cache, 100, 100, 1, kOther);
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 100, 100, &buf), 0u);
  prefetch(cache, 100, 100, 2);
  EXPECT_EQ(serve(cache, 50, 100, &buf), 0u) << "the first bytes are not cached";
}

TEST(PrefetchCache, DropsEntriesOfAFileThatChanged) {
  PrefetchCache cache(1 << 20);
  prefetch(cache, 0, 100, 1);
  std::vector<char> buf;
  FileStamp newer = kStamp;
  newer.mtime_ns += 1;
  EXPECT_EQ(serve(cache, 0, 100, &buf, newer), 0u);
  EXPECT_EQ(serve(cache, 0, 100, &buf), 0u) << "the stale entry must have been dropped";
  EXPECT_EQ(cache.counters().invalidated_entries, 1u);
}

TEST(PrefetchCache, KeepsWhatExistsWhenAFetchEndsShortAtEof) {
  PrefetchCache cache(1 << 20);
  prefetch(cache, 0, 100, 1, kFile, 60);
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 0, 100, &buf), 60u);
  EXPECT_TRUE(matches_file(buf, 0, 60));
}

TEST(PrefetchCache, RefusesWhatIsTooLargeOrAlreadyCovered) {
  const size_t capacity = PrefetchCache::footprint(500) + PrefetchCache::footprint(200);
  PrefetchCache cache(capacity);
  EXPECT_EQ(prefetch(cache, 0, capacity, 1), ReserveResult::TooLarge) << "its bookkeeping too";
  EXPECT_EQ(prefetch(cache, 0, 500, 1), ReserveResult::Reserved);
  EXPECT_EQ(prefetch(cache, 100, 200, 1), ReserveResult::Covered) << "same transfer twice";
  EXPECT_EQ(prefetch(cache, 400, 200, 1), ReserveResult::Reserved) << "only partly covered";
}

// A program that reads the same bytes twice performs two transfers: each gets its own
// entry, and each MT read takes the entry of its own transfer.
TEST(PrefetchCache, RereadsOfTheSameBytesGetEntriesOfTheirOwn) {
  PrefetchCache cache(1 << 20);
  EXPECT_EQ(prefetch(cache, 0, 100, 1), ReserveResult::Reserved);
  EXPECT_EQ(prefetch(cache, 0, 100, 2), ReserveResult::Reserved);
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 0, 100, &buf), 100u);
  cache.mt_progress(1);
  EXPECT_EQ(serve(cache, 0, 100, &buf), 100u);
  EXPECT_TRUE(matches_file(buf, 0, 100));
  EXPECT_EQ(cache.counters().bytes_in_use, 0u);
}

TEST(PrefetchCache, MemoryIsBoundedAndPassedEntriesMakeRoom) {
  const size_t capacity = 2 * PrefetchCache::footprint(600) - 1;
  PrefetchCache cache(capacity);
  ASSERT_EQ(prefetch(cache, 0, 600, 1), ReserveResult::Reserved);
  std::atomic<bool> reserved{false};
  std::thread pt([&] {
    EXPECT_EQ(prefetch(cache, 5000, 600, 2), ReserveResult::Reserved);
    reserved = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(reserved) << "the second entry does not fit until the first is passed";
  cache.mt_progress(1);  // the MT did transfer 1 without using the entry (a wrong guess)
  pt.join();
  EXPECT_TRUE(reserved);
  CacheCounters c = cache.counters();
  EXPECT_LE(c.peak_bytes, capacity);
  EXPECT_EQ(c.evicted_entries, 1u);
  EXPECT_GE(c.unused_bytes, 600u);
}

// PPIOS_CACHE_MB bounds memory: an entry counts its buffer as allocated and its
// bookkeeping, so a PT that prefetches 10-byte reads one by one cannot hold many times
// the capacity in entries (each 10-byte buffer once took a whole page).
TEST(PrefetchCache, SmallEntriesCountTheMemoryTheyTake) {
  PrefetchCache cache(1 << 20);
  for (uint64_t seq = 1; seq <= 100; ++seq)
    ASSERT_EQ(prefetch(cache, static_cast<off_t>(seq) * 10, 10, seq), ReserveResult::Reserved);
  EXPECT_EQ(cache.counters().bytes_in_use, 100 * PrefetchCache::footprint(10));
  EXPECT_GE(PrefetchCache::footprint(10), 16 + 64u);
  EXPECT_LT(PrefetchCache::footprint(10), 1024u) << "a small buffer is not a page";
  EXPECT_GE(PrefetchCache::footprint(5000), 8192u) << "a page or more is whole pages";
}

TEST(PrefetchCache, StopReleasesAPrefetcherWaitingForRoom) {
  PrefetchCache cache(2 * PrefetchCache::footprint(600) - 1);
  prefetch(cache, 0, 600, 5);
  std::thread pt([&] { EXPECT_EQ(prefetch(cache, 5000, 600, 6), ReserveResult::Stopped); });
  std::this_thread::sleep_for(20ms);
  cache.stop();
  pt.join();
}

// docs/design/coherence.md, rule 1: an own change drops every entry of the file, however
// far from the change, and none is re-stamped (an entry fetched before another process's
// change would otherwise become valid again with the file's new stamp).
TEST(PrefetchCache, AnOwnChangeDropsEveryEntryOfTheFileAndReservesNothingMeanwhile) {
  PrefetchCache cache(1 << 20);
  prefetch(cache, 0, 100, 1);
  prefetch(cache, 1000, 100, 2);
  cache.begin_change(kFile);
  EXPECT_EQ(prefetch(cache, 5000, 100, 3), ReserveResult::Busy);
  cache.end_change(kFile);
  FileStamp after = kStamp;
  after.mtime_ns += 5;
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 0, 100, &buf, after), 0u);
  EXPECT_EQ(serve(cache, 1000, 100, &buf, after), 0u) << "an entry far from the change is dropped too";
  EXPECT_EQ(serve(cache, 1000, 100, &buf, kStamp), 0u) << "and not kept under its old stamp either";
  EXPECT_EQ(cache.counters().bytes_in_use, 0u);
  EXPECT_EQ(prefetch(cache, 5000, 100, 3), ReserveResult::Reserved);
}

TEST(PrefetchCache, AnEntryBeingFilledDuringAChangeIsNeverServed) {
  PrefetchCache cache(1 << 20);
  CacheEntry *entry = nullptr;
  ASSERT_EQ(cache.reserve(kFile, kStamp, 0, 100, 1, &entry), ReserveResult::Reserved);
  size_t remaining = 0;
  char *to = cache.fill_pointer(entry, &remaining);
  std::memset(to, 'o', 50);  // old bytes, read before the change
  EXPECT_TRUE(cache.filled(entry, 50));
  cache.begin_change(kFile);
  cache.end_change(kFile);
  to = cache.fill_pointer(entry, &remaining);
  EXPECT_EQ(to, nullptr) << "the fetcher is told to stop";
  cache.finish(entry, true);
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 0, 100, &buf), 0u);
}

// Rule 2: at an acquire point, entries whose file's generation moved since their fetch
// start are dropped; the others stay.
TEST(PrefetchCache, AnAcquirePointDropsEntriesWhoseGenerationMoved) {
  PrefetchCache cache(1 << 20);
  std::map<ino_t, uint64_t> generation;
  cache.set_generation_source([&](const FileKey &k) { return generation[k.ino]; });
  const FileKey other{kFile.dev, kFile.ino + 1};
  prefetch(cache, 0, 100, 1);
  CacheEntry *entry = nullptr;
  ASSERT_EQ(cache.reserve(other, kStamp, 0, 100, 2, &entry), ReserveResult::Reserved);
  size_t remaining = 0;
  std::memset(cache.fill_pointer(entry, &remaining), 'x', 100);
  cache.filled(entry, 100);
  cache.finish(entry, true);
  auto current = [&](const FileKey &k) { return generation[k.ino]; };
  EXPECT_EQ(cache.drop_changed(current), 0u) << "nothing moved";
  generation[kFile.ino] = 7;  // another process changed kFile after the fetch
  EXPECT_EQ(cache.drop_changed(current), 1u);
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 0, 100, &buf), 0u);
  ServeResult r = cache.serve(other, kStamp, 0, 100, buf.data(), InFlightPolicy::NeedToken);
  EXPECT_EQ(r.bytes, 100u) << "the unchanged file keeps its entry";
  prefetch(cache, 200, 100, 3);  // fetched at generation 7: valid
  EXPECT_EQ(cache.drop_changed(current), 0u);
  EXPECT_EQ(serve(cache, 200, 100, &buf), 100u);
}

TEST(PrefetchCache, HeldFilesAreNeitherCachedNorServed) {
  PrefetchCache cache(1 << 20);
  prefetch(cache, 0, 100, 1);
  cache.hold_file(kFile);
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 0, 100, &buf), 0u);
  EXPECT_EQ(prefetch(cache, 200, 100, 2), ReserveResult::Busy);
  cache.unhold_file(kFile);
  EXPECT_EQ(prefetch(cache, 200, 100, 2), ReserveResult::Reserved);
}

// The MT may take the fetched prefix of an in-flight entry only with the token; the
// fetcher then learns the entry is no longer wanted and its memory comes back.
TEST(PrefetchCache, TheMainThreadClaimsAnInFlightFetch) {
  PrefetchCache cache(1 << 20);
  CacheEntry *e = nullptr;
  ASSERT_EQ(cache.reserve(kFile, kStamp, 0, 1000, 1, &e), ReserveResult::Reserved);
  size_t remaining;
  char *p = cache.fill_pointer(e, &remaining);
  for (size_t i = 0; i < 300; ++i) p[i] = byte_at(static_cast<off_t>(i));
  ASSERT_TRUE(cache.filled(e, 300));

  std::vector<char> buf(1000);
  ServeResult r = cache.serve(kFile, kStamp, 0, 1000, buf.data(), InFlightPolicy::NeedToken);
  EXPECT_TRUE(r.needs_token);
  EXPECT_EQ(r.bytes, 0u);
  r = cache.serve(kFile, kStamp, 0, 1000, buf.data(), InFlightPolicy::Claim);
  EXPECT_EQ(r.bytes, 300u);
  EXPECT_TRUE(matches_file(buf, 0, 300));

  EXPECT_EQ(cache.fill_pointer(e, &remaining), nullptr) << "the fetcher must stop";
  EXPECT_FALSE(cache.filled(e, 0));
  cache.finish(e, true);
  EXPECT_EQ(cache.counters().bytes_in_use, 0u);
}

TEST(PrefetchCache, InPpModeTheMainThreadWaitsForAnInFlightFetch) {
  PrefetchCache cache(1 << 20);
  CacheEntry *e = nullptr;
  ASSERT_EQ(cache.reserve(kFile, kStamp, 0, 1000, 1, &e), ReserveResult::Reserved);
  std::thread pt([&] {
    std::this_thread::sleep_for(30ms);
    size_t remaining;
    char *p = cache.fill_pointer(e, &remaining);
    for (size_t i = 0; i < remaining; ++i) p[i] = byte_at(static_cast<off_t>(i));
    cache.filled(e, remaining);
    cache.finish(e, true);
  });
  std::vector<char> buf;
  EXPECT_EQ(serve(cache, 0, 1000, &buf), 1000u);
  EXPECT_TRUE(matches_file(buf, 0, 1000));
  pt.join();
}

// Many prefetchers and an MT at once: what the MT gets is always the file's bytes and
// the memory bound always holds (run under ThreadSanitizer in CI).
TEST(PrefetchCache, ConcurrentPrefetchersAndMainThread) {
  PrefetchCache cache(64 * 1024);
  const int kBlocks = 400;
  const size_t kBlock = 4096;
  std::atomic<uint64_t> mt_seq{0};
  std::vector<std::thread> fetchers;
  for (int t = 0; t < 3; ++t)
    fetchers.emplace_back([&, t] {
      for (int b = t; b < kBlocks; b += 3) {
        ReserveResult r = prefetch(cache, static_cast<off_t>(b) * kBlock, kBlock,
                                   static_cast<uint64_t>(b) + 1);
        if (r == ReserveResult::Stopped) return;
      }
    });
  size_t hits = 0;
  std::vector<char> buf;
  for (int b = 0; b < kBlocks; ++b) {
    off_t off = static_cast<off_t>(b) * kBlock;
    size_t got = serve(cache, off, kBlock, &buf);
    ASSERT_TRUE(matches_file(buf, off, got));
    hits += got;
    cache.mt_progress(++mt_seq);
    EXPECT_LE(cache.counters().bytes_in_use, 64u * 1024);
  }
  cache.stop();
  for (auto &t : fetchers) t.join();
  EXPECT_LE(cache.counters().peak_bytes, 64u * 1024);
  std::printf("concurrent: %zu of %zu bytes served from the cache\n", hits, kBlocks * kBlock);
}

// The PT's own memory (ppios_pt_malloc) shares the capacity with prefetched bytes: it is
// refused when it does not fit, and a prefetch that cannot fit beside it is too large
// rather than a wait that would never end.
TEST(PrefetchCacheTest, ExternalMemorySharesTheCapacity) {
  const size_t entry = PrefetchCache::footprint(300);
  PrefetchCache cache(600 + entry + 100);
  EXPECT_TRUE(cache.take_external(600));
  EXPECT_FALSE(cache.take_external(entry + 200));
  EXPECT_EQ(prefetch(cache, 0, 2000, 1), ReserveResult::TooLarge);
  EXPECT_EQ(prefetch(cache, 0, 300, 1), ReserveResult::Reserved);
  EXPECT_FALSE(cache.take_external(200));  // 600 and the entry in use
  EXPECT_EQ(cache.counters().peak_bytes, 600 + entry);
  cache.give_external(600);
  EXPECT_TRUE(cache.take_external(700));
  EXPECT_EQ(cache.counters().external_bytes, 700u);
}

// Entries the MT never took a byte from are counted as unserved (PPIOS_STATS pt_mismatch).
TEST(PrefetchCacheTest, UnservedEntriesAreCounted) {
  PrefetchCache cache(1 << 20);
  ASSERT_EQ(prefetch(cache, 0, 100, 1), ReserveResult::Reserved);
  ASSERT_EQ(prefetch(cache, 1000, 100, 2), ReserveResult::Reserved);
  ASSERT_EQ(prefetch(cache, 5000, 100, 3), ReserveResult::Reserved);
  char buf[100];
  EXPECT_EQ(cache.serve(kFile, kStamp, 0, 50, buf, InFlightPolicy::Wait).bytes, 50u);
  cache.invalidate_file(kOther);
  EXPECT_EQ(cache.counters().unserved_entries, 2u);
}
