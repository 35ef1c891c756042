// The node-local backend: every process on the node shares one ShmSlotTable per target.
#pragma once

#include "AutoThreshold.h"
#include "ShmSlotTable.h"
#include "ppios/Coordinator.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace ppios {

class ShmCoordinator final : public Coordinator {
 public:
  // `quiet_threshold_conflict` suppresses the "stored threshold differs" warning (used
  // when this is the fallback of the redis backend, which warns itself).
  static std::unique_ptr<ShmCoordinator> create(const CoordinatorOptions &options, std::string *error,
                                                bool quiet_threshold_conflict = false);
  ~ShmCoordinator() override;

  SlotTicket acquire(IoClass cls, uint64_t lead) override;
  void release(SlotTicket &ticket) override;
  bool yield_requested(const SlotTicket &ticket) override;
  const char *name() const override { return "shm"; }

  // Used by the redis backend to keep the node-local cap in line with the stored one.
  void adopt_threshold(int64_t n) { table_->adopt_threshold(n); }

  // The ControlPlane of PPIOS_THRESHOLD=auto on a node-local table.
  static std::unique_ptr<ControlPlane> control_plane(ShmSlotTable *table, std::atomic<uint64_t> *process_handle);

 private:
  ShmCoordinator(std::unique_ptr<ShmSlotTable> table, const CoordinatorOptions &options);
  void renew_leases();

  std::unique_ptr<ShmSlotTable> table_;
  CoordinatorOptions options_;
  std::atomic<uint64_t> process_handle_{0};

  // Lease renewal thread; stop_mutex_ only guards the stop flag for the condition variable.
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread renewer_;
  std::unique_ptr<AutoThreshold> controller_;  // PPIOS_THRESHOLD=auto only; stopped first
};

}  // namespace ppios
