#include "ThroughputWindow.h"

#include <algorithm>

namespace ppios {

ThroughputWindow::ThroughputWindow(const ControlPlane::Sample &first, double t, double idle_until, int64_t cap,
                                   double access_bytes, bool slow_start, const ControllerTiming &timing)
    : timing_(timing),
      first_(first),
      t_first_(t),
      cap_(cap),
      access_bytes_(access_bytes),
      slow_start_(slow_start),
      last_(first),
      t_last_(t) {
  if (first.inflight > 0) busy_since_ = idle_until >= 0 && idle_until < t ? idle_until : t;
}

void ThroughputWindow::add(const ControlPlane::Sample &s, double t) {
  if (s.bytes > last_.bytes) max_tick_bytes_ = std::max<uint64_t>(max_tick_bytes_, s.bytes - last_.bytes);
  // The access seen now began after the previous tick, at which the target was idle.
  if (busy_since_ < 0 && (s.inflight > 0 || s.queued > 0 || s.bytes > last_.bytes)) busy_since_ = t_last_;
  last_ = s;
  t_last_ = t;
  ++ticks_;
  mt_demand_top_ = std::max(mt_demand_top_, s.mt_demand);
  if (busy_since_ < 0) return;
  ++busy_ticks_;
  inflight_sum_ += s.inflight;
  inflight_top_ = std::max(inflight_top_, s.inflight);
  if (s.queued > 0 || s.inflight >= static_cast<uint64_t>(std::max<int64_t>(cap_, 0))) ++bound_ticks_;
}

bool ThroughputWindow::done(double t) const {
  if (busy_since_ < 0) return t - t_first_ >= timing_.window_s;  // idle throughout: nothing to measure
  const uint64_t released = bytes();
  if (released == 0) return t - t_first_ >= timing_.window_s && last_.inflight == 0 && last_.queued == 0;
  const double busy = t - busy_since_;
  if (busy < timing_.window_s) return false;
  if (busy >= timing_.max_window_s) return true;
  // In slow start a probe doubles the cap (about twice the MiB/s below the knee): a
  // quarter of the accesses tells that apart.
  const double accesses = slow_start_ ? timing_.min_accesses / 4 : timing_.min_accesses;
  return released >= accesses * std::max<double>(access_bytes_, max_tick_bytes_);
}

ThroughputWindow::Result ThroughputWindow::result() const {
  Result r;
  r.mt_demand_top = mt_demand_top_;
  if (busy_since_ < 0 || busy_ticks_ == 0) return r;
  r.bytes = bytes();
  r.busy_s = t_last_ - busy_since_;
  if (r.bytes > 0 && r.busy_s > 0) r.mibps = r.bytes / r.busy_s / (1024.0 * 1024.0);
  r.level = static_cast<double>(inflight_sum_) / busy_ticks_;
  r.inflight_top = inflight_top_;
  r.bound = 2 * bound_ticks_ >= busy_ticks_;
  return r;
}

}  // namespace ppios
