// Node-local coordinator: a thin client of ShmSlotTable plus a lease-renewal thread.
//
// Lock order: the registry's mutex (below), then stop_mutex_, which is only held around
// the stop flag; ShmSlotTable's own lock is never taken while holding stop_mutex_.
#include "ShmCoordinator.h"

#include "CoordinatorNotices.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <unistd.h>

namespace ppios {
namespace {

// The coordinators of this process that have a segment, for the atexit handler. Leaked on
// purpose: it must outlive the static destructors that run interleaved with atexit handlers.
struct Registry {
  std::mutex mutex;
  std::set<ShmCoordinator *> live;
};
Registry &registry() {
  static Registry *r = new Registry;
  return *r;
}

}  // namespace

std::unique_ptr<ShmCoordinator> ShmCoordinator::create(const CoordinatorOptions &options, std::string *error,
                                                       bool quiet_threshold_conflict) {
  (void)error;  // nothing about the segment is fatal: see the fail-open rule in the header
  std::unique_ptr<ShmCoordinator> c(new ShmCoordinator(nullptr, options));
  std::string problem;
  // A segment removed by its last process between our open and our registration is
  // opened (created) again; a few rounds settle any such race.
  for (int attempt = 0; attempt < 8 && !c->table_; ++attempt) {
    auto table = ShmSlotTable::open(options.target, options.shm_group, true, options.lease_ms, &problem);
    if (!table) break;
    auto registered = table->register_process(options.lease_ms, &c->process_handle_);
    if (registered == ShmSlotTable::RegisterResult::Removed) continue;
    if (registered == ShmSlotTable::RegisterResult::TableFull)
      tell_notice("shm coordinator: the table of target '" + options.target + "' is full; retrying at each access");
    c->table_ = std::move(table);
  }
  if (!c->table_) {
    if (problem.empty()) problem = "was removed and re-created too often while opening it";
    tell_notice(problem + "; this process schedules its accesses only within itself");
    return c;
  }
  int64_t stored = options.auto_threshold ? c->table_->enable_auto() : c->table_->adopt_threshold(options.threshold);
  if (options.threshold >= 0 && stored != options.threshold && !quiet_threshold_conflict)
    tell_threshold_conflict(options.threshold, stored, options.target);
  c->renewer_ = std::thread([raw = c.get()] { raw->renew_leases(); });
  {
    std::lock_guard<std::mutex> g(registry().mutex);
    registry().live.insert(c.get());
  }
  static const bool at_exit = std::atexit(leave_at_exit) == 0;
  (void)at_exit;
  if (options.auto_threshold)
    c->controller_ = std::make_unique<AutoThreshold>(control_plane(c->table_.get(), &c->process_handle_),
                                                     options.lease_ms);
  return c;
}

ShmCoordinator::ShmCoordinator(std::unique_ptr<ShmSlotTable> table, const CoordinatorOptions &options)
    : table_(std::move(table)), options_(options), creator_pid_(getpid()) {}

ShmCoordinator::~ShmCoordinator() {
  {
    std::lock_guard<std::mutex> g(registry().mutex);
    registry().live.erase(this);
  }
  stop_threads();
  if (table_) table_->unregister(&process_handle_);
}

void ShmCoordinator::stop_threads() {
  controller_.reset();
  {
    std::lock_guard<std::mutex> g(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

void ShmCoordinator::set_exit_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> g(registry().mutex);
  exit_hook_ = std::move(hook);
}

void ShmCoordinator::leave_at_exit() {
  Registry &r = registry();
  // A coordinator destroyed meanwhile waits, then finds nothing to do. Held elsewhere (a
  // coordinator being made or destroyed, or in a child forked while it was): the leases
  // clean up instead, as after a kill; exit never waits for it.
  std::unique_lock<std::mutex> g(r.mutex, std::try_to_lock);
  if (!g.owns_lock()) return;
  for (ShmCoordinator *c : r.live) {
    if (c->creator_pid_ != getpid()) continue;  // a forked child exiting: the parent's registration
    if (c->exit_hook_) c->exit_hook_();
    c->stop_threads();
    c->table_->unregister(&c->process_handle_, /*at_exit=*/true);
  }
  r.live.clear();
}

// Renews four times per lease so one late wake-up never costs the lease, and reaps dead
// processes as a side effect so their slots come back even when nobody is waiting.
void ShmCoordinator::renew_leases() {
  auto period = std::chrono::milliseconds(std::max(5, options_.lease_ms / 4));
  std::unique_lock<std::mutex> lk(stop_mutex_);
  while (!stop_cv_.wait_for(lk, period, [this] { return stopping_; })) {
    lk.unlock();
    table_->renew(options_.lease_ms, &process_handle_);
    lk.lock();
  }
}

SlotTicket ShmCoordinator::unscheduled(IoClass cls, const char *why) {
  failing_open_.store(true);
  if (!warned_unscheduled_.exchange(true))
    tell_notice("shm coordinator, target '" + options_.target + "': " + why + "; the access proceeds without a slot");
  return SlotTicket{ShmSlotTable::kUnscheduledTicket, cls};
}

SlotTicket ShmCoordinator::granted(uint64_t ticket, IoClass cls) {
  if (failing_open_.load(std::memory_order_relaxed)) failing_open_.store(false);
  return SlotTicket{ticket, cls};
}

SlotTicket ShmCoordinator::acquire(IoClass cls, uint64_t lead) {
  if (!table_) return SlotTicket{ShmSlotTable::kUnscheduledTicket, cls};  // warned at create
  ShmSlotTable::Request request;
  request.cls = cls;
  request.lead = lead;
  request.mt_at_cap = options_.mt_at_cap;
  using Clock = std::chrono::steady_clock;
  Clock::time_point start{};  // of the first attempt that was not granted (a grant needs no clock)
  auto since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  const char *const kStalled = "no slot was granted on the target for twice the lease (holders that never finish?)";
  for (;;) {
    uint64_t ticket = 0, waiter = 0;
    auto outcome = table_->acquire_or_enqueue(&process_handle_, options_.lease_ms, request, &ticket, &waiter);
    if (outcome == ShmSlotTable::Outcome::Granted) return granted(ticket, cls);
    if (start == Clock::time_point{}) start = Clock::now();
    if (outcome == ShmSlotTable::Outcome::Unavailable) return unscheduled(cls, "the segment's lock is not let go");
    if (outcome == ShmSlotTable::Outcome::TableFull) {
      if (since(start) >= stall_ms()) return unscheduled(cls, "the slot table stayed full");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    // Waiters wake on their own every poll_ms to reap dead holders; a grant wakes them at once.
    uint64_t grants_seen = 0;
    auto moved_at = Clock::now();
    for (;;) {
      table_->wait(waiter, poll_ms());
      uint64_t grants = 0;
      auto polled = table_->poll(waiter, &ticket, &grants);
      if (polled == ShmSlotTable::PollResult::Granted) return granted(ticket, cls);
      if (polled == ShmSlotTable::PollResult::Unavailable) return unscheduled(cls, "the segment's lock is not let go");
      if (polled == ShmSlotTable::PollResult::Lost) break;  // our entry was reaped (stalled past the lease): start over
      if (grants != grants_seen) {
        grants_seen = grants;
        moved_at = Clock::now();
      }
      if (since(moved_at) >= stall_ms() || since(start) >= max_wait_ms()) {
        table_->withdraw(waiter);
        return unscheduled(cls, kStalled);
      }
    }
    if (since(start) >= max_wait_ms()) return unscheduled(cls, kStalled);
  }
}

void ShmCoordinator::release(SlotTicket &ticket) {
  if (!ticket.valid()) return;
  if (table_) table_->release(ticket.id, ticket.bytes);
  ticket.id = 0;
  ticket.bytes = 0;
}

bool ShmCoordinator::yield_requested(const SlotTicket &ticket) {
  return table_ && table_->yield_requested(ticket.id);
}

namespace {

class ShmControlPlane final : public ControlPlane {
 public:
  ShmControlPlane(ShmSlotTable *table, std::atomic<uint64_t> *handle) : table_(table), handle_(handle) {}
  bool lead(int lease_ms) override { return table_->lead_controller(handle_, lease_ms); }
  void resign() override { table_->resign_controller(handle_); }
  bool sample(Sample *out) override {
    return table_->control_sample(&out->bytes, &out->cap, &out->inflight, &out->queued, &out->mt_demand,
                                  &out->auto_on, &out->mt_hold);
  }
  void set_cap(int64_t k, bool hold_mts) override { table_->set_learned_cap(k, hold_mts); }
  void publish_curve(const std::map<int, double> &mibps_by_k) override {
    table_->store_curve(std::vector<std::pair<int, double>>(mibps_by_k.begin(), mibps_by_k.end()));
  }
  std::map<int, double> stored_curve() override {
    CoordinatorStatus status;
    if (!table_->snapshot(&status, nullptr)) return {};
    return std::map<int, double>(status.curve.begin(), status.curve.end());
  }

 private:
  ShmSlotTable *table_;
  std::atomic<uint64_t> *handle_;
};

}  // namespace

std::unique_ptr<ControlPlane> ShmCoordinator::control_plane(ShmSlotTable *table, std::atomic<uint64_t> *handle) {
  return std::make_unique<ShmControlPlane>(table, handle);
}

}  // namespace ppios
