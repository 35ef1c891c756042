// The node-local backend: every process of the user (or of PPIOS_SHM_GROUP) on the node
// shares one ShmSlotTable per target.
//
// Exit: a rank that ends without destroying its coordinator (the runtime keeps it to the
// end) leaves the segment from an atexit handler (in the process that created it, never in
// a forked child): the coordinator's threads are stopped, then the process unregisters
// unless a straggling thread still holds or waits for a slot. The segment stays (what it
// learned and saw is read after the job) until `ppios-coord gc` or `reset`. A killed
// process is reaped by the others (its lease).
//
// Fail-open: when the segment cannot be used (someone else's, corrupt, another version)
// the process schedules only within itself, and when a wait on the segment passes its
// bound (a lock that is never let go, slots that never come back) the access proceeds
// without a slot. Either costs a wrong cap, never a hang or an exit; each warns once.
#pragma once

#include "AutoThreshold.h"
#include "ShmSlotTable.h"
#include "WaitBounds.h"
#include "ppios/Coordinator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <thread>

namespace ppios {

class ShmCoordinator final : public Coordinator {
 public:
  // `quiet_threshold_conflict` suppresses the "stored threshold differs" warning (used
  // when this is the fallback of the redis backend, which warns itself). Fails only on a
  // configuration error; an unusable segment gives a coordinator without one (fail-open).
  static std::unique_ptr<ShmCoordinator> create(const CoordinatorOptions &options, std::string *error,
                                                bool quiet_threshold_conflict = false);
  ~ShmCoordinator() override;

  SlotTicket acquire(IoClass cls, uint64_t lead) override;
  void release(SlotTicket &ticket) override;
  bool yield_requested(const SlotTicket &ticket) override;
  const char *name() const override { return "shm"; }
  // Which jobs the cap covers (ppios::cap_scope): "process" without a usable segment.
  const char *scope() const { return !table_ ? "process" : options_.shm_group >= 0 ? "group" : "user"; }

  // Used by the redis backend to keep the node-local cap in line with the stored one.
  void adopt_threshold(int64_t n) {
    if (table_) table_->adopt_threshold(n);
  }

  // The two-level backend's node agent drives this table's cap (null: no usable segment)
  // and is elected with this process's registration.
  ShmSlotTable *table() { return table_.get(); }
  std::atomic<uint64_t> *process_handle() { return &process_handle_; }

  // The ControlPlane of PPIOS_THRESHOLD=auto on a node-local table.
  static std::unique_ptr<ControlPlane> control_plane(ShmSlotTable *table, std::atomic<uint64_t> *process_handle);

  // Runs at process exit before this process leaves the segment (not when the
  // coordinator is destroyed first): the two-level backend stops its agent there, which
  // would otherwise register the process again. nullptr clears it.
  void set_exit_hook(std::function<void()> hook);

 private:
  ShmCoordinator(std::unique_ptr<ShmSlotTable> table, const CoordinatorOptions &options);
  void renew_leases();
  void stop_threads();
  // The atexit handler: every coordinator this process created and still has leaves.
  static void leave_at_exit();
  // An access that proceeds without a slot (fail-open), with one warning per process.
  SlotTicket unscheduled(IoClass cls, const char *why);
  SlotTicket granted(uint64_t ticket, IoClass cls);
  // An access proceeds without a slot when its wait passes the bounds every backend
  // shares (WaitBounds.h). failing_open_ is cleared at the next grant.
  int stall_ms() const { return WaitBounds{options_.lease_ms}.stall_ms(failing_open_.load(), poll_ms()); }
  int max_wait_ms() const { return WaitBounds{options_.lease_ms}.max_wait_ms(); }
  int poll_ms() const { return std::clamp(options_.lease_ms / 4, 1, 50); }

  std::unique_ptr<ShmSlotTable> table_;  // null: the segment could not be used
  std::atomic<bool> warned_unscheduled_{false};
  std::atomic<bool> failing_open_{false};
  CoordinatorOptions options_;
  std::atomic<uint64_t> process_handle_{0};

  // Lease renewal thread; stop_mutex_ only guards the stop flag for the condition variable.
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread renewer_;
  std::unique_ptr<AutoThreshold> controller_;  // PPIOS_THRESHOLD=auto only; stopped first
  const pid_t creator_pid_;                     // a forked child must not leave for its parent
  std::function<void()> exit_hook_;             // guarded by the registry's mutex (.cpp)
};

}  // namespace ppios
