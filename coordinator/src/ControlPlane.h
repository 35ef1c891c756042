// ControlPlane: what the controller of PPIOS_THRESHOLD=auto (AutoThreshold.h) needs from a
// backend (ShmControlPlane, RedisControlPlane): the controller lease, one sample of the
// target's counters, and where the cap and the learned curve are stored.
#pragma once

#include <cstdint>
#include <map>

namespace ppios {

class ControlPlane {
 public:
  struct Sample {
    uint64_t bytes = 0;     // completed bytes reported at release, since the target was created
    int64_t cap = -1;       // threshold in force (-1: none)
    uint32_t inflight = 0;
    uint32_t queued = 0;
    uint32_t mt_demand = 0;  // MTs in flight or queued (ThroughputClimber::observe_mts)
    bool auto_on = false;
    bool mt_hold = false;   // MTs of MtAtCap::Learned wait at the cap
  };
  virtual ~ControlPlane() = default;
  // Takes the controller lease or renews ours; true while we hold it.
  virtual bool lead(int lease_ms) = 0;
  virtual void resign() = 0;
  virtual bool sample(Sample *out) = 0;
  // Stores the cap and whether MTs of MtAtCap::Learned wait at it, only while the auto
  // flag is on.
  virtual void set_cap(int64_t k, bool hold_mts) = 0;
  virtual void publish_curve(const std::map<int, double> &mibps_by_k) = 0;
  // The curve stored on the target (empty: none, or it could not be read).
  virtual std::map<int, double> stored_curve() = 0;
};

}  // namespace ppios
