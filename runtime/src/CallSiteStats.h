// PPIOS_STATS per source line: the MT's reads counted per call site (the program's return
// address of the interposed call, ThreadState::call_site), written as "sites" with the
// executable and its load base so that ppios-report can name the lines without a trace.
//
// Bounded: at most kMaxSites sites are told apart; reads from further sites are counted
// under site 0. Locking: mu_ is a leaf, held only to update or copy the map.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

namespace ppios {

class CallSiteStats {
 public:
  struct Counts {
    uint64_t calls = 0, bytes = 0, hit_bytes = 0, wait_ns = 0;
  };

  void add(const void *site, uint64_t bytes, uint64_t hit_bytes, uint64_t wait_ns) {
    uintptr_t key = reinterpret_cast<uintptr_t>(site);
    std::lock_guard<std::mutex> lock(mu_);
    if (sites_.size() >= kMaxSites && !sites_.count(key)) key = 0;
    Counts &c = sites_[key];
    c.calls++;
    c.bytes += bytes;
    c.hit_bytes += hit_bytes;
    c.wait_ns += wait_ns;
  }

  std::map<uintptr_t, Counts> snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sites_;
  }

 private:
  static constexpr size_t kMaxSites = 1024;
  mutable std::mutex mu_;
  std::map<uintptr_t, Counts> sites_;
};

}  // namespace ppios
