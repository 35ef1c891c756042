// The node-local arbitration state of one storage target, kept in POSIX shared memory so
// every process on the node (of any job) sees the same holders, waiters and threshold.
#pragma once

#include "ppios/CoordinatorAdmin.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ppios {

struct ShmLayout;

class ShmSlotTable {
 public:
  // What one acquire asks for.
  struct Request {
    IoClass cls = IoClass::MT;
    uint64_t lead = 0;
    bool mt_throttle = false;
  };
  enum class Outcome { Granted, Queued, TableFull };

  // Maps the segment of `target`; creates it if `create` (else nullptr with *error set to
  // "" when it does not exist). Other failures return nullptr with a message.
  static std::unique_ptr<ShmSlotTable> open(const std::string &target, bool create, std::string *error);
  // Removes the segment name; processes that have it mapped keep their copy.
  static bool unlink(const std::string &target, std::string *error);
  static std::string segment_name(const std::string &target);
  ~ShmSlotTable();

  // Process registration. A handle packs the table index and a generation so a reaped
  // and reused entry is never mistaken for ours; handles live in a std::atomic owned by
  // the caller and are replaced under the table lock when the process re-registers.
  bool register_process(int lease_ms, std::atomic<uint64_t> *handle);
  // Extends the lease; re-registers if the entry was reaped. Also reaps dead processes.
  void renew(int lease_ms, std::atomic<uint64_t> *handle);
  void unregister(std::atomic<uint64_t> *handle);

  // Grants a slot at once (ticket in *ticket) or queues a waiter (*waiter_id).
  Outcome acquire_or_enqueue(std::atomic<uint64_t> *handle, int lease_ms, const Request &request,
                             uint64_t *ticket, uint64_t *waiter_id);
  // Sleeps until the waiter is granted or timeout_ms passes.
  void wait(uint64_t waiter_id, int timeout_ms);
  // After wait(): true with *ticket once granted. *lost is set when the waiter was dropped
  // (its process was reaped or the table reset); the caller must start over.
  bool poll(uint64_t waiter_id, uint64_t *ticket, bool *lost);
  // Frees the slot and adds `bytes` to the target's completed-bytes counter.
  void release(uint64_t ticket, uint64_t bytes);
  bool yield_requested(uint64_t ticket) const;

  // Stores `wanted` if no threshold is stored (wanted < 0: leave it); returns the stored one.
  int64_t adopt_threshold(int64_t wanted);
  // Sets the cap and turns learning (PPIOS_THRESHOLD=auto) off.
  void set_threshold(int64_t n);
  // Turns learning on; with no cap stored, starts from 1. Returns the cap.
  int64_t enable_auto();
  void snapshot(CoordinatorStatus *out);

  // The controller of PPIOS_THRESHOLD=auto (AutoThreshold.h). The lease belongs to a
  // registered process (its handle) and lapses with it.
  bool lead_controller(std::atomic<uint64_t> *handle, int lease_ms);
  void resign_controller(std::atomic<uint64_t> *handle);
  void control_sample(uint64_t *bytes, int64_t *cap, uint32_t *inflight, uint32_t *queued, bool *auto_on);
  // Stores k only while learning is on (a hand-set cap wins).
  void set_learned_cap(int64_t k);
  void store_curve(const std::vector<std::pair<int, double>> &curve);

 private:
  explicit ShmSlotTable(ShmLayout *layout);
  void lock() const;
  void unlock() const;
  ShmLayout *layout_;
};

}  // namespace ppios
