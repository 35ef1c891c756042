// The per-process prefetch cache: byte ranges of files fetched ahead by the PT and the
// waiting threads, handed to the MT when they are exactly what its read would return.
//
// Memory is bounded: every entry's bytes are reserved before they are fetched, and a
// prefetching thread waits for room. Entries the MT has passed (their sequence number is
// below the MT's) are evicted first, so a PT that guessed wrong can never fill the cache
// for good or make the MT wait.
//
// Which entries may be served is decided by one rule, docs/design/coherence.md: an own
// change of a file drops every entry of it (begin_change/end_change), and serve() takes
// an entry only while the file's change generation (of the node's table) and its stamp
// are the ones seen at its fetch start; an acquire point drops what no longer is
// (drop_changed), and everything where the table cannot tell. An entry is never
// re-stamped.
//
// Entry life: reserve() -> filling (owned by the fetching thread, which appends bytes
// with fill_pointer()/filled()) -> finish() -> complete (served to the MT, removed when
// the MT has read through its end) or dropped. The MT may take the filled prefix of an
// entry still being fetched only while it holds the process I/O token or a claim of that
// entry's prefetch (IoScheduler::acquire_claim: the fetcher is then paused between
// sub-reads, so the MT gets the bytes of the sub-read that was in progress); in
// PPIOS_MODE=pp it waits for the fetch instead.
//
// One mutex guards everything here; bytes are copied to the MT outside it, with the
// entries pinned so that nobody frees them meanwhile.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "FileKey.h"

namespace ppios {

struct CacheEntry;

enum class ReserveResult {
  Reserved,  // *entry is yours to fill, then finish()
  Covered,   // the range is already cached or being fetched
  TooLarge,  // larger than the whole cache (or no memory left for it)
  Busy,      // the program is changing the file, or it is held (stdio writes, a mapping)
  Stopped,   // the runtime is shutting down
};

enum class InFlightPolicy {
  Wait,       // wait until in-flight fetches finish (PPIOS_MODE=pp)
  NeedToken,  // caller does not hold the I/O token: report that it needs it
  Claim,      // caller holds the I/O token: take what in-flight fetches have so far
};

struct ServeResult {
  size_t bytes = 0;          // bytes copied, a prefix of the request
  bool needs_token = false;  // NeedToken only: an in-flight fetch covers the request
  uint64_t in_flight_seq = 0;  // and its sequence number (what the MT claims)
};

struct CacheCounters {
  size_t bytes_in_use = 0;
  size_t peak_bytes = 0;
  uint64_t unused_bytes = 0;  // fetched, then dropped without the MT reading them
  uint64_t evicted_entries = 0;
  uint64_t invalidated_entries = 0;
  uint64_t unserved_entries = 0;  // fetched entries the MT never took a byte from
  size_t external_bytes = 0;      // PT memory (ppios_pt_malloc) counted in bytes_in_use
};

class PrefetchCache {
 public:
  explicit PrefetchCache(size_t capacity_bytes);
  ~PrefetchCache();
  PrefetchCache(const PrefetchCache &) = delete;
  PrefetchCache &operator=(const PrefetchCache &) = delete;

  size_t capacity() const { return capacity_; }
  // What an entry of `length` bytes takes of the capacity: its buffer as allocated and
  // its bookkeeping. The capacity bounds memory, not the bytes asked for: a PT that
  // prefetches small reads one by one holds far more than their sum.
  static size_t footprint(size_t length);

  // --- prefetching threads
  ReserveResult reserve(const FileKey &key, const FileStamp &stamp, off_t offset, size_t length,
                        uint64_t seq, CacheEntry **entry);
  // Where the next fetched bytes go, and how many are still wanted; nullptr once the
  // entry is no longer wanted. Only the fetching thread writes there.
  char *fill_pointer(CacheEntry *entry, size_t *remaining);
  // Records `bytes` more fetched bytes. Returns false if the entry is no longer wanted
  // (the MT claimed it, or a write invalidated it): stop fetching and finish() it.
  bool filled(CacheEntry *entry, size_t bytes);
  // Copies the bytes fetched so far into `dest` (the fetching thread only); returns how many.
  size_t copy_fetched(CacheEntry *entry, char *dest);
  // Ends a fetch. `ok` false (an error) drops the entry; a short fetch (EOF) keeps what
  // was fetched.
  void finish(CacheEntry *entry, bool ok);

  // --- main thread
  // Whether a prefetching thread was ever started (mark_used, by the MT as it starts the
  // PT, before anything can be reserved; a reservation marks it too). Until then nothing
  // can be served, and the MT's reads skip the probes a serve needs: a process whose PT
  // never starts pays for no more than the descriptor's kind. Marking at the start, not
  // at the first reservation, keeps the MT from racing past an entry of its own read.
  bool used() const { return used_.load(std::memory_order_acquire); }
  void mark_used() { used_.store(true, std::memory_order_release); }
  ServeResult serve(const FileKey &key, const FileStamp &stamp, off_t offset, size_t length,
                    char *buffer, InFlightPolicy policy);
  // The MT completed its transfer number `seq`: entries with lower numbers are passed.
  void mt_progress(uint64_t seq);
  // Brackets an own change of the file (a write, a truncation, any call that can change
  // its bytes or size): nothing of it is reserved meanwhile, and at the end every entry
  // of it is dropped, whatever its range, including entries still being filled.
  void begin_change(const FileKey &key);
  void end_change(const FileKey &key);
  // Drops every entry of the file (an own change that is over already).
  void invalidate_file(const FileKey &key);
  // An acquire point: drops every entry whose file's generation now, current(file),
  // differs from the one at its fetch start. Returns how many were dropped.
  size_t drop_changed(const std::function<uint64_t(const FileKey &)> &current);
  // Where an entry's generation comes from (ChangeGenerations::current), read under the
  // cache's lock at its reservation, before any of its bytes is read, and again as each
  // serve() starts: an entry is served only while its file's generation is the one it was
  // fetched with. kHeldGeneration: the file is held by some process, and nothing of it is
  // reserved. Set once, before any prefetch; without it every generation is 0.
  static constexpr uint64_t kHeldGeneration = UINT64_MAX;
  void set_generation_source(std::function<uint64_t(const FileKey &)> source) {
    generation_source_ = std::move(source);
  }
  // While a file has buffered stdio writes, nothing of it is cached or served.
  void hold_file(const FileKey &key);
  void unhold_file(const FileKey &key);

  // Memory of the PT's own (ppios_pt_malloc) counted against the same capacity, so the
  // PT's copies of the program's tables and its prefetched bytes together stay within
  // PPIOS_CACHE_MB. Never waits: false if the bytes do not fit even after evicting the
  // entries the MT has passed.
  bool take_external(size_t bytes);
  void give_external(size_t bytes);

  // Wakes threads waiting for room; reserve() returns Stopped from then on.
  void stop();

  CacheCounters counters();

  // Called (with the cache's lock held: it must take no lock but leaves) for every
  // entry with fetched bytes that is freed, with whether the MT took any of them. Set
  // once, before any prefetch.
  void set_free_observer(std::function<void(const FileKey &, bool used)> observer) {
    free_observer_ = std::move(observer);
  }

 private:
  struct FileEntries {
    std::multimap<off_t, CacheEntry *> by_offset;
    off_t longest = 0;  // no entry of the file was ever longer: lookups start pos - longest
    // The first entry that may hold byte `pos` (one starting at or after pos - longest):
    // the entries before it end before `pos`, so a lookup is not a walk of the whole file
    // (a program reading small records leaves thousands of entries behind it).
    std::multimap<off_t, CacheEntry *>::iterator first_holding(off_t pos) {
      return by_offset.lower_bound(pos - std::min(pos, longest));
    }
    int changes_in_progress = 0;
    int holds = 0;
    // No entry of the file has an older generation: an acquire point at which the file's
    // generation is still this one has nothing of it to look at.
    uint64_t generation_floor = UINT64_MAX;
  };

  CacheEntry *best_entry(FileEntries &file, off_t pos);
  void unlink_entry(CacheEntry *entry);    // out of the index; freed once unpinned and finished
  void maybe_free(CacheEntry *entry);
  bool evict_one_passed();
  void forget_file_if_empty(const FileKey &key);
  void drop_all_of(FileEntries &file);

  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable room_cv_;     // prefetchers waiting for room
  std::condition_variable fetched_cv_;  // MT waiting for an in-flight fetch (pp mode)
  std::map<FileKey, FileEntries> files_;
  uint64_t mt_completed_ = 0;
  bool stopped_ = false;
  int room_waiters_ = 0;
  CacheCounters counters_;
  std::function<void(const FileKey &, bool)> free_observer_;
  std::function<uint64_t(const FileKey &)> generation_source_;
  std::atomic<bool> used_{false};
};

}  // namespace ppios
