// AutoThreshold: the controller of PPIOS_THRESHOLD=auto for one target.
//
// Every process started with PPIOS_THRESHOLD=auto owns one AutoThreshold, but only one of
// them controls the target at a time: the one holding the controller lease, which is
// stored with the target (shm segment or redis key) and renewed while it runs. If that
// process dies or stops renewing, another takes over once the lease has expired.
//
// The controller measures, per window, the bytes completed under the cap (every release
// adds its ticket's bytes to a counter of the target; a window is long enough to hold
// many accesses and counts the time the target was busy, see ThroughputWindow), feeds MiB/s to a
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

#include "ControlPlane.h"
#include "ThroughputClimber.h"
#include "ThroughputWindow.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace ppios {

class AutoThreshold {
 public:
  AutoThreshold(std::unique_ptr<ControlPlane> plane, int lease_ms, const ControllerTiming &timing = {},
                const ClimberParams &climber = {});
  ~AutoThreshold();
  AutoThreshold(const AutoThreshold &) = delete;
  AutoThreshold &operator=(const AutoThreshold &) = delete;

 private:
  enum class Measured { Window, Void, Stop };
  void run();
  // Samples every tick until the window is done. Void: the cap was changed under it, auto
  // was turned off, the lease or a sample was lost; Stop: the destructor asked. When more
  // MTs than the climber has seen want to run, it tells the climber at once and stores
  // its new hold flag if that changed (the cap stays: the window goes on).
  Measured measure(ThroughputWindow &window, int64_t k, ThroughputClimber &climber);
  // Feeds one measured window at cap k to the climber and stores what it decides.
  void learn(ThroughputClimber &climber, int64_t k, const ThroughputWindow &window);
  // Takes or renews the lease (at most every third of it unless forced); true while we lead.
  bool keep_lead(bool force);
  // Sleeps up to `seconds`; false when asked to stop.
  bool pause(double seconds);

  std::unique_ptr<ControlPlane> plane_;
  const int lease_ms_;
  const ControllerTiming timing_;
  const ClimberParams climber_params_;
  const double renew_s_;  // the lease is renewed every third of it
  bool leading_ = false;  // controller thread only
  double lead_renewed_s_ = 0;

  std::mutex stop_mutex_;  // guards stopping_ only
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ppios
