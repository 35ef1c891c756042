#include "ThroughputClimber.h"

#include <algorithm>
#include <cmath>

namespace ppios {

ThroughputClimber::ThroughputClimber(int start_k, const ClimberParams &params) : p_(params) { begin(start_k); }

ThroughputClimber::ThroughputClimber(int start_k, const ClimberParams &params, const std::map<int, double> &stored)
    : p_(params) {
  for (const auto &[k, mibps] : stored)
    if (k >= p_.min_k && k <= p_.max_k && std::isfinite(mibps) && mibps > 0) curve_[k] = mibps;
  const int best = best_cap(curve_, p_);
  begin(best > 0 ? best : start_k);
}

void ThroughputClimber::begin(int start_k) {
  state_ = State::Settled;
  base_ = std::clamp(start_k, p_.min_k, p_.max_k);
  base_mibps_ = -1;  // measured by the first window
  base_confirmed_ = false;
  slow_start_ = base_ == p_.min_k;
  warm_start_ = !slow_start_;
  came_from_below_ = false;
  off_windows_ = 0;
}

int ThroughputClimber::best_cap(const std::map<int, double> &curve, const ClimberParams &params) {
  int best = 0;
  double best_mibps = 0;
  for (const auto &[k, mibps] : curve) {  // k ascending
    if (k < params.min_k || k > params.max_k || !std::isfinite(mibps) || mibps <= 0) continue;
    if (best == 0 || mibps > best_mibps * (1 + margin_at(best, params))) {
      best = k;
      best_mibps = mibps;
    }
  }
  return best;
}

int ThroughputClimber::settle() {
  state_ = State::Settled;
  slow_start_ = false;
  warm_start_ = false;
  off_windows_ = 0;
  return base_;
}

int ThroughputClimber::probe(State s, double now_s) {
  if (s == State::ProbeDown) {
    if (state_ != State::ProbeDown) descent_mibps_ = base_mibps_;  // a descent starts
    slow_start_ = warm_start_ = false;
  }
  const int k = s == State::ProbeDown ? base_ - 1 : slow_start_ ? std::min(2 * base_, p_.max_k) : base_ + 1;
  if (k < p_.min_k || k > p_.max_k || k == base_) {
    if (s == State::ProbeUp && base_ > p_.min_k && !came_from_below_) return probe(State::ProbeDown, now_s);
    return settle();
  }
  state_ = s;
  probe_k_ = k;
  last_probe_s_ = now_s;
  return k;
}

int ThroughputClimber::probe_up_failed(int k, double now_s) {
  if (slow_start_) {
    // The doubling overshot (or demand ended): the knee is below k. Climb by one from
    // base, both ways.
    slow_start_ = false;
    came_from_below_ = false;
    if (k > base_ + 1) return probe(State::ProbeUp, now_s);
  }
  if (!came_from_below_ && base_ > p_.min_k) return probe(State::ProbeDown, now_s);
  return settle();
}

double ThroughputClimber::margin_at(int base, const ClimberParams &p) {
  // Below the knee one more stream adds about 1/base: at a large base that is less than
  // `gain`, so the margin shrinks with it (half the expected step).
  return std::min(p.gain, 0.5 / std::max(base, 1));
}

bool ThroughputClimber::expected(int k) const { return k == cap(); }

bool ThroughputClimber::holds_mts() const {
  if (slow_start_) return false;
  const int k = cap();
  if (mt_demand_ <= k || state_ == State::ProbeDown) return true;
  // What base is known to do: its window, else the curve's point at it (a warm start or a
  // takeover continues a stored curve). With neither, MTs past it would measure nothing
  // about it.
  double ref = base_mibps_;
  if (ref < 0) {
    const auto at = curve_.find(base_);
    if (at == curve_.end()) return true;
    ref = at->second;
  }
  // Above the cap: a point between the cap and their demand that loses more than a
  // window's noise ...
  int top = k;  // the last point known up to their demand
  for (auto it = curve_.upper_bound(k); it != curve_.end() && it->first <= mt_demand_; ++it) {
    if (it->second * (1 + p_.shift) < ref) return true;
    top = it->first;
  }
  // ... or a demand more than one step past what the curve knows (past the knee B(k) falls
  // steeply), or one step past a cap the curve does not rise into (the knee is there).
  if (mt_demand_ > top + 1) return true;
  return top == k && rising_top(k) == 0;
}

int ThroughputClimber::rising_top(int k) const {
  int best = 0, last = 0;
  double best_mibps = 0;
  for (auto it = curve_.begin(); it != curve_.end() && it->first <= k; ++it) {
    last = it->first;
    if (best == 0 || it->second > best_mibps * (1 + margin_at(best, p_))) best = it->first, best_mibps = it->second;
  }
  return best == last ? last : 0;
}

int ThroughputClimber::overrun(int k, int level, double mibps, double now_s) {
  level = std::clamp(level, p_.min_k, p_.max_k);
  if (level <= k) return next(k, mibps, /*bound=*/true, now_s);
  // What base is known to do: its own window, else the curve's point at it (a takeover).
  double ref = base_mibps_;
  bool trusted = base_confirmed_;
  if (ref < 0 && expected(k)) {
    const auto at = curve_.find(base_);
    if (at != curve_.end()) ref = at->second, trusted = true;
  }
  curve_[level] = mibps;
  if (last_probe_s_ < 0) last_probe_s_ = now_s;
  if (overrun_since_ < 0) overrun_since_ = now_s;
  if (expected(k) && state_ == State::ProbeDown && level >= base_) {
    // The MTs kept the device at base or above: a lower cap cannot be measured now.
    return settle();
  }
  if (expected(k) && ref < 0 && warm_start_) {
    // A warm start (a cap a target kept or was given) not measured yet: MTs past it say
    // nothing about it. Following them would put the cap wherever the MTs happen to be
    // (E2 at P = 16: sixteen MTs past a knee of 8, and the PTs then filled a cap of 16-29
    // whenever the MTs paused); the first window the MTs leave to the cap measures it.
    return base_;
  }
  if (!expected(k) || ref < 0 || mibps > ref * (1 + margin())) {
    // Cold start, a cap set under us, or the MTs' concurrency beat base: the cap goes
    // there and probes up: in slow start by doubling (each MT has a PT: the demand is up
    // to twice the MTs' level), and when that fails by one step each way (probe_up_failed).
    // One step at a time from the MTs' level was tried instead (a targeted E2 P = 8 run
    // had doubled 6 -> 12) and not kept: the full runs' cold starts were no better with
    // it (E2 P = 4: 11.9-12.1 s with one step, 12.1 s with doubling), and doubling
    // reaches a far knee in fewer windows.
    if (!expected(k)) slow_start_ = false;
    base_ = level;
    base_mibps_ = mibps;
    base_confirmed_ = false;
    came_from_below_ = true;
    return probe(State::ProbeUp, now_s);
  }
  // No better than base: the cap stays at base (settled, or back from a failed probe up).
  if (state_ == State::ProbeUp) return probe_up_failed(k, now_s);
  if (now_s - overrun_since_ >= p_.reprobe_s) {
    overrun_since_ = now_s;  // the next such move waits reprobe_s again
    // The MTs past the knee: base measured more than `shift` better than their level in
    // windows that agreed (not one burst). A cap at their level would let PTs add to an
    // overloaded device whenever the MTs pause; below it, the cap only keeps PTs out.
    if (trusted && mibps < ref * (1 - p_.shift)) return base_;
    // Base's MiB/s cannot be measured again while the MTs keep the device above it, so it
    // may be stale (a burst): a cap below them only keeps PTs out. At the reprobe time
    // the cap goes to the MTs' level and looks further up; when they leave, the settled
    // checks take it back down if that is better.
    base_ = level;
    base_mibps_ = mibps;
    base_confirmed_ = false;
    came_from_below_ = true;
    return probe(State::ProbeUp, now_s);
  }
  return base_;
}

void ThroughputClimber::learn(int k, double mibps, int level) {
  curve_[level >= p_.min_k && level < k ? level : k] = mibps;
}

int ThroughputClimber::underrun(int k, int top, double mibps, double now_s, int level) {
  top = std::clamp(top, p_.min_k, p_.max_k);
  const bool first_window = state_ == State::Settled && base_mibps_ < 0 && expected(k);
  if (!first_window || top >= k) return next(k, mibps, /*bound=*/false, now_s, level);
  // Not measured at top itself (the cap may bind there): top is the new start, measured
  // by the next window; from min_k that is a cold start (slow start).
  learn(k, mibps, level);
  begin(top);
  return base_;
}

int ThroughputClimber::next(int k, double mibps, bool bound, double now_s, int level) {
  overrun_since_ = -1;
  learn(k, mibps, level);
  if (last_probe_s_ < 0) last_probe_s_ = now_s;
  const bool better = base_mibps_ >= 0 && mibps > base_mibps_ * (1 + margin());
  if (expected(k)) {
    switch (state_) {
      case State::ProbeUp:
        if (better) {
          const bool jumped = k > base_ + 1;
          base_ = k;
          base_mibps_ = mibps;
          base_confirmed_ = false;
          came_from_below_ = true;
          if (bound) {
            // A warm start below the knee: climb the rest as a cold start does.
            if (warm_start_) slow_start_ = true;
            warm_start_ = false;
            return probe(State::ProbeUp, now_s);
          }
          // The demand ended below k: nothing above to learn. After a slow-start jump
          // the caps in between were not measured: look down.
          if (jumped) {
            came_from_below_ = false;
            return probe(State::ProbeDown, now_s);
          }
          return settle();
        }
        return probe_up_failed(k, now_s);
      case State::ProbeDown:
        if (better || (bound && k >= mt_demand_ && descent_mibps_ > 0 &&
                       mibps >= descent_mibps_ * (1 - margin_at(k, p_)))) {
          // Better, or as good as the best of this descent within the margin while the
          // cap bound: the same throughput with fewer accesses in flight is the smaller
          // cap (Little: each access, the MTs' too, waits less). Measured in slots, the
          // aggregate stays flat for a few caps past the device's knee (a slot is held
          // across FUSE requests and the copy), so a climb that overshot into that
          // plateau walks back to its start. Compared with the best of the descent, not
          // the last step, so noise cannot ratchet it down past the knee. Not below the
          // MTs' demand: held there they wait for no bandwidth (E2 P = 8: a slot curve
          // flat from 6 to 8, eight MTs, 4.8 s at 6 against 3.9 s at 8).
          descent_mibps_ = std::max(descent_mibps_, mibps);
          base_ = k;
          base_mibps_ = mibps;
          base_confirmed_ = false;
          return probe(State::ProbeDown, now_s);
        }
        return settle();
      case State::Settled:
        if (base_mibps_ < 0) {
          // First window at a new base: measure it, then look at the neighbours.
          base_mibps_ = mibps;
          base_confirmed_ = false;
          came_from_below_ = false;
          return probe(bound ? State::ProbeUp : State::ProbeDown, now_s);
        }
        if (std::fabs(mibps - base_mibps_) > p_.shift * base_mibps_) {
          if (++off_windows_ >= 2) {
            // With the demand at the cap (bound) the device changed: what the curve
            // measured before describes another device. (Unbound, it is the demand that
            // changed: the curve keeps its points.)
            if (bound) {
              const double now_measured = curve_[k];
              curve_.clear();
              curve_[k] = now_measured;
            }
            base_mibps_ = mibps;
            base_confirmed_ = false;
            came_from_below_ = false;
            return probe(bound ? State::ProbeUp : State::ProbeDown, now_s);
          }
          return base_;
        }
        off_windows_ = 0;
        base_mibps_ = 0.7 * base_mibps_ + 0.3 * mibps;
        base_confirmed_ = true;
        if (now_s - last_probe_s_ >= p_.reprobe_s) {
          came_from_below_ = false;
          return probe(bound ? State::ProbeUp : State::ProbeDown, now_s);
        }
        return base_;
    }
  }
  // The cap in force is not the one we asked for (set by hand, or another controller):
  // adopt it as the new base and measure from there.
  base_ = std::clamp(k, p_.min_k, p_.max_k);
  base_mibps_ = mibps;
  base_confirmed_ = false;
  came_from_below_ = false;
  slow_start_ = warm_start_ = false;
  return probe(bound ? State::ProbeUp : State::ProbeDown, now_s);
}

}  // namespace ppios
