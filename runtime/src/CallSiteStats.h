// PPIOS_STATS per source line:
//  - "sites": the MT's reads counted per call site (the program's return address of the
//    interposed call, ThreadState::call_site), written with the executable and its load
//    base so that ppios-report can name the lines without a trace (needs line tables);
//  - "pt_sites": the PT's and WTs' prefetches counted per source location of the read
//    they pre-execute (ThreadState::pt_site, "file:line:col" from ppios-cc): named
//    without debug information.
//
// Bounded: at most kMaxSites sites of each kind are told apart; further ones are counted
// under site 0 (null). Locking: mu_ is a leaf, held only to update or copy the maps.
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
  struct PrefetchCounts {
    uint64_t prefetches = 0, bytes = 0, late = 0;
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

  // One prefetch from `src` that read `bytes` from storage; `late`: it was not issued,
  // the MT had started the read already.
  void add_prefetch(const char *src, uint64_t bytes, bool late) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pt_sites_.size() >= kMaxSites && !pt_sites_.count(src)) src = nullptr;
    PrefetchCounts &c = pt_sites_[src];
    c.prefetches++;
    c.bytes += bytes;
    c.late += late;
  }

  std::map<uintptr_t, Counts> snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sites_;
  }
  std::map<const char *, PrefetchCounts> prefetch_snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pt_sites_;
  }

 private:
  static constexpr size_t kMaxSites = 1024;
  mutable std::mutex mu_;
  std::map<uintptr_t, Counts> sites_;
  std::map<const char *, PrefetchCounts> pt_sites_;
};

}  // namespace ppios
