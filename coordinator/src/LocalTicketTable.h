// This process's granted tickets for a backend whose state lives elsewhere (redis): each
// entry carries the yield flag that yield_requested() reads without a round trip and that
// the helper thread sets when the server asks one of our PTs to yield.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ppios {

class LocalTicketTable {
 public:
  static constexpr uint32_t kCapacity = 1024;  // concurrent tickets of one process
  static constexpr uint32_t kIndexBits = 10;

  struct Entry {
    std::atomic<uint64_t> id{0};       // published last: readers check it before the rest
    std::atomic<uint32_t> yield{0};
    bool fallback = false;             // held in the node-local fallback, not on the server
    bool unscheduled = false;          // no slot anywhere: the wait passed its bound (fail-open)
    uint64_t fallback_ticket = 0;
    std::string holder;                // the id the server knows this slot by
  };

  LocalTicketTable() {
    for (uint32_t i = 0; i < kCapacity; ++i) free_.push_back(kCapacity - 1 - i);
  }

  // Returns 0 when every entry is in use.
  uint64_t allocate() {
    std::lock_guard<std::mutex> g(mutex_);
    if (free_.empty()) return 0;
    uint32_t i = free_.back();
    free_.pop_back();
    uint64_t id = (++generation_ << kIndexBits) | i;
    Entry &e = entries_[i];
    e.fallback = false;
    e.unscheduled = false;
    e.fallback_ticket = 0;
    e.holder.clear();
    e.yield.store(0, std::memory_order_relaxed);
    e.id.store(id, std::memory_order_release);
    return id;
  }

  Entry *find(uint64_t id) {
    if (id == 0) return nullptr;
    Entry &e = entries_[id & (kCapacity - 1)];
    return e.id.load(std::memory_order_acquire) == id ? &e : nullptr;
  }

  void free(uint64_t id) {
    std::lock_guard<std::mutex> g(mutex_);
    Entry &e = entries_[id & (kCapacity - 1)];
    if (e.id.load(std::memory_order_relaxed) != id) return;
    e.id.store(0, std::memory_order_release);
    free_.push_back(static_cast<uint32_t>(id & (kCapacity - 1)));
  }

 private:
  std::mutex mutex_;  // guards free_ and generation_
  std::vector<uint32_t> free_;
  uint64_t generation_ = 0;
  std::array<Entry, kCapacity> entries_;
};

}  // namespace ppios
