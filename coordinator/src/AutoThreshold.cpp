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
    : plane_(std::move(plane)),
      lease_ms_(lease_ms),
      timing_(timing),
      climber_params_(climber),
      renew_s_(std::max(0.01, lease_ms / 3000.0)) {
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

bool AutoThreshold::keep_lead(bool force) {
  const double t = now_s();
  if (!force && leading_ && t - lead_renewed_s_ < renew_s_) return leading_;
  leading_ = plane_->lead(lease_ms_);
  lead_renewed_s_ = t;
  return leading_;
}

void AutoThreshold::run() {
  std::unique_ptr<ThroughputClimber> climber;
  // Largest bytes completed between two ticks lately: about the size of one access
  // (bytes arrive at release, one access at a time), decayed so one burst does not
  // lengthen every later window.
  double access_bytes = 0;
  // When the last window ended having released nothing (-1: it released bytes). Accesses
  // in flight at the next window's start began after it.
  double idle_until = -1;
  const double idle_s = std::min(0.1, renew_s_);
  for (;;) {
    if (!keep_lead(false)) {
      climber.reset();  // whoever leads now learns on its own; we start fresh if we lead again
      if (!pause(renew_s_)) break;
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
    access_bytes *= 0.8;
    ThroughputWindow window(s1, now_s(), idle_until, k, access_bytes, climber->slow_start(), timing_);
    const Measured m = measure(window, k, *climber);
    if (m == Measured::Stop) break;
    access_bytes = std::max<double>(access_bytes, window.max_tick_bytes());
    if (m == Measured::Void) continue;
    if (window.result().bytes == 0) {  // idle target: nothing to learn
      idle_until = window.last_t();
      continue;
    }
    idle_until = -1;
    learn(*climber, k, window);
  }
  if (leading_) plane_->resign();
}

AutoThreshold::Measured AutoThreshold::measure(ThroughputWindow &window, int64_t k, ThroughputClimber &climber) {
  while (!window.done(now_s())) {
    if (!pause(timing_.tick_s)) return Measured::Stop;
    ControlPlane::Sample s;
    if (!keep_lead(false) || !plane_->sample(&s)) return Measured::Void;
    // Set by hand, or auto turned off: this window measures nothing.
    if (s.cap != k || !s.auto_on) return Measured::Void;
    window.add(s, now_s());
    // More MTs than the climber has seen: whether they wait at the cap is decided again
    // now, not at the window's end. A read phase of a few seconds has one or two windows
    // of up to 2 s, and a hold decided at a window's start, before its MTs arrived, stood
    // for all of it (E2 P = 8: eight MTs waited out the first window at a cap of 6 that
    // the curve did not show losing anything against 8). The demand only grows here; the
    // window's end sets it to the window's peak (learn()).
    if (s.mt_demand > static_cast<uint32_t>(climber.mt_demand())) {
      climber.observe_mts(static_cast<int>(s.mt_demand));
      if (climber.holds_mts() != s.mt_hold) plane_->set_cap(k, climber.holds_mts());
    }
  }
  return window.ticks() > 0 ? Measured::Window : Measured::Void;
}

void AutoThreshold::learn(ThroughputClimber &climber, int64_t k, const ThroughputWindow &window) {
  const ThroughputWindow::Result r = window.result();
  const double t = window.last_t();
  // MTs past the cap (a slow start's, or PPIOS_MT_THROTTLE=0) ran more accesses than k: the
  // window measured the device at that real concurrency, whatever the class.
  const int at = static_cast<int>(std::lround(r.level));
  const int cap = static_cast<int>(k);
  climber.observe_mts(static_cast<int>(r.mt_demand_top));
  int next;
  if (r.level > k + 0.5)
    next = climber.overrun(cap, at, r.mibps, t);
  else if (!r.bound && r.inflight_top < k)
    next = climber.underrun(cap, static_cast<int>(r.inflight_top), r.mibps, t, at);
  else
    next = climber.next(cap, r.mibps, r.bound, t, at);
  plane_->publish_curve(climber.curve());
  if (next != k || window.last().mt_hold != climber.holds_mts()) plane_->set_cap(next, climber.holds_mts());
}

}  // namespace ppios
