#include "device_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace simfs {

namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Events closer than this (seconds) count as simultaneous; it absorbs rounding in
// the virtual-service arithmetic so a waiter never wakes just short of its completion.
constexpr double kTimeEpsilon = 1e-9;
}  // namespace

double ModelParams::aggregateBandwidth(int k) const {
    if (k <= 0) return 0.0;
    const double peak = peakBytesPerSecond();
    if (k <= optimal_streams) return peak * k / optimal_streams;
    const double kept = std::pow(1.0 - loss_per_stream, k - optimal_streams);
    return peak * std::max(floor_fraction, kept);
}

std::string ModelParams::validate() const {
    if (!(peak_mibps > 0.0)) return "--peak-mibps must be > 0";
    if (optimal_streams < 1) return "--optimal-streams must be >= 1";
    if (!(loss_per_stream >= 0.0 && loss_per_stream < 1.0))
        return "--loss-per-stream must be in [0, 1)";
    if (!(floor_fraction > 0.0 && floor_fraction <= 1.0))
        return "--floor-fraction must be in (0, 1]";
    if (!(latency_us >= 0.0)) return "--latency-us must be >= 0";
    return "";
}

std::string ModelParams::toJson(int curve_max) const {
    std::ostringstream out;
    out.precision(6);
    out << "{\"model\": \"" << (enabled ? "processor-sharing" : "none") << "\""
        << ", \"enabled\": " << (enabled ? "true" : "false")
        << ", \"peak_mibps\": " << peak_mibps
        << ", \"optimal_streams\": " << optimal_streams
        << ", \"loss_per_stream\": " << loss_per_stream
        << ", \"floor_fraction\": " << floor_fraction
        << ", \"latency_us\": " << latency_us
        << ", \"formula\": \"B(k)=peak*k/opt for k<=opt; "
           "peak*max(floor,(1-loss)^(k-opt)) for k>opt; shared equally by in-flight requests\""
        << ", \"curve_mibps\": [";
    for (int k = 1; k <= curve_max; ++k) {
        if (k > 1) out << ", ";
        out << aggregateMibps(k);
    }
    out << "]}";
    return out.str();
}

namespace {
// Finds `"key":` in json and parses the value after it as a number or boolean.
bool findJsonNumber(const std::string& json, const char* key, double* value) {
    const std::string needle = std::string("\"") + key + "\":";
    const size_t at = json.find(needle);
    if (at == std::string::npos) return false;
    const char* p = json.c_str() + at + needle.size();
    while (*p == ' ') ++p;
    if (std::string(p, 4) == "true") { *value = 1.0; return true; }
    if (std::string(p, 5) == "false") { *value = 0.0; return true; }
    char* end = nullptr;
    *value = std::strtod(p, &end);
    return end != p;
}
}  // namespace

bool parseModelJson(const std::string& json, ModelParams* out) {
    double enabled, peak, opt, loss, floor_fraction, latency;
    if (!findJsonNumber(json, "enabled", &enabled) ||
        !findJsonNumber(json, "peak_mibps", &peak) ||
        !findJsonNumber(json, "optimal_streams", &opt) ||
        !findJsonNumber(json, "loss_per_stream", &loss) ||
        !findJsonNumber(json, "floor_fraction", &floor_fraction) ||
        !findJsonNumber(json, "latency_us", &latency))
        return false;
    out->enabled = enabled != 0.0;
    out->peak_mibps = peak;
    out->optimal_streams = static_cast<int>(opt);
    out->loss_per_stream = loss;
    out->floor_fraction = floor_fraction;
    out->latency_us = latency;
    return true;
}

std::string mergeModelJson(const std::string& json, ModelParams* params) {
    ModelParams p = *params;
    double v;
    bool any = false;
    if (findJsonNumber(json, "enabled", &v)) {
        if ((v != 0.0) != p.enabled) return "\"enabled\" cannot change while mounted";
        any = true;
    }
    if (findJsonNumber(json, "peak_mibps", &v)) { p.peak_mibps = v; any = true; }
    if (findJsonNumber(json, "optimal_streams", &v)) {
        if (v != std::floor(v)) return "optimal_streams must be a whole number";
        p.optimal_streams = static_cast<int>(v);
        any = true;
    }
    if (findJsonNumber(json, "loss_per_stream", &v)) { p.loss_per_stream = v; any = true; }
    if (findJsonNumber(json, "floor_fraction", &v)) { p.floor_fraction = v; any = true; }
    if (findJsonNumber(json, "latency_us", &v)) { p.latency_us = v; any = true; }
    if (!any) return "no model field (peak_mibps, optimal_streams, loss_per_stream, floor_fraction, latency_us)";
    const std::string problem = p.validate();
    if (!problem.empty()) return problem;
    *params = p;
    return "";
}

DeviceModel::DeviceModel(const ModelParams& params)
    : params_(params), epoch_(Clock::now()) {}

ModelParams DeviceModel::params() const {
    std::lock_guard<std::mutex> lock(mu_);
    return params_;
}

void DeviceModel::setParams(const ModelParams& params) {
    std::lock_guard<std::mutex> lock(mu_);
    // Settle everything up to now at the old rate; finish tags are in bytes of service,
    // so they stay valid and only the rate at which service accrues changes.
    if (params_.enabled) advanceLocked(now());
    const bool enabled = params_.enabled;
    params_ = params;
    params_.enabled = enabled;
    cv_.notify_all();  // waiters re-project their completion under the new B(k)
}

double DeviceModel::now() const {
    return std::chrono::duration<double>(Clock::now() - epoch_).count();
}

void DeviceModel::accountLocked(int k, double dt, double rate) {
    if (k <= 0 || dt <= 0.0) return;
    if (static_cast<int>(stats_.seconds_at_k.size()) <= k) {
        stats_.seconds_at_k.resize(k + 1, 0.0);
        stats_.bytes_at_k.resize(k + 1, 0.0);
    }
    stats_.seconds_at_k[k] += dt;
    stats_.bytes_at_k[k] += dt * rate * k;
    stats_.busy_seconds += dt;
}

// The classic virtual-time formulation of processor sharing: virtual_service_ is the
// service every transferring request has received since the model started, so a request
// that joins at service V with n bytes finishes when the service reaches V + n, and
// requests finish in order of that tag no matter how k changes in between.
bool DeviceModel::advanceLocked(double t) {
    bool completed_any = false;
    for (;;) {
        const int k = static_cast<int>(in_flight_.size());
        const double rate = k > 0 ? shareRate(k) : 0.0;
        const double next_join = pending_.empty() ? kInfinity : (*pending_.begin())->join_time;
        double next_departure = kInfinity;
        if (k > 0) {
            const Request* first = *in_flight_.begin();
            next_departure = last_update_ + (first->finish_tag - virtual_service_) / rate;
        }
        const double next_event = std::min(next_join, next_departure);
        if (next_event > t + kTimeEpsilon) {
            // No event before t: just let the transferring requests progress until t.
            if (t > last_update_) {
                virtual_service_ += (t - last_update_) * rate;
                accountLocked(k, t - last_update_, rate);
                last_update_ = t;
            }
            return completed_any;
        }
        const double event_time = std::max(next_event, last_update_);
        accountLocked(k, event_time - last_update_, rate);
        if (next_departure <= next_join) {
            Request* first = *in_flight_.begin();
            in_flight_.erase(in_flight_.begin());
            virtual_service_ = first->finish_tag;
            first->completed_at = event_time;
            first->done = true;
            completed_any = true;
        } else {
            virtual_service_ += (event_time - last_update_) * rate;
            Request* joining = *pending_.begin();
            pending_.erase(pending_.begin());
            if (joining->bytes == 0) {
                joining->completed_at = event_time;
                joining->done = true;
                completed_any = true;
            } else {
                joining->finish_tag = virtual_service_ + static_cast<double>(joining->bytes);
                in_flight_.insert(joining);
                stats_.max_concurrency =
                    std::max(stats_.max_concurrency, static_cast<int>(in_flight_.size()));
            }
        }
        last_update_ = event_time;
    }
}

double DeviceModel::projectedCompletionLocked(const Request* req) const {
    // Still in its latency phase: wake when it joins, then project again.
    if (pending_.count(const_cast<Request*>(req))) return req->join_time;
    double t = last_update_;
    double service = virtual_service_;
    int k = static_cast<int>(in_flight_.size());
    for (const Request* r : in_flight_) {
        t += (r->finish_tag - service) / shareRate(k);
        service = r->finish_tag;
        if (r == req) break;
        --k;
    }
    return t;
}

void DeviceModel::admit(Request* req, uint64_t bytes) {
    req->bytes = bytes;
    req->done = false;
    std::lock_guard<std::mutex> lock(mu_);
    stats_.requests += 1;
    stats_.bytes += bytes;
    if (!params_.enabled) {
        req->done = true;
        return;
    }
    const double t = now();
    advanceLocked(t);
    req->join_time = t + params_.latency_us * 1e-6;
    pending_.insert(req);
    // Joining now (zero latency) changes every in-flight projection; waiters see the new
    // state when their current timed wait ends, which is never later than needed because
    // an extra request can only slow the others down (B(k)/k is non-increasing in k).
    if (params_.latency_us <= 0.0) advanceLocked(t);
}

void DeviceModel::await(Request* req) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!params_.enabled) return;
    for (;;) {
        const double t = now();
        if (advanceLocked(t)) cv_.notify_all();
        if (req->done) {
            const double late = std::max(0.0, t - req->completed_at);
            stats_.total_late_wakeup_seconds += late;
            stats_.max_late_wakeup_seconds = std::max(stats_.max_late_wakeup_seconds, late);
            return;
        }
        const double deadline = projectedCompletionLocked(req);
        cv_.wait_until(lock, epoch_ + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(deadline)));
    }
}

void DeviceModel::transfer(uint64_t bytes) {
    Request req;
    admit(&req, bytes);
    await(&req);
}

ModelStats DeviceModel::stats() {
    std::lock_guard<std::mutex> lock(mu_);
    if (params_.enabled) advanceLocked(now());
    return stats_;
}

void DeviceModel::resetStats() {
    std::lock_guard<std::mutex> lock(mu_);
    if (params_.enabled) advanceLocked(now());
    stats_ = ModelStats();
    stats_.max_concurrency = static_cast<int>(in_flight_.size());
}

}  // namespace simfs
