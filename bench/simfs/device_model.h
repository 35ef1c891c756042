// DeviceModel: the emulated shared storage device behind ppios-simfs.
//
// Why it exists: this machine's SSD and page cache show no loss of aggregate bandwidth
// when many streams compete, which is the effect PPIOS schedules around (the PPIOS
// paper (Zhao, Yoshigoe and Xie, 2013), section 3.2, Figs. 2-3; the I/O stream
// throttling study (Seelam, Kerstens and Teller)). The model reintroduces it
// deterministically:
//
//   B(k) = peak * k / opt                                  for k <= opt
//   B(k) = peak * max(floor, (1 - loss)^(k - opt))         for k >  opt
//
// where k is the number of requests currently transferring. In-flight requests share
// B(k) equally (processor sharing): each progresses at B(k)/k bytes/s, and the rate is
// recomputed at every arrival and departure. A request first spends `latency` (seek /
// setup time, not counted in k) and then joins the sharing.
//
// Thread safety: every public method may be called from any thread. One mutex (mu_)
// guards all state; there is no other lock, so there is no lock order to respect.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace simfs {

struct ModelParams {
    bool enabled = true;             // false: zero-delay reference ("theoretically optimal")
    double peak_mibps = 200.0;       // peak aggregate bandwidth, MiB/s, reached at k = opt
    int optimal_streams = 4;         // k at which B(k) peaks
    double loss_per_stream = 0.10;   // fraction of bandwidth lost per stream beyond opt
    double floor_fraction = 0.20;    // B(k) never falls below floor * peak
    double latency_us = 0.0;         // fixed per-request latency before transferring

    double peakBytesPerSecond() const { return peak_mibps * 1024.0 * 1024.0; }
    // Aggregate bandwidth in bytes/s with k requests transferring (k >= 1).
    double aggregateBandwidth(int k) const;
    // Aggregate bandwidth in MiB/s (what humans and the calibrator compare).
    double aggregateMibps(int k) const { return aggregateBandwidth(k) / (1024.0 * 1024.0); }
    // Empty string if valid, else a message naming the bad parameter.
    std::string validate() const;
    // How far result files list B(k): well past the peak, to show the decline.
    int defaultCurveLength() const { return std::min(64, std::max(16, 4 * optimal_streams)); }
    // One JSON object with the parameters, the formula and B(k) for k = 1..curve_max.
    std::string toJson(int curve_max) const;
};

// Parses the JSON written by ModelParams::toJson (only the scalar fields; the format is
// ours, so a key scanner is enough). Returns false if a field is missing.
bool parseModelJson(const std::string& json, ModelParams* out);

// Applies the fields present in `json` (any of peak_mibps, optimal_streams,
// loss_per_stream, floor_fraction, latency_us) to *params: what a write to the mounted
// .simfs-model.json does. Returns "" or a message (no known field, invalid value,
// "enabled" cannot change while mounted).
std::string mergeModelJson(const std::string& json, ModelParams* params);

// Accounting the model keeps about itself, so tests and result files can check what the
// device did rather than trusting wall clocks alone.
struct ModelStats {
    uint64_t requests = 0;
    uint64_t bytes = 0;
    double busy_seconds = 0.0;              // time with k >= 1 transferring
    std::vector<double> seconds_at_k;       // index k: time spent with exactly k transferring
    std::vector<double> bytes_at_k;         // index k: bytes moved while k were transferring
    int max_concurrency = 0;
    double total_late_wakeup_seconds = 0.0; // sum over requests of (thread woke - modeled end)
    double max_late_wakeup_seconds = 0.0;
};

class DeviceModel {
public:
    explicit DeviceModel(const ModelParams& params);
    DeviceModel(const DeviceModel&) = delete;
    DeviceModel& operator=(const DeviceModel&) = delete;

    // One request's life inside the model. Lives on the caller's stack between admit() and
    // await(); the model keeps pointers to it only while it is pending or in flight.
    struct Request {
        uint64_t bytes = 0;
        double join_time = 0.0;     // model seconds: when it starts transferring
        double finish_tag = 0.0;    // virtual service value at which it completes
        double completed_at = 0.0;  // model seconds, valid once done
        bool done = false;
    };

    // Registers a request now. Call before doing the real I/O so the real pread/pwrite
    // overlaps the modeled time instead of adding to it.
    void admit(Request* req, uint64_t bytes);
    // Blocks (condvar timed wait, no spinning) until the model has transferred req's bytes.
    void await(Request* req);
    // admit + await, for callers with nothing to overlap.
    void transfer(uint64_t bytes);

    ModelParams params() const;
    // Changes the device live (ppios-simfs: a write to .simfs-model.json). Requests in
    // flight keep the service they already got and continue at the new B(k).
    // `enabled` cannot change: a zero-delay mount has no model state to continue from.
    void setParams(const ModelParams& params);
    ModelStats stats();
    void resetStats();

private:
    using Clock = std::chrono::steady_clock;

    struct ByJoinTime {
        bool operator()(const Request* a, const Request* b) const {
            return a->join_time != b->join_time ? a->join_time < b->join_time : a < b;
        }
    };
    struct ByFinishTag {
        bool operator()(const Request* a, const Request* b) const {
            return a->finish_tag != b->finish_tag ? a->finish_tag < b->finish_tag : a < b;
        }
    };

    double now() const;
    // Per-request service rate (bytes/s) with k transferring.
    double shareRate(int k) const { return params_.aggregateBandwidth(k) / k; }
    // Moves the model forward to time t, processing joins and departures in time order.
    // Returns true if it completed any request (so waiters must be woken).
    bool advanceLocked(double t);
    // When req will complete if nothing else arrives; arrivals only postpone it because
    // the per-request rate B(k)/k never increases with k.
    double projectedCompletionLocked(const Request* req) const;
    void accountLocked(int k, double dt, double rate);

    ModelParams params_;            // guarded by mu_ (setParams)
    const Clock::time_point epoch_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    double last_update_ = 0.0;      // model seconds at which virtual_service_ is exact
    double virtual_service_ = 0.0;  // service (bytes) each transferring request has got so far
    std::set<Request*, ByJoinTime> pending_;     // admitted, still in their latency phase
    std::set<Request*, ByFinishTag> in_flight_;  // transferring
    ModelStats stats_;
};

}  // namespace simfs
