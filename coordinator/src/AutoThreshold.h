// AutoThreshold: the controller of PPIOS_THRESHOLD=auto for one target.
//
// Every process started with PPIOS_THRESHOLD=auto owns one AutoThreshold, but only one of
// them controls the target at a time: the one holding the controller lease, which is
// stored with the target (shm segment or redis key) and renewed while it runs. If that
// process dies or stops renewing, another takes over once the lease has expired.
//
// The controller measures, per window, the bytes completed under the cap (every release
// adds its ticket's bytes to a counter of the target; a window is long enough to hold
// many accesses, see ControllerTiming), feeds MiB/s to a
// ThroughputClimber, stores the cap it picks and publishes the curve it learned (k ->
// MiB/s) for `ppios-coord status`, with whether MTs wait at the cap (the target's hold
// flag, read by MtAtCap::Learned: ThroughputClimber::holds_mts). In-flight counts include
// MTs: a window in which more than k accesses ran on average (MTs passing a slow start's
// caps, or every cap with PPIOS_MT_THROTTLE=0) measured the device at that concurrency and
// is learned as such (ThroughputClimber::overrun), so MT-only load drives the learning
// too and a cold start climbs to the MTs' concurrency in one window.
// A controller that takes the lease continues what the target learned: it seeds its
// climber with the curve stored on the target (the previous controller's, or an earlier
// run's) and starts at the curve's best cap (ThroughputClimber::best_cap), so the process
// that leads last (in a mix of jobs, often one reading alone at a low demand) does not
// publish only its tail. With no curve stored, learning starts from the cap in force
// (clamped into the climber's range): 1 on a fresh target, else what the target kept or
// had stored by hand (warm start, ThroughputClimber.h). It changes nothing while the
// target's auto flag is off (`ppios-coord set-threshold N` turns it off, `set-threshold
// auto` or a process started with PPIOS_THRESHOLD=auto turns it on).
//
// Lifecycle: the thread starts in the constructor and stops (resigning the lease) in the
// destructor, which waits at most one sampling tick plus one backend call. Thread safety:
// the ControlPlane is used by the controller thread only.
#pragma once

#include "ThroughputClimber.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace ppios {

// What the controller needs from a backend.
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

struct ControllerTiming {
  double window_s = 0.2;   // measured window, at least
  double max_window_s = 2.0;  // ... and until it holds min_accesses accesses' bytes, at most this
  double min_accesses = 16;   // an access in flight at a window's edge counts in one window or
                              // the next, all its bytes at once: a few of them must be small
                              // against what the window holds
  double settle_s = 0.06;  // after a cap change, before measuring (holders above a lowered cap finish)
  double tick_s = 0.01;    // sampling of queue and in-flight counts inside a window
};

class AutoThreshold {
 public:
  AutoThreshold(std::unique_ptr<ControlPlane> plane, int lease_ms, const ControllerTiming &timing = {},
                const ClimberParams &climber = {});
  ~AutoThreshold();
  AutoThreshold(const AutoThreshold &) = delete;
  AutoThreshold &operator=(const AutoThreshold &) = delete;

 private:
  void run();
  // Sleeps up to `seconds`; false when asked to stop.
  bool pause(double seconds);

  std::unique_ptr<ControlPlane> plane_;
  const int lease_ms_;
  const ControllerTiming timing_;
  const ClimberParams climber_params_;

  std::mutex stop_mutex_;  // guards stopping_ only
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ppios
