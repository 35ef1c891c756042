#include "Coherence.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstdint>

#include "Clock.h"

namespace ppios {

std::atomic<uint64_t> Coherence::children_noted_{0};
std::atomic<uint64_t> Coherence::children_settled_{0};
std::atomic<int64_t> Coherence::unknown_writes_{0};

Coherence::Coherence(PrefetchCache &cache, ChangeGenerations &generations, bool generations_cover_job)
    : cache_(cache),
      generations_(generations),
      exact_(generations.available() && generations_cover_job),
      one_node_(generations_cover_job) {
  cache_.set_generation_source([this](const FileKey &key) { return generations_.current(key); });
  // Children made before the runtime started (a launcher's exec keeps none, but a program
  // may fork before MPI_Init) are writers the table does not see too.
  siginfo_t info{};
  if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0) note_child();
}

void Coherence::note_child() { children_noted_.fetch_add(1, std::memory_order_seq_cst); }

bool Coherence::children_may_write() {
  return children_noted_.load(std::memory_order_seq_cst) != children_settled_.load(std::memory_order_seq_cst);
}

void Coherence::settle_children() {
  // Read before the look: a child noted after it (a fork in another thread) keeps the
  // mark. WNOWAIT: the look reaps nothing; the program's own wait still finds its child.
  const uint64_t noted = children_noted_.load(std::memory_order_seq_cst);
  siginfo_t info{};
  if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == -1 && errno == ECHILD)
    children_settled_.store(noted, std::memory_order_seq_cst);
}

void Coherence::drop_everything() {
  // No entry has the held generation (nothing is fetched while its file is held).
  cache_.drop_changed([](const FileKey &) { return PrefetchCache::kHeldGeneration; });
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
  generations_.hold(key);  // every process of the node: not served while held
  std::lock_guard<std::mutex> lock(held_mu_);
  ++held_[key];
}

void Coherence::unhold(const FileKey &key) {
  {
    std::lock_guard<std::mutex> lock(held_mu_);
    auto it = held_.find(key);
    if (it == held_.end()) return;
    if (--it->second == 0) held_.erase(it);
  }
  changed(key);
  generations_.unhold(key);  // bumps first: what the channel changed is in
  cache_.unhold_file(key);
}

void Coherence::changed_unknown() {
  generations_.bump_everything();  // after the change: as end_change's bump
  drop_everything();
}

void Coherence::unknown_writes_begin() { unknown_writes_.fetch_add(1, std::memory_order_seq_cst); }
void Coherence::unknown_writes_end() { unknown_writes_.fetch_sub(1, std::memory_order_seq_cst); }

void Coherence::check_segment() {
  if (!exact_.load(std::memory_order_relaxed)) return;
  const uint64_t now = now_ns();
  if (now - segment_looked_ns_.load(std::memory_order_relaxed) < 1000000) return;
  segment_looked_ns_.store(now, std::memory_order_relaxed);
  if (!generations_.replaced()) return;
  // The other processes of the job that opened the table since see none of this one's
  // holds and bumps, nor it theirs: it falls back to what holds without a table, and tells
  // the new table's processes at its release points that anything may have changed.
  bool first = false;
  if (!replaced_.compare_exchange_strong(first, true)) return;  // another thread's look
  ChangeGenerations *successor = ChangeGenerations::open_segment(generations_.path(), nullptr);
  successor_.store(successor, std::memory_order_release);
  exact_.store(false, std::memory_order_release);
  successor->bump_everything();
}

void Coherence::release_point() {
  if (ChangeGenerations *successor = successor_.load(std::memory_order_acquire)) successor->bump_everything();
  if (unknown_writes_.load(std::memory_order_seq_cst) > 0) generations_.bump_everything();
  if (!children_may_write()) return;
  generations_.bump_everything();  // after whatever the children did that this one knows of
  settle_children();
}

void Coherence::child_reaped() {
  note_child();  // one made where no wrapper saw it (clone, a library's spawn)
  generations_.reclaim_dead_holders();  // what it held through a mapping is in
  acquire_point();
}

std::string Coherence::mode() const {
  if (replaced_.load(std::memory_order_acquire))
    return "drop at every synchronization: the node's change table " + generations_.path() +
           " was removed or replaced while the job ran";
  if (exact_) return "exact";
  if (!one_node_) return "drop at every synchronization: the job spans several nodes";
  return "drop at every synchronization: the node's change table " + generations_.unavailable_reason();
}

void Coherence::acquire_point() {
  check_segment();
  const bool unknown = unknown_writes_.load(std::memory_order_seq_cst) > 0;
  if (unknown) generations_.bump_everything();  // a nonblocking write may have completed
  const bool children = children_may_write() || unknown;
  // Nothing bumped or held anywhere since the last look that completed: nothing moved.
  // The total is read before the files' generations, and each bump or hold raises it
  // after them, so a change this look misses leaves the total it stores behind the
  // table's. It is stored once the look is over: another thread's acquire point
  // meanwhile looks for itself.
  const uint64_t total = generations_.total();
  if (!children && exact_ && seen_total_.load(std::memory_order_acquire) == total) return;
  if (children || !exact_) {
    drop_everything();  // without an exact table every file counts as changed
  } else {
    cache_.drop_changed([this](const FileKey &key) { return generations_.current(key); });
  }
  if (exact_) seen_total_.store(total, std::memory_order_release);
}

}  // namespace ppios
