// ThroughputWindow: one measured window of the PPIOS_THRESHOLD=auto controller, built from
// the samples the controller takes every tick. It has no clock of its own: each sample
// comes with its time, so a test replays a timeline without sleeping.
//
// A window measures the MiB/s the target completed while it was busy:
//   bytes   released between the window's first sample and its last (the backends count
//           an access's bytes at its release, all at once);
//   time    from when the target was busy, not from the first sample. A window that starts
//           idle (a process starting up, a lull) starts its clock at the last tick before
//           an access was seen in flight. A window that starts with accesses in flight
//           right after an idle one starts its clock where the idle one ended: those
//           accesses began in the gap between them. (Counted from the window's first
//           sample, a cold E2 start measured 57 MiB/s at two 10 MiB/s streams.)
//   level   accesses in flight on average over the busy ticks; `bound` when requests
//           queued or the cap was full in at least half of them.
// It ends (done()) after window_s of busy time once it holds min_accesses accesses' bytes
// (a quarter of that in slow start), at the latest after max_window_s. An access in flight
// at an edge counts in one window or the next with all its bytes: a few of them must be
// small against what the window holds. A window that released nothing stays open while
// accesses are in flight (ending it would lose the time they ran) and ends after window_s
// once the target is idle: it measured nothing.
#pragma once

#include "ControlPlane.h"

#include <cstdint>

namespace ppios {

struct ControllerTiming {
  double window_s = 0.2;      // measured window, at least
  double max_window_s = 2.0;  // ... and until it holds min_accesses accesses' bytes, at most this
  double min_accesses = 16;
  double settle_s = 0.06;  // after a cap change, before measuring (holders above a lowered cap finish)
  double tick_s = 0.01;    // sampling of queue and in-flight counts inside a window
};

class ThroughputWindow {
 public:
  struct Result {
    uint64_t bytes = 0;  // 0: the window measured nothing (idle)
    double busy_s = 0;
    double mibps = 0;
    double level = 0;          // accesses in flight on average
    uint32_t inflight_top = 0;  // most accesses in flight at one tick
    uint32_t mt_demand_top = 0;  // most MTs in flight or queued at one tick
    bool bound = false;
  };

  // `first` is the sample the window starts from, at time t. `idle_until` is when the
  // window before it ended idle (it released nothing), or a negative value. `access_bytes`
  // is the size of one access as seen lately (0: unknown).
  ThroughputWindow(const ControlPlane::Sample &first, double t, double idle_until, int64_t cap,
                   double access_bytes, bool slow_start, const ControllerTiming &timing);

  // One tick's sample at time t (t after the previous one).
  void add(const ControlPlane::Sample &s, double t);
  bool done(double t) const;
  Result result() const;
  int ticks() const { return ticks_; }
  const ControlPlane::Sample &last() const { return last_; }
  double last_t() const { return t_last_; }
  // The most bytes released between two ticks: at least one access's size.
  uint64_t max_tick_bytes() const { return max_tick_bytes_; }

 private:
  uint64_t bytes() const { return last_.bytes >= first_.bytes ? last_.bytes - first_.bytes : 0; }

  const ControllerTiming timing_;
  const ControlPlane::Sample first_;
  const double t_first_;
  const int64_t cap_;
  const double access_bytes_;
  const bool slow_start_;
  ControlPlane::Sample last_;
  double t_last_;
  double busy_since_ = -1;  // -1: not busy yet
  int ticks_ = 0, busy_ticks_ = 0, bound_ticks_ = 0;
  uint64_t inflight_sum_ = 0;
  uint32_t inflight_top_ = 0, mt_demand_top_ = 0;
  uint64_t max_tick_bytes_ = 0;
};

}  // namespace ppios
