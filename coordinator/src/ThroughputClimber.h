// ThroughputClimber: the decision rule behind PPIOS_THRESHOLD=auto.
//
// Why a hill-climb on throughput and not a latency limiter: past the knee the aggregate
// bandwidth of a storage target FALLS as streams are added (the I/O stream throttling
// study (Seelam, Kerstens and Teller), Figs. 2-3; the emulator's B(k)). Limiters that
// assume throughput plateaus and only watch latency (Gradient2, Vegas, brpc's auto
// limiter) keep adding streams while latency looks fine and never see that they lost
// bandwidth. This climbs the measured curve B(k) itself.
//
// Lifecycle: the controller calls next() once per measured window with the cap that was
// in force, the MiB/s completed in the window and whether the cap bound (requests were
// queued); next() returns the cap for the following window. Per cap k the climber keeps
// the last measurement (the curve it learned). States:
//   probe_up:   the window ran at base+1 (2*base in slow start). Better by more than
//               `gain`: move there, and probe further up if the cap still bound (else
//               the demand ended there: settle, or after a slow-start jump probe down).
//               Otherwise probe base-1, unless base was reached from below.
//   probe_down: the window ran at base-1. Better by more than `gain`, or (the cap bound)
//               within the margin of the best MiB/s of this descent and not below the
//               MTs' demand: move, probe further down (the smallest cap of a plateau: as
//               much throughput with fewer accesses in flight; below the MTs it only makes
//               them wait). Otherwise settle at base.
//   settled:    stays at base. Two windows in a row off the settled throughput by more
//               than `shift`, or `reprobe_s` since the last probe: probe base+1 again.
// Hysteresis (gain) keeps it at one cap under noise; every probe after the first settle
// is one step, so once settled the cap never leaves base-1..base+1 until the device
// really changed.
//
// Warm start: a start_k above min_k (the cap a target kept from an earlier run, or one
// stored with `ppios-coord set-threshold` / `calibrate --store`) is measured first and then
// probed one step each way, as after a settle. If that first probe up is better, the start
// was below the knee: the climb goes on by doubling (slow start) instead of one step per
// window. A start above the demand (a stale or absurd stored cap: its first window never
// bound) moves to the most accesses seen in flight in one window (underrun()), where it
// binds again; a start above a knee that the demand reaches climbs down one step per window.
//
// Memory: a climber can start from a curve stored on the target (an earlier controller's:
// the one whose lease it took over, or an earlier run's). It keeps that curve and starts at
// its best cap (best_cap(): the settled optimum the curve shows), so a controller that takes
// over continues what the target learned instead of starting over from the cap in force.
// The best cap is kept apart from the cap in force: windows at a low demand are learned at
// their level (a run's tail cannot erase what the knee measured), a better measurement
// replaces it, and a device shift (settled windows that bound, off by more than `shift`)
// drops the points measured before it.
//
// Slow start: from a cold start (start_k = min_k, no stored cap) a successful probe up
// doubles (1, 2, 4, 8, ...) instead of adding one, so a run of a few seconds reaches an
// optimum of 8-16 in a few windows; the first probe that is not better ends it, and the
// climb goes on by one from base, both ways (the knee is between base/2 and 2*base).
//
// MTs and the cap (ppios::MtAtCap): by default MTs wait at the cap only where the curve
// shows that their own concurrency loses bandwidth (holds_mts()); with
// PPIOS_MT_THROTTLE=0 they pass every cap, with =1 they wait at every cap.
// MTs that pass: a window in which more accesses than the cap ran on average measured
// B(level) at that real concurrency, not B(k). overrun()
// learns from it: a level better than base is where the cap goes (a cold start at 1 jumps
// to the MTs' concurrency in one window and doubles from there as PTs fill it; once the
// doubling fails, held MTs let the probes down measure below their level); a level no better
// than base leaves the cap where it is (MTs bursting past the knee for less than
// `reprobe_s` do not pull it up; past that the cap goes to their level, since base's
// MiB/s cannot be measured again while they stay above it, unless base measured more
// than `shift` better in windows that agreed: then the MTs are past the knee and the cap
// stays), and a probe down that MTs kept above the cap settles (lowering the cap changed
// nothing). A warm start is not moved by MTs past it before one window has measured it
// (the curve's point at it counts): the cap it was given is the better guess.
//
// Not thread-safe: one controller thread owns it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>

namespace ppios {

struct ClimberParams {
  double gain = 0.06;       // a neighbour must be this much better to move there (at most
                            // half of 1/base: the step one more stream gives below the knee)
  double shift = 0.20;      // settled throughput moving this much means the device changed
  double reprobe_s = 3.0;   // re-probe a settled cap this often
  int min_k = 1;
  int max_k = 256;
};

class ThroughputClimber {
 public:
  enum class State { ProbeUp, ProbeDown, Settled };

  ThroughputClimber(int start_k, const ClimberParams &params);
  // Starts from a stored curve (k -> MiB/s): at its best_cap(), keeping its points; an
  // empty curve is the start at start_k above.
  ThroughputClimber(int start_k, const ClimberParams &params, const std::map<int, double> &stored);

  // The settled optimum a curve shows: the cap with the most MiB/s, where a larger cap must
  // beat a smaller one by the climber's margin (the hysteresis that keeps a climb from
  // moving there), so one noisy probe above the knee is not it. 0 for an empty curve.
  static int best_cap(const std::map<int, double> &curve, const ClimberParams &params);

  // One finished window at cap k: returns the cap for the next window. A window in
  // which the cap did not bind says nothing about a larger cap (the demand was lower).
  // A probe up is taken when better even if it did not bind (more accesses ran than
  // at base, so the base did bind them). `level`, when known (> 0), is the accesses in
  // flight on average: a window that ran below k on average measured the device there,
  // not at k, and the curve learns it there, bound or not (a run's tail at low demand
  // under a high cap must not overwrite what the cap measured when it bound; a cap full
  // only part of the time measured fewer accesses than k, and a point at k below the one
  // at k - 1 held a later job's MTs at k - 1: E2 P = 4 left 7 below 6, and P = 8 waited
  // at 6).
  int next(int k, double mibps, bool bound, double now_s, int level = 0);
  // One finished window at cap k in which `level` (> k) accesses ran on average, the
  // MTs past the cap: returns the cap for the next window.
  int overrun(int k, int level, double mibps, double now_s);
  // One finished window at cap k that never bound, with at most `top` (< k) accesses in
  // flight at once: the first window of a start goes to top (a cap the demand never
  // reached measured what top would have); any other window is next(k, mibps, false),
  // since a settled cap above a lull must not follow the lull down.
  int underrun(int k, int top, double mibps, double now_s, int level = 0);

  int base() const { return base_; }
  // The MTs that wanted to run in the window passed next to next(), overrun() or
  // underrun(): the most in flight or waiting at the cap at once (MTs starting one after
  // another: the average of a window in which 6 grew to 16 said 11, and the sixteen then
  // passed a cap of 7). holds_mts() and the plateau walk of a probe down compare the cap
  // with it.
  void observe_mts(int demand) { mt_demand_ = std::max(demand, 0); }
  int mt_demand() const { return mt_demand_; }
  // Whether MTs wait at the cap (MtAtCap::Learned): only where the curve says that letting
  // them pass loses bandwidth.
  // - Pass during slow start, the doubling climb from below: its caps are below the knee
  //   by construction (MTs past them measure their own concurrency; overrun()).
  // - Wait on a probe down (it measures the device below them), when they fit under the
  //   cap (only PTs yield to them then, as at a fixed cap), and while base is unmeasured
  //   (no window and no point of a stored curve at it: MTs past it would measure nothing
  //   about it).
  // - Above the cap, wait while the curve has a point between the cap and their demand
  //   that base beats by more than `shift`, the noise of a window: past the knee MTs slow
  //   each other down as much as PTs would (bench/run: a fixed cap that MTs obey was
  //   1.5-1.8x faster than one they pass at E1 P=8 and E2 P=16). Counted in slots, E2's
  //   points at 6-8 (device: 60, 70, 80 MiB/s) measured 46-68, 52-61 and 54-71 MiB/s over
  //   two separate sets of bench/run runs; held by a 7 that measured 8-14% below 6, eight
  //   MTs took x1.16-1.30 of the fixed cap of 8.
  // - Wait where their demand is more than one step past the last point the curve knows
  //   up to it, or one step past a cap the curve does not rise into (rising_top): sixteen
  //   E2 MTs passing an unmeasured 8 above a curve rising to 8 ran the device at 16 for a
  //   2 s window, x1.28-1.48 of the fixed cap.
  // - Otherwise pass (a plateau cap below them, one step past a rising curve): holding
  //   them saves no bandwidth there and makes them wait. Holding them at every cap after
  //   slow start was tried and was slower: four E2 MTs waited 3.7-4.2 s each at caps of 2-3
  //   (12 s against 5.7 s), eight held at a plateau cap of 6 took 4.8 s against 3.9 s at 8.
  bool holds_mts() const;
  bool slow_start() const { return slow_start_; }
  State state() const { return state_; }
  // Last measured MiB/s per cap.
  const std::map<int, double> &curve() const { return curve_; }

 private:
  int probe(State s, double now_s);
  int probe_up_failed(int k, double now_s);
  int settle();
  void learn(int k, double mibps, int level);  // one point of the curve
  double margin() const { return margin_at(base_, p_); }
  static double margin_at(int base, const ClimberParams &p);
  void begin(int start_k);  // a start at start_k (construction, or underrun's restart)
  bool expected(int k) const;  // k is the cap this climber asked for
  int cap() const { return state_ == State::Settled ? base_ : probe_k_; }  // the cap asked for
  // The curve's last point at or below k if the curve still gained there (it is its best
  // point there, by best_cap's rule: the knee is not known to be below it), else 0.
  int rising_top(int k) const;

  ClimberParams p_;
  State state_;
  int base_;
  int probe_k_ = 0;            // the cap being probed (ProbeUp, ProbeDown)
  bool slow_start_;
  bool warm_start_;            // the first probe up of a start above min_k is still to come
  double base_mibps_ = -1;     // throughput at base_ (latest), -1 unknown
  double descent_mibps_ = -1;  // the best MiB/s since the probes down began (ProbeDown)
  bool base_confirmed_ = false;  // a settled window agreed with base_mibps_ (not one burst)
  bool came_from_below_ = false;
  int off_windows_ = 0;        // settled windows in a row off base_mibps_ by > shift
  double last_probe_s_ = -1;
  double overrun_since_ = -1;  // first of the overrun windows in a row, -1 none
  int mt_demand_ = 0;          // observe_mts(): MTs that wanted to run in the last window
  std::map<int, double> curve_;
};

}  // namespace ppios
