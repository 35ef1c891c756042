// ppios-simfs-calibrate: checks that a mounted ppios-simfs delivers the bandwidth curve
// it was configured with, the way the PPIOS paper (Zhao, Yoshigoe and Xie, 2013)
// measured its Lustre system (Figs. 2-3):
// k = 1..K concurrent readers, one request at a time each, first on distinct regions of
// a file, then all on the same region. Prints CSV lines and a human table, and exits
// non-zero if any point is off by more than the tolerance.
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "device_model.h"

namespace {

constexpr int kExitPass = 0;
constexpr int kExitOutOfTolerance = 1;
constexpr int kExitError = 2;
constexpr int kExitNoFuse = 3;  // same code as ppios-simfs: FUSE unavailable here

using Clock = std::chrono::steady_clock;

struct CalibrationOptions {
    std::string mountpoint;        // an existing mount, or where SimfsProcess mounts
    std::string backing;           // non-empty: start our own ppios-simfs on this dir
    std::string simfs_binary;      // ppios-simfs to start
    std::vector<std::string> simfs_args;  // model options for the started server
    int max_streams = 0;           // 0: 3 * optimal_streams
    unsigned request_kib = 1024;  // what the kernel sends for large reads (max_read)
    double seconds = 1.0;
    unsigned region_mib = 64;
    bool distinct = true;
    bool same = true;
    double tolerance = 0.10;
    std::string csv_path;
    std::string file_name = "simfs-calibrate.dat";
    int rt_priority = 10;          // SCHED_FIFO for reader threads; 0: ordinary scheduling
};

void printUsage(FILE* out, const char* argv0) {
    const CalibrationOptions d;
    std::fprintf(out,
        "usage: %s [options] MOUNTPOINT\n"
        "       %s [options] --backing DIR [-- ppios-simfs model options]\n"
        "\n"
        "Runs k = 1..K concurrent reader threads (one outstanding request each) on a\n"
        "ppios-simfs mount, first on distinct regions of one file, then all on the same\n"
        "region, as the PPIOS paper (Zhao, Yoshigoe and Xie, 2013) measured its storage\n"
        "(Figs. 2-3), and compares the aggregate bandwidth with the B(k) the mount reports\n"
        "in .simfs-model.json. Output: 'calib,...' CSV lines and a table.\n"
        "Exit: 0 all points within tolerance, 1 some point outside, 2 error,\n"
        "3 FUSE unavailable (only with --backing).\n"
        "\n"
        "  --backing DIR          start ppios-simfs on DIR (foreground child, temporary\n"
        "                         mount point unless MOUNTPOINT is given), stop it after;\n"
        "                         arguments after -- go to ppios-simfs\n"
        "  --simfs PATH           the ppios-simfs binary (default: next to this program)\n"
        "  --max-streams K        largest k (default: 3 x optimal streams, at most 64)\n"
        "  --request-kib N        size of each read request in KiB (%u)\n"
        "  --seconds S            measuring time per k and mode (%g); raised to 4 request\n"
        "                         cycles where one cycle (k x request / B(k)) is longer\n"
        "  --region-mib M         bytes each reader cycles over, MiB (%u); the sparse file\n"
        "                         is K x M MiB\n"
        "  --mode distinct|same|both   which access patterns to run (both)\n"
        "  --tolerance F          largest accepted |measured/expected - 1| (%g)\n"
        "  --csv FILE             also write the CSV (with header) to FILE\n"
        "  --rt-priority N        SCHED_FIFO priority of the reader threads, so other load\n"
        "                         on the machine does not delay them; 0 = ordinary (%d)\n"
        "  -h, --help             this text\n",
        argv0, argv0, d.request_kib, d.seconds, d.region_mib, d.tolerance, d.rt_priority);
}

std::string readWholeFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A ppios-simfs server started and stopped by the calibrator.
class SimfsProcess {
public:
    ~SimfsProcess() { stop(); }

    // Returns an exit code on failure, -1 once the mount answers.
    int start(const CalibrationOptions& o) {
        pid_ = fork();
        if (pid_ < 0) return kExitError;
        if (pid_ == 0) {
            std::vector<std::string> args = {o.simfs_binary, "-f"};
            args.insert(args.end(), o.simfs_args.begin(), o.simfs_args.end());
            args.push_back(o.backing);
            args.push_back(o.mountpoint);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            std::fprintf(stderr, "calibrate: cannot run %s: %s\n", argv[0], std::strerror(errno));
            _exit(kExitError);
        }
        const std::string probe = o.mountpoint + "/.simfs-model.json";
        const auto give_up = Clock::now() + std::chrono::seconds(10);
        while (Clock::now() < give_up) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitError;
                return code == kExitNoFuse ? kExitNoFuse : kExitError;
            }
            struct stat st;
            if (stat(probe.c_str(), &st) == 0) return -1;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        std::fprintf(stderr, "calibrate: ppios-simfs did not mount within 10 s\n");
        return kExitError;
    }

    void stop() {
        if (pid_ <= 0) return;
        kill(pid_, SIGTERM);
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
};

struct Measurement {
    std::string mode;
    int k = 0;
    double configured_mibps = 0;
    double expected_mibps = 0;
    double measured_mibps = 0;
    double rel_error = 0;
    uint64_t requests = 0;
    bool pass = true;
};

class Calibrator {
public:
    Calibrator(const CalibrationOptions& options, const simfs::ModelParams& model)
        : o_(options), model_(model) {}

    int run() {
        const int K = o_.max_streams;
        const std::string path = o_.mountpoint + "/" + o_.file_name;
        const uint64_t region = uint64_t(o_.region_mib) << 20;
        // Sparse: creating it costs no modeled writes, and reading holes still goes
        // through FUSE and the model exactly like reading data.
        const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0 || ftruncate(fd, static_cast<off_t>(region * K)) != 0) {
            std::fprintf(stderr, "calibrate: cannot create %s: %s\n", path.c_str(),
                         std::strerror(errno));
            if (fd >= 0) close(fd);
            return kExitError;
        }
        close(fd);

        std::printf("# ppios-simfs calibration of %s\n# model %s\n", o_.mountpoint.c_str(),
                    model_.toJson(0).c_str());
        std::printf("# request %u KiB, %.2f s per point, tolerance %.0f%%\n", o_.request_kib,
                    o_.seconds, o_.tolerance * 100);
        std::printf("calib,mode,k,configured_mibps,expected_mibps,measured_mibps,rel_error,"
                    "requests,status\n");
        std::vector<Measurement> results;
        int rc = kExitPass;
        for (const char* mode : {"distinct", "same"}) {
            const bool same = std::strcmp(mode, "same") == 0;
            if ((same && !o_.same) || (!same && !o_.distinct)) continue;
            for (int k = 1; k <= K; ++k) {
                Measurement m;
                if (!measure(path, mode, same, k, region, &m)) {
                    rc = kExitError;
                    break;
                }
                std::printf("calib,%s,%d,%.3f,%.3f,%.3f,%+.4f,%llu,%s\n", m.mode.c_str(), m.k,
                            m.configured_mibps, m.expected_mibps, m.measured_mibps, m.rel_error,
                            static_cast<unsigned long long>(m.requests),
                            m.pass ? "pass" : "FAIL");
                std::fflush(stdout);
                if (!m.pass && rc == kExitPass) rc = kExitOutOfTolerance;
                results.push_back(m);
            }
        }
        unlink(path.c_str());
        printTable(results);
        if (!o_.csv_path.empty()) writeCsv(results);
        return rc;
    }

private:
    // What the model should deliver to k synchronous readers of size-s requests: each
    // cycle is latency + s * k / B(k), and all k stay in step (they start together and
    // processor sharing gives them equal progress).
    double expectedMibps(int k) const {
        const double s = double(o_.request_kib) * 1024.0;
        const double cycle = model_.latency_us * 1e-6 + s * k / model_.aggregateBandwidth(k);
        return k * s / cycle / (1024.0 * 1024.0);
    }

    // The readers stand for the storage clients of Figs. 2-3, which had their CPUs to
    // themselves; here other load on two cores would delay their next request and show
    // up as missing device bandwidth.
    void raisePriority() const {
        if (o_.rt_priority <= 0) return;
        sched_param param{};
        param.sched_priority = o_.rt_priority;
        const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
        if (rc != 0 && !rt_warned_.exchange(true))
            std::fprintf(stderr, "calibrate: no SCHED_FIFO for readers (%s); results include "
                                 "CPU scheduling delays\n", std::strerror(rc));
    }

    // Every reader must complete several requests for the point to mean anything.
    double measuringSeconds(int k) const {
        if (!model_.enabled) return o_.seconds;
        const double cycle = double(o_.request_kib) * 1024.0 / (expectedMibps(k) / k * 1048576.0);
        return std::max(o_.seconds, 4 * cycle);
    }

    bool measure(const std::string& path, const char* mode, bool same, int k, uint64_t region,
                 Measurement* m) {
        const size_t request = size_t(o_.request_kib) * 1024;
        std::vector<int> fds(k, -1);
        for (int i = 0; i < k; ++i) {
            fds[i] = open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fds[i] < 0) {
                std::fprintf(stderr, "calibrate: open %s: %s\n", path.c_str(),
                             std::strerror(errno));
                for (int fd : fds) if (fd >= 0) close(fd);
                return false;
            }
        }
        std::atomic<bool> stop{false};
        std::atomic<bool> failed{false};
        std::vector<uint64_t> bytes(k, 0), requests(k, 0);
        // Start gate: all readers issue their first request together.
        std::mutex gate_mu;
        std::condition_variable gate_cv;
        bool open_gate = false;
        std::vector<std::thread> readers;
        for (int i = 0; i < k; ++i) {
            readers.emplace_back([&, i] {
                // Page-aligned: an unaligned 1 MiB buffer spans 257 pages and the kernel
                // sends it as two FUSE requests (1 MiB - 16 and 16 bytes with malloc).
                std::unique_ptr<char, decltype(&std::free)> buf(
                    static_cast<char*>(std::aligned_alloc(4096, request)), &std::free);
                raisePriority();
                const uint64_t base = same ? 0 : uint64_t(i) * region;
                uint64_t pos = 0;
                {
                    std::unique_lock<std::mutex> lock(gate_mu);
                    gate_cv.wait(lock, [&] { return open_gate; });
                }
                while (!stop.load(std::memory_order_relaxed)) {
                    const ssize_t n = pread(fds[i], buf.get(), request,
                                            static_cast<off_t>(base + pos));
                    if (n <= 0) { failed = true; break; }
                    bytes[i] += uint64_t(n);
                    requests[i] += 1;
                    pos = (pos + request) % (region - region % request);
                }
            });
        }
        const auto t0 = Clock::now();
        {
            std::lock_guard<std::mutex> lock(gate_mu);
            open_gate = true;
        }
        gate_cv.notify_all();
        std::this_thread::sleep_for(std::chrono::duration<double>(measuringSeconds(k)));
        stop = true;
        for (auto& t : readers) t.join();
        const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        for (int fd : fds) close(fd);
        if (failed) {
            std::fprintf(stderr, "calibrate: a read on %s failed or hit EOF\n", path.c_str());
            return false;
        }
        uint64_t total = 0;
        m->requests = 0;
        for (int i = 0; i < k; ++i) {
            total += bytes[i];
            m->requests += requests[i];
        }
        m->mode = mode;
        m->k = k;
        m->measured_mibps = double(total) / elapsed / (1024.0 * 1024.0);
        if (model_.enabled) {
            m->configured_mibps = model_.aggregateMibps(k);
            m->expected_mibps = expectedMibps(k);
            m->rel_error = m->measured_mibps / m->expected_mibps - 1.0;
            m->pass = std::fabs(m->rel_error) <= o_.tolerance;
        }
        return true;
    }

    void printTable(const std::vector<Measurement>& results) const {
        std::printf("\n%-9s %4s %12s %12s %12s %9s %6s\n", "mode", "k", "B(k) MiB/s",
                    "expect MiB/s", "meas. MiB/s", "error", "");
        for (const auto& m : results) {
            if (!model_.enabled) {
                std::printf("%-9s %4d %12s %12s %12.1f %9s %6s\n", m.mode.c_str(), m.k, "-",
                            "-", m.measured_mibps, "-", "");
                continue;
            }
            std::printf("%-9s %4d %12.1f %12.1f %12.1f %+8.1f%% %6s\n", m.mode.c_str(), m.k,
                        m.configured_mibps, m.expected_mibps, m.measured_mibps,
                        m.rel_error * 100, m.pass ? "ok" : "FAIL");
        }
        if (!model_.enabled)
            std::printf("(mount has no model: nothing to compare, bandwidths are FUSE's own)\n");
    }

    void writeCsv(const std::vector<Measurement>& results) const {
        FILE* out = std::fopen(o_.csv_path.c_str(), "w");
        if (!out) {
            std::fprintf(stderr, "calibrate: cannot write %s\n", o_.csv_path.c_str());
            return;
        }
        std::fprintf(out, "mode,k,configured_mibps,expected_mibps,measured_mibps,rel_error,"
                          "requests,status\n");
        for (const auto& m : results)
            std::fprintf(out, "%s,%d,%.3f,%.3f,%.3f,%.4f,%llu,%s\n", m.mode.c_str(), m.k,
                         m.configured_mibps, m.expected_mibps, m.measured_mibps, m.rel_error,
                         static_cast<unsigned long long>(m.requests), m.pass ? "pass" : "fail");
        std::fclose(out);
    }

    const CalibrationOptions o_;
    const simfs::ModelParams model_;
    mutable std::atomic<bool> rt_warned_{false};
};

// Returns -1 to continue, else an exit code.
int parseCommandLine(int argc, char** argv, CalibrationOptions* o) {
    enum { kBacking = 1000, kSimfs, kMaxStreams, kRequest, kSeconds, kRegion, kMode,
           kTolerance, kCsv, kRtPriority };
    static const option longopts[] = {
        {"backing", required_argument, nullptr, kBacking},
        {"simfs", required_argument, nullptr, kSimfs},
        {"max-streams", required_argument, nullptr, kMaxStreams},
        {"request-kib", required_argument, nullptr, kRequest},
        {"seconds", required_argument, nullptr, kSeconds},
        {"region-mib", required_argument, nullptr, kRegion},
        {"mode", required_argument, nullptr, kMode},
        {"tolerance", required_argument, nullptr, kTolerance},
        {"csv", required_argument, nullptr, kCsv},
        {"rt-priority", required_argument, nullptr, kRtPriority},
        {"help", no_argument, nullptr, 'h'},
        {nullptr, 0, nullptr, 0},
    };
    // Default ppios-simfs: the sibling of this binary.
    std::string self = argv[0];
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) self.assign(exe, size_t(n));
    o->simfs_binary = self.substr(0, self.rfind('/') + 1) + "ppios-simfs";

    // Everything after the first "--" belongs to ppios-simfs; split it off before getopt
    // so option permutation cannot mix the two.
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--") == 0) {
            o->simfs_args.assign(argv + i + 1, argv + argc);
            argc = i;
            break;
        }
    }
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, nullptr)) != -1) {
        const char* arg = optarg;
        switch (c) {
        case kBacking: o->backing = arg; break;
        case kSimfs: o->simfs_binary = arg; break;
        case kMaxStreams: o->max_streams = std::atoi(arg); break;
        case kRequest: o->request_kib = unsigned(std::atoi(arg)); break;
        case kSeconds: o->seconds = std::atof(arg); break;
        case kRegion: o->region_mib = unsigned(std::atoi(arg)); break;
        case kTolerance: o->tolerance = std::atof(arg); break;
        case kCsv: o->csv_path = arg; break;
        case kRtPriority: o->rt_priority = std::atoi(arg); break;
        case kMode:
            o->distinct = std::strcmp(arg, "same") != 0;
            o->same = std::strcmp(arg, "distinct") != 0;
            if (std::strcmp(arg, "same") && std::strcmp(arg, "distinct") &&
                std::strcmp(arg, "both")) {
                std::fprintf(stderr, "calibrate: --mode is distinct, same or both\n");
                return kExitError;
            }
            break;
        case 'h': printUsage(stdout, argv[0]); return kExitPass;
        default: printUsage(stderr, argv[0]); return kExitError;
        }
    }
    if (argc - optind > 1) {
        std::fprintf(stderr, "calibrate: one MOUNTPOINT at most (see --help)\n");
        return kExitError;
    }
    if (optind < argc) o->mountpoint = argv[optind];
    if (o->backing.empty() && o->mountpoint.empty()) {
        std::fprintf(stderr, "calibrate: give a MOUNTPOINT or --backing DIR (see --help)\n");
        return kExitError;
    }
    if (o->backing.empty() && !o->simfs_args.empty()) {
        std::fprintf(stderr, "calibrate: ppios-simfs options need --backing\n");
        return kExitError;
    }
    if (o->request_kib == 0 || o->seconds <= 0 || o->region_mib == 0 ||
        uint64_t(o->region_mib) * 1024 < o->request_kib || o->max_streams < 0 ||
        o->max_streams > 64 || o->tolerance <= 0 || o->rt_priority < 0 || o->rt_priority > 99) {
        std::fprintf(stderr, "calibrate: bad option value (see --help)\n");
        return kExitError;
    }
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    CalibrationOptions options;
    const int parsed = parseCommandLine(argc, argv, &options);
    if (parsed >= 0) return parsed;

    SimfsProcess server;
    std::string temp_mountpoint;
    if (!options.backing.empty()) {
        if (options.mountpoint.empty()) {
            char tmpl[] = "/tmp/simfs-calibrate.XXXXXX";
            if (!mkdtemp(tmpl)) {
                std::perror("calibrate: mkdtemp");
                return kExitError;
            }
            temp_mountpoint = options.mountpoint = tmpl;
        }
        const int started = server.start(options);
        if (started >= 0) {
            if (!temp_mountpoint.empty()) rmdir(temp_mountpoint.c_str());
            return started;
        }
    }

    simfs::ModelParams model;
    const std::string json = readWholeFile(options.mountpoint + "/.simfs-model.json");
    int rc = kExitError;
    if (!simfs::parseModelJson(json, &model)) {
        std::fprintf(stderr, "calibrate: %s is not a ppios-simfs mount (no readable "
                             ".simfs-model.json)\n", options.mountpoint.c_str());
    } else {
        if (options.max_streams == 0)
            options.max_streams = std::min(64, 3 * model.optimal_streams);
        rc = Calibrator(options, model).run();
    }
    server.stop();
    if (!temp_mountpoint.empty()) rmdir(temp_mountpoint.c_str());
    return rc;
}
