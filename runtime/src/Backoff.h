// Never slower: the runtime's judgement of whether prefetching a file pays off, and
// what it does when it does not (PPIOS_BACKOFF, on by default).
//
// Per file, the prefetches are judged in windows: a prefetch is late when the MT had
// started that transfer before the prefetcher could fetch anything of it (the MT reads
// it itself; the prefetcher only spent CPU), and a finished cache entry is unused when
// the MT never took a byte from it (its bytes cost the device bandwidth for nothing).
// When most prefetches of a window are late, or most entries unused, the file is backed
// off for its next prefetch calls: 32 of them the first time, twice as many each time
// after, up to 4096. Backed off for lateness, the prefetcher skips ahead: a call for a
// transfer the MT will start within the next kLead transfers is skipped (the MT would
// overtake it), one further ahead still goes, so a PT that catches up prefetches again.
// Backed off for unused bytes, every call is skipped (no I/O, no cache room). Then a new
// window probes the file again, so a program whose phase changes gets its prefetching
// back.
//
// Lifecycle: a file's record is made at its first judged prefetch and lives until the
// runtime ends (one record per file the PT prefetched from). Prefetching threads call
// skip() and record_prefetch(); the cache reports each entry it frees through
// record_entry() (with its own lock held: mu_ here is a leaf).
//
// The CPU rule (the PT uses as much CPU as the MT without paying off) is the Runtime's:
// it stops the PT, which is not a per-file matter.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "FileKey.h"

namespace ppios {

enum class BackoffReason { None, Late, Unused };

class PrefetchBackoff {
 public:
  static constexpr uint32_t kWindow = 16;        // judged prefetches (or entries) per window
  static constexpr uint64_t kFirstSkip = 32;     // prefetch calls skipped at the first back-off
  static constexpr uint64_t kMaxSkip = 4096;
  static constexpr uint64_t kLead = 2;           // how far ahead a late file's prefetch must be

  explicit PrefetchBackoff(bool enabled) : enabled_(enabled) {}

  // A prefetcher is about to prefetch transfer `seq` of `key`, and the MT has started
  // `mt_started` transfers: true if the call is to be skipped (the file is backed off).
  bool skip(const FileKey &key, uint64_t seq, uint64_t mt_started);
  // A prefetch of `key` was judged: `late` if the MT had started the transfer first.
  // Returns the reason if this backs the file off.
  BackoffReason record_prefetch(const FileKey &key, bool late);
  // The cache freed an entry of `key` that held fetched bytes; `used` if the MT took
  // some. Returns the reason if this backs the file off.
  BackoffReason record_entry(const FileKey &key, bool used);

  bool backed_off(const FileKey &key);

 private:
  struct Record {
    uint32_t prefetches = 0;  // this window's judged prefetches
    uint32_t late = 0;
    uint32_t entries = 0;     // this window's freed entries
    uint32_t unused = 0;
    uint64_t skip_left = 0;   // prefetch calls still backed off
    BackoffReason why = BackoffReason::None;  // of the back-off in force
    uint32_t times = 0;       // back-offs so far
  };
  // With mu_ held.
  BackoffReason judge(Record &r);

  const bool enabled_;
  std::mutex mu_;
  std::map<FileKey, Record> files_;
};

}  // namespace ppios
