#include "PrefetchCache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>

namespace ppios {

// Entry buffers never straddle a page they need not: a read into an unaligned buffer can
// reach a FUSE file system as two requests (the kernel splits at the page boundary). So a
// buffer of a page or more is page-aligned, and a smaller one aligned to its own size
// rounded up to a power of two (a 10-byte entry takes 16 bytes, not a page).
struct AlignedFree {
  void operator()(char *p) const { std::free(p); }
};
constexpr size_t kPage = 4096;

size_t buffer_alignment(size_t length) {
  size_t align = 64;
  while (align < length && align < kPage) align *= 2;
  return align;
}

size_t buffer_bytes(size_t length) {
  const size_t align = buffer_alignment(length);
  const size_t rounded = (length + align - 1) / align * align;
  return rounded == 0 ? align : rounded;
}

char *allocate_aligned(size_t length) {
  return static_cast<char *>(std::aligned_alloc(buffer_alignment(length), buffer_bytes(length)));
}

struct CacheEntry {
  FileKey key;
  FileStamp stamp;
  off_t offset = 0;
  size_t length = 0;    // reserved bytes; trimmed to `filled` when a fetch ends short
  size_t reserved = 0;  // bytes counted against the capacity until the entry is freed
  size_t filled = 0;
  size_t consumed = 0;  // bytes the MT copied out
  uint64_t seq = 0;
  uint64_t generation = 0;  // the file's change generation at the fetch start
  bool filling = true;
  bool linked = true;   // in files_[key].by_offset
  int pins = 0;         // MT copies in progress
  std::unique_ptr<char, AlignedFree> data;

  off_t end() const { return offset + static_cast<off_t>(length); }
};

// The entry's index node is about 64 bytes more.
size_t PrefetchCache::footprint(size_t length) { return buffer_bytes(length) + sizeof(CacheEntry) + 64; }

PrefetchCache::PrefetchCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

PrefetchCache::~PrefetchCache() {
  for (auto &[key, file] : files_)
    for (auto &[off, entry] : file.by_offset) delete entry;
}

ReserveResult PrefetchCache::reserve(const FileKey &key, const FileStamp &stamp, off_t offset,
                                     size_t length, uint64_t seq, CacheEntry **out) {
  *out = nullptr;
  const size_t charge = footprint(length);
  if (charge > capacity_) return ReserveResult::TooLarge;
  std::unique_lock<std::mutex> lock(mu_);
  const off_t end = offset + static_cast<off_t>(length);
  for (;;) {
    if (stopped_) return ReserveResult::Stopped;
    FileEntries &file = files_[key];
    if (file.holds > 0 || file.changes_in_progress > 0) return ReserveResult::Busy;
    // The same transfer prefetched twice (a programs that reads the same bytes twice
    // needs them twice: its second read is another transfer).
    for (auto it = file.first_holding(offset); it != file.by_offset.end() && it->first <= offset; ++it) {
      const CacheEntry *e = it->second;
      if (e->seq == seq && e->end() >= end && (e->filling || e->stamp == stamp))
        return ReserveResult::Covered;
    }
    if (counters_.bytes_in_use + charge <= capacity_) break;
    // The PT's own memory never comes back while it runs: do not wait for it.
    if (charge > capacity_ - std::min(capacity_, counters_.external_bytes)) return ReserveResult::TooLarge;
    if (evict_one_passed()) continue;
    ++room_waiters_;
    room_cv_.wait(lock);
    --room_waiters_;
  }
  // Read before any byte of the entry is: what changes the file after this moves it.
  const uint64_t generation = generation_source_ ? generation_source_(key) : 0;
  if (generation == kHeldGeneration) return ReserveResult::Busy;  // held by another process
  auto *e = new CacheEntry;
  e->key = key;
  e->stamp = stamp;
  e->offset = offset;
  e->length = length;
  e->reserved = charge;
  e->seq = seq;
  e->generation = generation;
  FileEntries &file = files_[key];
  file.by_offset.emplace(offset, e);
  used_.store(true, std::memory_order_release);
  file.generation_floor = std::min(file.generation_floor, e->generation);
  file.longest = std::max(file.longest, static_cast<off_t>(length));
  counters_.bytes_in_use += charge;
  counters_.peak_bytes = std::max(counters_.peak_bytes, counters_.bytes_in_use);
  lock.unlock();
  // The bytes are counted already, so memory stays within the bound; they are allocated
  // outside the lock so that a large allocation does not hold up the MT. Nobody reads
  // `data` before filled() publishes bytes in it under the lock.
  e->data.reset(allocate_aligned(length));
  if (!e->data) {  // the process is out of memory: skip this prefetch
    finish(e, false);
    return ReserveResult::TooLarge;
  }
  *out = e;
  return ReserveResult::Reserved;
}

char *PrefetchCache::fill_pointer(CacheEntry *e, size_t *remaining) {
  std::lock_guard<std::mutex> lock(mu_);
  *remaining = e->length - e->filled;
  if (!e->linked || stopped_) return nullptr;
  return e->data.get() + e->filled;
}

bool PrefetchCache::filled(CacheEntry *e, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  e->filled += bytes;
  return e->linked;
}

size_t PrefetchCache::copy_fetched(CacheEntry *e, char *dest) {
  size_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = e->filled;
  }
  // Only the fetching thread writes the entry's bytes, and it is the caller.
  std::memcpy(dest, e->data.get(), n);
  return n;
}

void PrefetchCache::finish(CacheEntry *e, bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    e->filling = false;
    if (e->linked && (!ok || e->filled == 0)) unlink_entry(e);
    if (e->linked) e->length = e->filled;  // short at EOF: keep what exists
    maybe_free(e);
  }
  fetched_cv_.notify_all();
}

CacheEntry *PrefetchCache::best_entry(FileEntries &file, off_t pos) {
  // A complete entry beats one still being fetched; then the one prefetched for the
  // transfer nearest the MT's next one (a program may read the same bytes several times:
  // each read has an entry of its own); then the one reaching furthest.
  const uint64_t next = mt_completed_ + 1;
  auto distance = [next](const CacheEntry *e) { return e->seq > next ? e->seq - next : next - e->seq; };
  CacheEntry *best = nullptr;
  for (auto it = file.first_holding(pos); it != file.by_offset.end() && it->first <= pos; ++it) {
    CacheEntry *e = it->second;
    if (pos >= e->end()) continue;
    if (best == nullptr ||
        std::make_tuple(e->filling, distance(e), -e->end()) <
            std::make_tuple(best->filling, distance(best), -best->end()))
      best = e;
  }
  return best;
}

ServeResult PrefetchCache::serve(const FileKey &key, const FileStamp &stamp, off_t offset,
                                 size_t length, char *buffer, InFlightPolicy policy) {
  struct Piece {
    CacheEntry *entry;
    off_t from;
    size_t bytes;
  };
  std::vector<Piece> pieces;
  ServeResult result;
  // The file's generation as the read starts: an entry fetched before a change that
  // completed since (by any process of the node) has another one (rule 2).
  const uint64_t generation = generation_source_ ? generation_source_(key) : 0;
  std::unique_lock<std::mutex> lock(mu_);
  auto it = files_.find(key);
  if (it == files_.end() || it->second.holds > 0) return result;
  FileEntries &file = it->second;

  const off_t end = offset + static_cast<off_t>(length);
  off_t pos = offset;
  while (pos < end) {
    CacheEntry *e = best_entry(file, pos);
    if (e == nullptr) break;
    if (e->stamp != stamp || e->generation != generation) {  // the file changed since
      unlink_entry(e);
      ++counters_.invalidated_entries;
      maybe_free(e);
      continue;
    }
    off_t available = e->offset + static_cast<off_t>(e->filled);
    if (e->filling) {
      if (policy == InFlightPolicy::Wait) {
        ++e->pins;  // keep it alive while we wait
        fetched_cv_.wait(lock, [&] { return !e->filling || !e->linked; });
        --e->pins;
        maybe_free(e);
        continue;  // look again: the entry may be complete, trimmed or gone
      }
      if (policy == InFlightPolicy::NeedToken) {
        for (Piece &p : pieces) --p.entry->pins;
        result.needs_token = true;
        result.in_flight_seq = e->seq;
        return result;
      }
      // Claim: the fetcher is paused between sub-reads while we hold the token or a claim
      // of its prefetch. Take its prefix; it sees the entry unlinked and stops. (With a
      // claim of one prefetch, one that completed between the two serve() calls may lead
      // here to the next, whose fetcher is not paused: its sub-read in progress is lost,
      // but it only ever writes past `filled`, and we copy below it.)
      unlink_entry(e);
      if (available <= pos) break;
      size_t n = static_cast<size_t>(std::min(available, end) - pos);
      ++e->pins;
      pieces.push_back({e, pos, n});
      pos += static_cast<off_t>(n);
      break;  // nothing after a partial entry is contiguous with it
    }
    size_t n = static_cast<size_t>(std::min(e->end(), end) - pos);
    ++e->pins;
    pieces.push_back({e, pos, n});
    pos += static_cast<off_t>(n);
  }
  if (pieces.empty()) return result;

  lock.unlock();
  for (const Piece &p : pieces) {
    std::memcpy(buffer + (p.from - offset), p.entry->data.get() + (p.from - p.entry->offset),
                p.bytes);
    result.bytes += p.bytes;
  }
  lock.lock();
  bool freed = false;
  for (const Piece &p : pieces) {
    CacheEntry *e = p.entry;
    --e->pins;
    e->consumed += p.bytes;
    // The MT has read through the end of a complete entry: it is done with it.
    if (e->linked && !e->filling && p.from + static_cast<off_t>(p.bytes) >= e->end())
      unlink_entry(e);
    if (!e->linked) {
      maybe_free(e);
      freed = true;
    }
  }
  if (freed && room_waiters_ > 0) room_cv_.notify_all();
  return result;
}

void PrefetchCache::mt_progress(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  mt_completed_ = seq;
  if (room_waiters_ > 0) room_cv_.notify_all();  // entries may have become evictable
}

void PrefetchCache::begin_change(const FileKey &key) {
  std::lock_guard<std::mutex> lock(mu_);
  ++files_[key].changes_in_progress;
}

void PrefetchCache::end_change(const FileKey &key) {
  std::lock_guard<std::mutex> lock(mu_);
  FileEntries &file = files_[key];
  if (file.changes_in_progress > 0) --file.changes_in_progress;
  drop_all_of(file);
  forget_file_if_empty(key);
}

void PrefetchCache::invalidate_file(const FileKey &key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(key);
  if (it == files_.end()) return;
  drop_all_of(it->second);
  forget_file_if_empty(key);
}

size_t PrefetchCache::drop_changed(const std::function<uint64_t(const FileKey &)> &current) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CacheEntry *> stale;
  for (auto &[key, file] : files_) {
    if (file.by_offset.empty()) continue;
    const uint64_t now = current(key);
    if (now == file.generation_floor) continue;
    for (auto &[off, e] : file.by_offset)
      if (e->generation != now) stale.push_back(e);
    file.generation_floor = now;  // what is left has it
  }
  for (CacheEntry *e : stale) {
    unlink_entry(e);
    ++counters_.invalidated_entries;
    maybe_free(e);
  }
  if (!stale.empty() && room_waiters_ > 0) room_cv_.notify_all();
  return stale.size();
}

// Called with mu_ held. An entry still being filled is unlinked too: its fetcher sees
// that at its next sub-read and stops, and its bytes are never served.
void PrefetchCache::drop_all_of(FileEntries &file) {
  std::vector<CacheEntry *> all;
  for (auto &[off, e] : file.by_offset) all.push_back(e);
  for (CacheEntry *e : all) {
    unlink_entry(e);
    ++counters_.invalidated_entries;
    maybe_free(e);
  }
  if (!all.empty() && room_waiters_ > 0) room_cv_.notify_all();
}

void PrefetchCache::hold_file(const FileKey &key) {
  std::lock_guard<std::mutex> lock(mu_);
  ++files_[key].holds;
}

void PrefetchCache::unhold_file(const FileKey &key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(key);
  if (it != files_.end() && it->second.holds > 0) --it->second.holds;
  forget_file_if_empty(key);
}

bool PrefetchCache::take_external(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  while (bytes > capacity_ - std::min(capacity_, counters_.bytes_in_use))
    if (!evict_one_passed()) return false;
  counters_.bytes_in_use += bytes;
  counters_.external_bytes += bytes;
  counters_.peak_bytes = std::max(counters_.peak_bytes, counters_.bytes_in_use);
  return true;
}

void PrefetchCache::give_external(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes = std::min(bytes, counters_.external_bytes);
    counters_.bytes_in_use -= bytes;
    counters_.external_bytes -= bytes;
  }
  room_cv_.notify_all();
}

void PrefetchCache::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  room_cv_.notify_all();
  fetched_cv_.notify_all();
}

CacheCounters PrefetchCache::counters() {
  std::lock_guard<std::mutex> lock(mu_);
  CacheCounters c = counters_;
  // What is still cached at this point was never used either.
  for (auto &[key, file] : files_)
    for (auto &[off, e] : file.by_offset)
      if (e->filled > e->consumed) {
        c.unused_bytes += e->filled - e->consumed;
        if (e->consumed == 0) ++c.unserved_entries;
      }
  return c;
}

// Called with mu_ held.
void PrefetchCache::unlink_entry(CacheEntry *e) {
  if (!e->linked) return;
  auto &index = files_[e->key].by_offset;
  auto [first, last] = index.equal_range(e->offset);
  for (auto it = first; it != last; ++it)
    if (it->second == e) {
      index.erase(it);
      break;
    }
  e->linked = false;
}

// Called with mu_ held: frees an unlinked entry once nobody copies from or fills it.
void PrefetchCache::maybe_free(CacheEntry *e) {
  if (e->linked || e->pins > 0 || e->filling) return;
  if (e->filled > e->consumed) counters_.unused_bytes += e->filled - e->consumed;
  if (e->filled > 0 && e->consumed == 0) ++counters_.unserved_entries;
  if (e->filled > 0 && free_observer_) free_observer_(e->key, e->consumed > 0);
  counters_.bytes_in_use -= e->reserved;
  delete e;
  if (room_waiters_ > 0) room_cv_.notify_all();
}

// Called with mu_ held: frees the complete entry with the lowest sequence number among
// those the MT has passed. Returns false if there is none.
bool PrefetchCache::evict_one_passed() {
  CacheEntry *victim = nullptr;
  for (auto &[key, file] : files_)
    for (auto &[off, e] : file.by_offset)
      if (!e->filling && e->pins == 0 && e->seq <= mt_completed_ &&
          (victim == nullptr || e->seq < victim->seq))
        victim = e;
  if (victim == nullptr) return false;
  unlink_entry(victim);
  ++counters_.evicted_entries;
  maybe_free(victim);
  return true;
}

// Called with mu_ held.
void PrefetchCache::forget_file_if_empty(const FileKey &key) {
  auto it = files_.find(key);
  if (it != files_.end() && it->second.by_offset.empty() && it->second.holds == 0 &&
      it->second.changes_in_progress == 0)
    files_.erase(it);
}

}  // namespace ppios
