#include "Coherence.h"

#include <cstdint>

namespace ppios {

Coherence::Coherence(PrefetchCache &cache, ChangeGenerations &generations, bool generations_cover_job)
    : cache_(cache),
      generations_(generations),
      exact_(generations.available() && generations_cover_job),
      one_node_(generations_cover_job) {
  cache_.set_generation_source([this](const FileKey &key) { return generations_.current(key); });
}

void Coherence::begin_change(const FileKey &key) { cache_.begin_change(key); }

void Coherence::end_change(const FileKey &key) {
  // The bump comes after the change completed (the call returned): an entry reserved
  // after it was read after the change (the design note's soundness argument).
  generations_.bump(key);
  cache_.end_change(key);
}

void Coherence::hold(const FileKey &key) {
  cache_.hold_file(key);
  {
    std::lock_guard<std::mutex> lock(held_mu_);
    ++held_[key];
    holds_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Coherence::unhold(const FileKey &key) {
  {
    std::lock_guard<std::mutex> lock(held_mu_);
    auto it = held_.find(key);
    if (it != held_.end()) {
      holds_.fetch_sub(1, std::memory_order_relaxed);
      if (--it->second == 0) held_.erase(it);
    }
  }
  changed(key);
  cache_.unhold_file(key);
}

void Coherence::release_point() {
  if (holds_.load(std::memory_order_relaxed) == 0) return;  // the MT's own hold()s only
  std::lock_guard<std::mutex> lock(held_mu_);
  for (const auto &[key, holds] : held_) generations_.bump(key);
}

std::string Coherence::mode() const {
  if (exact_) return "exact";
  if (!one_node_) return "drop at every synchronization: the job spans several nodes";
  return "drop at every synchronization: the node's change table " + generations_.unavailable_reason();
}

void Coherence::acquire_point() {
  // Nothing bumped anywhere since the last look that completed: nothing moved. The total
  // is read before the files' counters, and bump() raises it after the file's, so a bump
  // this look misses leaves the total it stores behind the table's. It is stored once
  // the look is over: another thread's acquire point meanwhile looks for itself.
  const uint64_t total = generations_.total();
  if (exact_ && seen_total_.load(std::memory_order_acquire) == total) return;
  // Without an exact table every generation counts as moved: UINT64_MAX is none's.
  cache_.drop_changed([this](const FileKey &key) { return exact_ ? generations_.current(key) : UINT64_MAX; });
  if (exact_) seen_total_.store(total, std::memory_order_release);
}

void Coherence::acquire_from_unknown_writer() {
  cache_.drop_changed([](const FileKey &) { return UINT64_MAX; });
}

}  // namespace ppios
