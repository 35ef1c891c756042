// Controller loop of PPIOS_THRESHOLD=auto. Lock order: stop_mutex_ is a leaf, never held
// across a ControlPlane call.
#include "AutoThreshold.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace ppios {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

AutoThreshold::AutoThreshold(std::unique_ptr<ControlPlane> plane, int lease_ms, const ControllerTiming &timing,
                             const ClimberParams &climber)
    : plane_(std::move(plane)), lease_ms_(lease_ms), timing_(timing), climber_params_(climber) {
  thread_ = std::thread([this] { run(); });
}

AutoThreshold::~AutoThreshold() {
  {
    std::lock_guard<std::mutex> g(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool AutoThreshold::pause(double seconds) {
  std::unique_lock<std::mutex> lk(stop_mutex_);
  return !stop_cv_.wait_for(lk, std::chrono::duration<double>(seconds), [this] { return stopping_; });
}

void AutoThreshold::run() {
  std::unique_ptr<ThroughputClimber> climber;
  // Largest bytes completed between two ticks lately: about the size of one access
  // (bytes arrive at release, one access at a time), decayed so one burst does not
  // lengthen every later window.
  double access_bytes = 0;
  const double renew_s = std::max(0.01, lease_ms_ / 3000.0);
  const double idle_s = std::min(0.1, renew_s);
  bool leading = false;
  // The last window completed no bytes (or none was measured yet). Accesses in flight when
  // the next one starts began before it, and all their bytes count in it: after a lull,
  // with accesses of 0.4 s (4 MiB at E2's 10 MiB/s per stream), a first window of 0.3 s
  // measured 57 MiB/s at two streams, three times the device, and a cold start believed
  // it. That window is not learned; the windows after it start and end with accesses in
  // flight alike.
  bool after_lull = true;
  double lead_renewed = 0;
  auto keep_lead = [&](bool force) {
    double t = now_s();
    if (!force && leading && t - lead_renewed < renew_s) return leading;
    leading = plane_->lead(lease_ms_);
    lead_renewed = t;
    return leading;
  };
  for (;;) {
    if (!keep_lead(false)) {
      climber.reset();  // whoever leads now learns on its own; we start fresh if we lead again
      if (!pause(renew_s)) break;
      continue;
    }
    ControlPlane::Sample s0;
    if (!plane_->sample(&s0) || !s0.auto_on) {
      climber.reset();
      if (!pause(idle_s)) break;
      continue;
    }
    // Learning starts from the curve the target kept (the controller before us, or an
    // earlier run), at its best cap; with none, from the cap in force: 1 on a fresh target,
    // else one stored by hand or by `calibrate --store`. A cap outside the climber's range
    // (a forged or absurd value) is clamped into it.
    int64_t k = std::clamp<int64_t>(s0.cap, climber_params_.min_k, climber_params_.max_k);
    if (!climber) {
      climber = std::make_unique<ThroughputClimber>(static_cast<int>(k), climber_params_, plane_->stored_curve());
      k = climber->base();
    }
    if (s0.cap != k || s0.mt_hold != climber->holds_mts()) plane_->set_cap(k, climber->holds_mts());
    if (!pause(timing_.settle_s)) break;
    ControlPlane::Sample s1;
    if (!plane_->sample(&s1)) continue;
    const double t1 = now_s();
    int ticks = 0, bound_ticks = 0;
    uint64_t inflight_sum = 0;
    uint32_t mt_demand_top = 0;  // most MTs in flight or queued at one tick
    uint32_t inflight_top = 0;  // most accesses in flight at one tick
    bool changed = false, stop = false;
    ControlPlane::Sample s2 = s1;
    uint64_t window_max_tick = 0;
    access_bytes *= 0.8;
    // A window lasts window_s and until it holds min_accesses accesses' worth of bytes
    // (at most max_window_s): bytes count at release, so with accesses of 4 MiB at
    // 10 MiB/s a short window measures which accesses happened to end in it.
    auto window_done = [&] {
      const double t = now_s() - t1;
      if (t < timing_.window_s) return false;
      if (t >= timing_.max_window_s) return true;
      const uint64_t bytes = s2.bytes >= s1.bytes ? s2.bytes - s1.bytes : 0;
      // In slow start a probe doubles the cap (about twice the MiB/s below the knee): a
      // quarter of the accesses tells that apart.
      const double accesses = climber->slow_start() ? timing_.min_accesses / 4 : timing_.min_accesses;
      return bytes >= accesses * std::max<double>(access_bytes, window_max_tick);
    };
    while (!window_done()) {
      const uint64_t before = s2.bytes;
      if (!pause(timing_.tick_s)) {
        stop = true;
        break;
      }
      if (!keep_lead(false)) break;
      if (!plane_->sample(&s2)) break;
      if (s2.cap != k || !s2.auto_on) {
        changed = true;  // set by hand, or auto turned off: this window measures nothing
        break;
      }
      if (s2.bytes > before) window_max_tick = std::max(window_max_tick, s2.bytes - before);
      ++ticks;
      inflight_sum += s2.inflight;
      mt_demand_top = std::max(mt_demand_top, s2.mt_demand);
      inflight_top = std::max(inflight_top, s2.inflight);
      if (s2.queued > 0 || s2.inflight >= static_cast<uint64_t>(k)) ++bound_ticks;
    }
    if (stop) break;
    access_bytes = std::max<double>(access_bytes, window_max_tick);
    if (!leading || changed || ticks == 0) continue;
    {
      const double t2 = now_s();
      const uint64_t bytes = s2.bytes >= s1.bytes ? s2.bytes - s1.bytes : 0;
      if (bytes == 0) {  // idle target: nothing to learn
        after_lull = true;
        continue;
      }
      const bool warm_up = after_lull && s1.inflight > 0;
      after_lull = false;
      if (warm_up) continue;
      const double mibps = bytes / (t2 - t1) / (1024.0 * 1024.0);
      const bool bound = 2 * bound_ticks >= ticks;
      // MTs past the cap (a slow start's, or PPIOS_MT_THROTTLE=0) ran more accesses than k: the window
      // measured the device at that real concurrency, whatever the class.
      const double level = static_cast<double>(inflight_sum) / ticks;
      const int at = static_cast<int>(std::lround(level));
      climber->observe_mts(static_cast<int>(mt_demand_top));
      int next;
      if (level > k + 0.5)
        next = climber->overrun(static_cast<int>(k), at, mibps, t2);
      else if (!bound && inflight_top < k)
        next = climber->underrun(static_cast<int>(k), static_cast<int>(inflight_top), mibps, t2, at);
      else
        next = climber->next(static_cast<int>(k), mibps, bound, t2, at);
      plane_->publish_curve(climber->curve());
      if (next != k || s2.mt_hold != climber->holds_mts()) plane_->set_cap(next, climber->holds_mts());
    }
  }
  if (leading) plane_->resign();
}

}  // namespace ppios
