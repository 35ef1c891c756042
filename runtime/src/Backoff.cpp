#include "Backoff.h"

#include <algorithm>

namespace ppios {

bool PrefetchBackoff::skip(const FileKey &key, uint64_t seq, uint64_t mt_started) {
  if (!enabled_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(key);
  if (it == files_.end() || it->second.skip_left == 0) return false;
  --it->second.skip_left;
  return it->second.why != BackoffReason::Late || seq <= mt_started + kLead;
}

bool PrefetchBackoff::backed_off(const FileKey &key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(key);
  return it != files_.end() && it->second.skip_left > 0;
}

BackoffReason PrefetchBackoff::record_prefetch(const FileKey &key, bool late) {
  if (!enabled_) return BackoffReason::None;
  std::lock_guard<std::mutex> lock(mu_);
  Record &r = files_[key];
  ++r.prefetches;
  if (late) ++r.late;
  return judge(r);
}

BackoffReason PrefetchBackoff::record_entry(const FileKey &key, bool used) {
  if (!enabled_) return BackoffReason::None;
  std::lock_guard<std::mutex> lock(mu_);
  Record &r = files_[key];
  ++r.entries;
  if (!used) ++r.unused;
  return judge(r);
}

BackoffReason PrefetchBackoff::judge(Record &r) {
  BackoffReason why = BackoffReason::None;
  if (r.prefetches >= kWindow && 2 * r.late > r.prefetches) why = BackoffReason::Late;
  else if (r.entries >= kWindow && 2 * r.unused > r.entries) why = BackoffReason::Unused;
  if (why == BackoffReason::None) {
    // A full window that paid off: start the next one.
    if (r.prefetches >= kWindow) r.prefetches = r.late = 0;
    if (r.entries >= kWindow) r.entries = r.unused = 0;
    return why;
  }
  r.skip_left = std::min(kMaxSkip, kFirstSkip << std::min<uint32_t>(r.times, 7));
  ++r.times;
  r = Record{0, 0, 0, 0, r.skip_left, why, r.times};
  return why;
}

}  // namespace ppios
