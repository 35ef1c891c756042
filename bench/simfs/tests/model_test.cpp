// Unit test of DeviceModel without FUSE: the curve, processor sharing with arrivals and
// departures, and latency. Checks the model's own accounting tightly and wall-clock
// times loosely (the machine has two cores and other tests may run).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "device_model.h"

namespace {

int failures = 0;
using Clock = std::chrono::steady_clock;
constexpr double kMiB = 1024.0 * 1024.0;

void expectNear(const char* what, double actual, double expected, double rel_tolerance) {
    const double error = std::fabs(actual / expected - 1.0);
    const bool ok = error <= rel_tolerance;
    std::printf("%s %-48s actual %.6g expected %.6g (%.1f%%)\n", ok ? "ok  " : "FAIL", what,
                actual, expected, error * 100);
    if (!ok) ++failures;
}

double secondsSince(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

void testCurve() {
    simfs::ModelParams p;
    p.peak_mibps = 100;
    p.optimal_streams = 4;
    p.loss_per_stream = 0.1;
    p.floor_fraction = 0.5;
    expectNear("B(1) = peak/opt", p.aggregateMibps(1), 25.0, 1e-12);
    expectNear("B(4) = peak", p.aggregateMibps(4), 100.0, 1e-12);
    expectNear("B(6) = peak*0.9^2", p.aggregateMibps(6), 81.0, 1e-12);
    expectNear("B(20) = floor", p.aggregateMibps(20), 50.0, 1e-12);
    simfs::ModelParams parsed;
    parsed.peak_mibps = 1;
    const bool ok = simfs::parseModelJson(p.toJson(8), &parsed) &&
                    parsed.peak_mibps == p.peak_mibps &&
                    parsed.optimal_streams == p.optimal_streams &&
                    parsed.floor_fraction == p.floor_fraction;
    std::printf("%s JSON round trip\n", ok ? "ok  " : "FAIL");
    if (!ok) ++failures;
}

// Wall-clock times: never earlier than the model allows (a failure at once), and not
// much later (generous, so the test also passes under sanitizers). A loaded machine can
// always make a thread late, never early: lateness is counted apart, and main() runs
// the timed tests again when a round had late requests.
int late = 0;
void expectWallTime(const char* what, double actual, double expected) {
    const bool early = actual < expected * 0.99;
    const bool slow = actual > expected * 1.5 + 0.005;
    std::printf("%s %-48s actual %.6g expected %.6g (+1.5x allowed)\n",
                early ? "FAIL" : slow ? "LATE" : "ok  ", what, actual, expected);
    if (early) ++failures;
    if (slow) ++late;
}

// k requests of `bytes` each, admitted at the same instant: all finish at k*bytes/B(k).
void testSimultaneous(int k) {
    simfs::ModelParams p;
    p.peak_mibps = 64;
    p.optimal_streams = 2;
    p.loss_per_stream = 0.2;
    p.floor_fraction = 0.1;
    simfs::DeviceModel model(p);
    const uint64_t bytes = 1 << 20;
    const double expected = k * bytes / p.aggregateBandwidth(k);
    std::vector<simfs::DeviceModel::Request> requests(k);
    std::vector<double> elapsed(k);
    const auto t0 = Clock::now();
    for (auto& r : requests) model.admit(&r, bytes);
    std::vector<std::thread> threads;
    for (int i = 0; i < k; ++i)
        threads.emplace_back([&, i] {
            model.await(&requests[i]);
            elapsed[i] = secondsSince(t0);
        });
    for (auto& t : threads) t.join();
    const simfs::ModelStats s = model.stats();
    char what[80];
    // The admissions take microseconds, spent at k' < k: hence 1%, not exact.
    std::snprintf(what, sizeof what, "k=%d: modeled busy time", k);
    expectNear(what, s.busy_seconds, expected, 0.01);
    std::snprintf(what, sizeof what, "k=%d: modeled time at k", k);
    expectNear(what, s.seconds_at_k.at(k), expected, 0.01);
    std::snprintf(what, sizeof what, "k=%d: bytes moved", k);
    double moved = 0;
    for (double b : s.bytes_at_k) moved += b;
    expectNear(what, moved, double(k * bytes), 1e-6);
    for (int i = 0; i < k; ++i) {
        std::snprintf(what, sizeof what, "k=%d: request %d wall time", k, i);
        expectWallTime(what, elapsed[i], expected);
    }
}

// A alone for a while, then B joins; per-request rate halves (opt = 1, loss 0) and A
// speeds up again when B leaves. Checked against the model's time-at-k accounting.
void testArrivalAndDeparture() {
    simfs::ModelParams p;
    p.peak_mibps = 64;
    p.optimal_streams = 1;
    p.loss_per_stream = 0.0;
    p.floor_fraction = 1.0;
    simfs::DeviceModel model(p);
    const auto t0 = Clock::now();
    double a_done = 0, b_start = 0, b_done = 0;
    std::thread a([&] {
        model.transfer(4 << 20);  // 62.5 ms alone
        a_done = secondsSince(t0);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::thread b([&] {
        b_start = secondsSince(t0);
        model.transfer(1 << 20);  // shares 64 MiB/s with A: 32 MiB/s each
        b_done = secondsSince(t0);
    });
    a.join();
    b.join();
    const simfs::ModelStats s = model.stats();
    // Together, the device always runs at 64 MiB/s: 5 MiB take 78.125 ms of busy time,
    // of which 2 MiB (B's 1 MiB and 1 MiB of A's) moved with k = 2.
    expectNear("A+B: busy time", s.busy_seconds, 5.0 / 64.0, 0.01);
    expectNear("A+B: time at k=2", s.seconds_at_k.at(2), 2.0 / 64.0, 0.01);
    expectWallTime("A+B: B's wall time", b_done - b_start, 2.0 / 64.0);
    expectWallTime("A+B: A's wall time", a_done, 5.0 / 64.0);
}

void testLatency() {
    simfs::ModelParams p;
    p.latency_us = 5000;
    p.peak_mibps = 100;
    p.optimal_streams = 1;
    simfs::DeviceModel model(p);
    const auto t0 = Clock::now();
    model.transfer(0);
    expectWallTime("latency only", secondsSince(t0), 0.005);
    const auto t1 = Clock::now();
    model.transfer(1 << 20);
    expectWallTime("latency + 1 MiB at 100 MiB/s", secondsSince(t1), 0.005 + 0.01);
}

void testNoModel() {
    simfs::ModelParams p;
    p.enabled = false;
    simfs::DeviceModel model(p);
    const auto t0 = Clock::now();
    model.transfer(1ull << 40);
    const double t = secondsSince(t0);
    const bool ok = t < 0.01 && model.stats().bytes == (1ull << 40);
    std::printf("%s --no-model: 1 TiB in %.6f s\n", ok ? "ok  " : "FAIL", t);
    if (!ok) ++failures;
}

}  // namespace

int main() {
    testCurve();
    for (int round = 1; round <= 3; ++round) {
        late = 0;
        testSimultaneous(1);
        testSimultaneous(2);
        testSimultaneous(6);
        testArrivalAndDeparture();
        testLatency();
        testNoModel();
        if (late == 0) break;
        std::printf("round %d: %d wall time(s) later than allowed (a loaded machine?)%s\n", round,
                    late, round < 3 ? ": once more" : "");
    }
    failures += late;
    std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
