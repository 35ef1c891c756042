// Node-local coordinator: a thin client of ShmSlotTable plus a lease-renewal thread.
//
// Lock order: stop_mutex_ is only held around the stop flag; ShmSlotTable's own mutex is
// never taken while holding it.
#include "ShmCoordinator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace ppios {

std::unique_ptr<ShmCoordinator> ShmCoordinator::create(const CoordinatorOptions &options, std::string *error,
                                                       bool quiet_threshold_conflict) {
  std::string problem;
  auto table = ShmSlotTable::open(options.target, true, &problem);
  if (!table) {
    if (error) *error = problem;
    return nullptr;
  }
  int64_t stored = options.auto_threshold ? table->enable_auto() : table->adopt_threshold(options.threshold);
  if (options.threshold >= 0 && stored != options.threshold && !quiet_threshold_conflict)
    fprintf(stderr,
            "ppios: warning: PPIOS_THRESHOLD=%lld differs from the threshold %lld stored for target '%s'; "
            "obeying the stored one (change it with `ppios-coord set-threshold`)\n",
            static_cast<long long>(options.threshold), static_cast<long long>(stored), options.target.c_str());
  std::unique_ptr<ShmCoordinator> c(new ShmCoordinator(std::move(table), options));
  if (!c->table_->register_process(options.lease_ms, &c->process_handle_)) {
    if (error) *error = "ppios: shm coordinator: too many processes registered for target '" + options.target + "'";
    return nullptr;
  }
  c->renewer_ = std::thread([raw = c.get()] { raw->renew_leases(); });
  if (options.auto_threshold)
    c->controller_ = std::make_unique<AutoThreshold>(control_plane(c->table_.get(), &c->process_handle_),
                                                     options.lease_ms);
  return c;
}

ShmCoordinator::ShmCoordinator(std::unique_ptr<ShmSlotTable> table, const CoordinatorOptions &options)
    : table_(std::move(table)), options_(options) {}

ShmCoordinator::~ShmCoordinator() {
  controller_.reset();
  {
    std::lock_guard<std::mutex> g(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  table_->unregister(&process_handle_);
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

SlotTicket ShmCoordinator::acquire(IoClass cls, uint64_t lead) {
  ShmSlotTable::Request request;
  request.cls = cls;
  request.lead = lead;
  request.mt_throttle = options_.mt_throttle;
  // Waiters wake on their own every poll_ms to reap dead holders; a grant wakes them at once.
  const int poll_ms = std::clamp(options_.lease_ms / 4, 1, 50);
  for (;;) {
    uint64_t ticket = 0, waiter = 0;
    auto outcome = table_->acquire_or_enqueue(&process_handle_, options_.lease_ms, request, &ticket, &waiter);
    if (outcome == ShmSlotTable::Outcome::Granted) return SlotTicket{ticket, cls};
    if (outcome == ShmSlotTable::Outcome::TableFull) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    bool lost = false;
    for (;;) {
      table_->wait(waiter, poll_ms);
      if (table_->poll(waiter, &ticket, &lost)) return SlotTicket{ticket, cls};
      if (lost) break;  // our process entry was reaped (stalled past the lease): start over
    }
  }
}

void ShmCoordinator::release(SlotTicket &ticket) {
  if (!ticket.valid()) return;
  table_->release(ticket.id, ticket.bytes);
  ticket.id = 0;
  ticket.bytes = 0;
}

bool ShmCoordinator::yield_requested(const SlotTicket &ticket) { return table_->yield_requested(ticket.id); }

namespace {

class ShmControlPlane final : public ControlPlane {
 public:
  ShmControlPlane(ShmSlotTable *table, std::atomic<uint64_t> *handle) : table_(table), handle_(handle) {}
  bool lead(int lease_ms) override { return table_->lead_controller(handle_, lease_ms); }
  void resign() override { table_->resign_controller(handle_); }
  bool sample(Sample *out) override {
    table_->control_sample(&out->bytes, &out->cap, &out->inflight, &out->queued, &out->auto_on);
    return true;
  }
  void set_cap(int64_t k) override { table_->set_learned_cap(k); }
  void publish_curve(const std::map<int, double> &mibps_by_k) override {
    table_->store_curve(std::vector<std::pair<int, double>>(mibps_by_k.begin(), mibps_by_k.end()));
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
