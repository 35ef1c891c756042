// The controller's window accounting (ThroughputWindow), on timelines replayed tick by
// tick: no clock, no backend. The controller's loop around it, in real time, is
// AutoThresholdWindows.* in AutoThresholdTest.cpp.
#include "../src/ThroughputWindow.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ppios {
namespace {

constexpr double kMib = 1024.0 * 1024.0;

// `streams` back-to-back accesses of `access_mib` taking `access_s` each, stream i starting
// at start_s + i * stagger_s; bytes count at release, as the backends count them.
struct Streams {
  int streams = 2;
  double access_s = 0.4, access_mib = 4, start_s = 0, stagger_s = 0.013;
  double mibps() const { return streams * access_mib / access_s; }
  ControlPlane::Sample at(double t, int64_t cap) const {
    ControlPlane::Sample s;
    uint64_t done = 0;
    for (int i = 0; i < streams; ++i) {
      const double began = start_s + i * stagger_s;
      if (t < began) continue;
      ++s.inflight;
      done += static_cast<uint64_t>((t - began) / access_s);
    }
    s.bytes = static_cast<uint64_t>(done * access_mib * kMib);
    s.cap = cap;
    s.auto_on = true;
    return s;
  }
};

// Replays ticks of 10 ms from t0 until the window is done (or `limit_s`).
ThroughputWindow::Result replay(ThroughputWindow &w, const Streams &device, double t0, int64_t cap,
                                double limit_s = 10) {
  double t = t0;
  while (!w.done(t) && t < t0 + limit_s) {
    t += 0.01;
    w.add(device.at(t, cap), t);
  }
  return w.result();
}

// A window that starts before the first access (a process starting up) counts its time
// from the first tick the access was seen, not from its own first sample: the idle 0.19 s
// before it is not the device's (counted, this window would measure 16 MiB/s).
TEST(ThroughputWindow, AnIdleStartIsNotCountedAsTheDevicesTime) {
  Streams device;
  device.start_s = 0.19;
  device.access_s = 0.1;
  device.access_mib = 1;
  ThroughputWindow w(device.at(0, 2), 0, /*idle_until=*/-1, 2, 0, /*slow_start=*/false, ControllerTiming{});
  const auto r = replay(w, device, 0, 2);
  ASSERT_GT(r.bytes, 0u);
  EXPECT_NEAR(r.busy_s, w.last_t() - device.start_s, 0.011);
  EXPECT_NEAR(r.mibps, device.mibps(), 0.1 * device.mibps());
  EXPECT_NEAR(r.level, 2, 0.1) << "in flight on average while busy";
  EXPECT_TRUE(r.bound);
}

// Accesses already in flight when a window starts right after an idle one began in the gap
// between them: the clock starts where the idle window ended. Counted from the window's
// own first sample, a cold E2 start measured 57 MiB/s at two streams of a 10 MiB/s-per-
// stream device.
TEST(ThroughputWindow, AccessesThatBeganBetweenWindowsCountFromTheIdleWindowsEnd) {
  Streams device;
  device.start_s = 0.02;  // the idle window ended at 0; this one's first sample is at 0.3
  const ControllerTiming timing;
  ThroughputWindow w(device.at(0.3, 2), 0.3, /*idle_until=*/0, 2, 0, /*slow_start=*/true, timing);
  const auto r = replay(w, device, 0.3, 2);
  ASSERT_GT(r.bytes, 0u);
  EXPECT_LE(r.mibps, 1.1 * device.mibps());
  EXPECT_GE(r.mibps, 0.85 * device.mibps());
  // Without the idle window's end, the same window measures the accesses' bytes over a
  // fraction of the time they ran.
  ThroughputWindow unanchored(device.at(0.3, 2), 0.3, /*idle_until=*/-1, 2, 0, true, timing);
  EXPECT_GT(replay(unanchored, device, 0.3, 2).mibps, 1.3 * device.mibps());
}

// Accesses longer than the longest window: a window that released nothing stays open while
// they run (ending it would lose the time they ran, and the next window would count their
// bytes over its own short time), and ends once it released some.
TEST(ThroughputWindow, NothingReleasedKeepsTheWindowOpenWhileAccessesRun) {
  Streams device;
  device.access_s = 3;
  device.access_mib = 24;
  device.stagger_s = 0;  // both release at one tick: the first release ends the window
  ControllerTiming timing;
  ThroughputWindow w(device.at(0, 2), 0, -1, 2, 0, false, timing);
  for (double t = 0.01; t < 2.9; t += 0.01) {
    w.add(device.at(t, 2), t);
    ASSERT_FALSE(w.done(t)) << "done at " << t << " s with nothing released";
  }
  const auto r = replay(w, device, 2.9, 2);
  ASSERT_GT(r.bytes, 0u);
  EXPECT_NEAR(r.mibps, device.mibps(), 0.1 * device.mibps());
}

// A target with nothing in flight: the window ends after window_s and measured nothing.
TEST(ThroughputWindow, AnIdleWindowEndsAfterItsMinimumAndMeasuresNothing) {
  Streams device;
  device.start_s = 100;
  ControllerTiming timing;
  ThroughputWindow w(device.at(0, 4), 0, -1, 4, 0, false, timing);
  const auto r = replay(w, device, 0, 4);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_NEAR(w.last_t(), timing.window_s, 0.015);
}

// A window holds min_accesses accesses' bytes (a quarter in slow start), at most
// max_window_s of busy time.
TEST(ThroughputWindow, AWindowHoldsEnoughAccessesAndNoMoreThanItsLongest) {
  Streams device;
  device.streams = 4;
  device.stagger_s = 0.1;  // one release per tick: max_tick_bytes is one access
  const ControllerTiming timing;
  ThroughputWindow full(device.at(0, 4), 0, -1, 4, 0, /*slow_start=*/false, timing);
  auto r = replay(full, device, 0, 4);
  EXPECT_GE(r.bytes / kMib, timing.min_accesses * device.access_mib);
  EXPECT_LE(r.busy_s, timing.max_window_s + 0.011);
  ThroughputWindow slow(device.at(0, 4), 0, -1, 4, 0, /*slow_start=*/true, timing);
  r = replay(slow, device, 0, 4);
  EXPECT_GE(r.bytes / kMib, timing.min_accesses / 4 * device.access_mib);
  EXPECT_LT(r.bytes / kMib, timing.min_accesses / 2 * device.access_mib);
  device.access_s = 10;  // 1.6 MiB/s: 16 accesses take 40 s
  ThroughputWindow longest(device.at(0, 4), 0, -1, 4, 0, false, timing);
  r = replay(longest, device, 0, 4, 60);
  EXPECT_NEAR(r.busy_s, std::max(timing.max_window_s, 10.0), 0.02) << "the first release ends it past the longest";
}

}  // namespace
}  // namespace ppios
