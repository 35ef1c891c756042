// ppios-simfs: mount a contended-storage emulator over a backing directory.
// Parses the command line, checks the environment (backing dir, mount point, /dev/fuse)
// with messages a user can act on, then runs libfuse's multi-threaded loop around SimFs.
#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_model.h"
#include "simfs_fs.h"

namespace {

// Exit codes, so scripts can tell "FUSE missing here" (skip) from real failures.
constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitBadPath = 2;
constexpr int kExitNoFuse = 3;
constexpr int kExitMountFailed = 4;

struct CommandLine {
    simfs::ModelParams model;
    simfs::SimFsOptions fs;
    bool foreground = false;
    bool fuse_debug = false;
    bool allow_other = false;
    bool print_model = false;
    unsigned threads = 128;
    std::string extra_mount_options;
    std::string pid_file;
    std::string backing;
    std::string mountpoint;
};

void printUsage(FILE* out, const char* argv0) {
    const simfs::ModelParams d;
    std::fprintf(out,
        "usage: %s [options] BACKING_DIR MOUNTPOINT\n"
        "       %s --print-model [model options]\n"
        "\n"
        "Mirrors BACKING_DIR at MOUNTPOINT through FUSE and delays every read and write of\n"
        "file data with a shared device model: k concurrent requests share an aggregate\n"
        "bandwidth B(k) (processor sharing), where\n"
        "  B(k) = peak * k / opt                              for k <= opt\n"
        "  B(k) = peak * max(floor, (1 - loss)^(k - opt))     for k >  opt\n"
        "and each request first waits a fixed latency. Metadata operations are not delayed.\n"
        "The kernel keeps no page cache and does no readahead for the mount (direct_io).\n"
        "\n"
        "Device model:\n"
        "  --peak-mibps X         peak aggregate bandwidth in MiB/s, reached at k = opt (%g)\n"
        "  --optimal-streams N    concurrency at which B(k) peaks (%d)\n"
        "  --loss-per-stream F    fraction of bandwidth lost per request beyond opt (%g)\n"
        "  --floor-fraction F     B(k) never drops below F * peak (%g)\n"
        "  --latency-us X         fixed latency of every request before it transfers, in\n"
        "                         microseconds; not counted in k (%g)\n"
        "  --no-model             no delay at all: same FUSE path, the 'optimal' reference\n"
        "  --print-model          print the model parameters and B(k) as JSON and exit\n"
        "\n"
        "FUSE:\n"
        "  -f, --foreground       stay in the foreground (default: daemonize once mounted)\n"
        "  -d, --debug            libfuse debug output (implies -f)\n"
        "  --threads N            max FUSE worker threads, bounds the concurrency the model\n"
        "                         can see (%u)\n"
        "  --max-request-kib N    largest read/write request asked of the kernel, KiB;\n"
        "                         the kernel caps it at 1024 (%u)\n"
        "  --rt-priority N        SCHED_FIFO priority of the FUSE workers, so a loaded CPU\n"
        "                         does not stretch the modeled times; 0 = ordinary\n"
        "                         scheduling; falls back with a warning without root (%d)\n"
        "  --allow-other          let users other than the mounter access the mount\n"
        "  -o OPTS                extra mount options passed to libfuse\n"
        "  --pid-file FILE        write the server's pid to FILE once mounted\n"
        "  -h, --help             this text\n"
        "\n"
        "Virtual files at the mount root (not listed by readdir):\n"
        "  .simfs-model.json      the model parameters and B(k); write JSON with some of\n"
        "                         peak_mibps, optimal_streams, loss_per_stream,\n"
        "                         floor_fraction, latency_us to change the device live\n"
        "                         (applied at close; a bad document fails the close)\n"
        "  .simfs-stats.json      the model's accounting (bytes, time at each k, late\n"
        "                         wake-ups) and FUSE request sizes; truncate it to reset\n"
        "\n"
        "Stop: SIGTERM/SIGINT to the server, or fusermount3 -u MOUNTPOINT.\n"
        "Exit codes: 0 ok, 1 usage, 2 bad backing dir or mount point, 3 FUSE unavailable,\n"
        "4 mount failed.\n",
        argv0, argv0, d.peak_mibps, d.optimal_streams, d.loss_per_stream, d.floor_fraction,
        d.latency_us, CommandLine().threads, simfs::SimFsOptions().max_request_bytes / 1024,
        simfs::SimFsOptions().realtime_priority);
}

bool parseDouble(const char* text, double* out) {
    char* end = nullptr;
    errno = 0;
    *out = std::strtod(text, &end);
    return errno == 0 && end != text && *end == '\0';
}

bool parseUnsigned(const char* text, unsigned long* out) {
    char* end = nullptr;
    errno = 0;
    *out = std::strtoul(text, &end, 10);
    return errno == 0 && end != text && *end == '\0' && text[0] != '-';
}

// Returns -1 to continue, else an exit code.
int parseCommandLine(int argc, char** argv, CommandLine* cl) {
    enum {
        kPeak = 1000, kOptimal, kLoss, kFloor, kLatency, kNoModel, kPrintModel, kThreads,
        kMaxRequest, kAllowOther, kPidFile, kRtPriority
    };
    static const option longopts[] = {
        {"peak-mibps", required_argument, nullptr, kPeak},
        {"optimal-streams", required_argument, nullptr, kOptimal},
        {"loss-per-stream", required_argument, nullptr, kLoss},
        {"floor-fraction", required_argument, nullptr, kFloor},
        {"latency-us", required_argument, nullptr, kLatency},
        {"no-model", no_argument, nullptr, kNoModel},
        {"print-model", no_argument, nullptr, kPrintModel},
        {"foreground", no_argument, nullptr, 'f'},
        {"debug", no_argument, nullptr, 'd'},
        {"threads", required_argument, nullptr, kThreads},
        {"max-request-kib", required_argument, nullptr, kMaxRequest},
        {"allow-other", no_argument, nullptr, kAllowOther},
        {"pid-file", required_argument, nullptr, kPidFile},
        {"rt-priority", required_argument, nullptr, kRtPriority},
        {"help", no_argument, nullptr, 'h'},
        {nullptr, 0, nullptr, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "fdho:", longopts, nullptr)) != -1) {
        double value = 0;
        unsigned long count = 0;
        switch (c) {
        case kPeak:
        case kLoss:
        case kFloor:
        case kLatency:
            if (!parseDouble(optarg, &value)) {
                std::fprintf(stderr, "ppios-simfs: not a number: '%s'\n", optarg);
                return kExitUsage;
            }
            if (c == kPeak) cl->model.peak_mibps = value;
            if (c == kLoss) cl->model.loss_per_stream = value;
            if (c == kFloor) cl->model.floor_fraction = value;
            if (c == kLatency) cl->model.latency_us = value;
            break;
        case kOptimal:
        case kThreads:
        case kMaxRequest:
            if (!parseUnsigned(optarg, &count) || count == 0 || count > 100000) {
                std::fprintf(stderr, "ppios-simfs: not a positive integer: '%s'\n", optarg);
                return kExitUsage;
            }
            if (c == kOptimal) cl->model.optimal_streams = static_cast<int>(count);
            if (c == kThreads) cl->threads = static_cast<unsigned>(count);
            if (c == kMaxRequest) {
                if (count > 1024) {
                    std::fprintf(stderr, "ppios-simfs: --max-request-kib is at most 1024\n");
                    return kExitUsage;
                }
                cl->fs.max_request_bytes = static_cast<unsigned>(count * 1024);
            }
            break;
        case kRtPriority:
            if (!parseUnsigned(optarg, &count) || count > 99) {
                std::fprintf(stderr, "ppios-simfs: --rt-priority is 0..99\n");
                return kExitUsage;
            }
            cl->fs.realtime_priority = static_cast<int>(count);
            break;
        case kNoModel: cl->model.enabled = false; break;
        case kPrintModel: cl->print_model = true; break;
        case kAllowOther: cl->allow_other = true; break;
        case kPidFile: cl->pid_file = optarg; break;
        case 'f': cl->foreground = true; break;
        case 'd': cl->fuse_debug = cl->foreground = true; break;
        case 'o':
            if (!cl->extra_mount_options.empty()) cl->extra_mount_options += ",";
            cl->extra_mount_options += optarg;
            break;
        case 'h': printUsage(stdout, argv[0]); return kExitOk;
        default: printUsage(stderr, argv[0]); return kExitUsage;
        }
    }
    const std::string problem = cl->model.validate();
    if (!problem.empty()) {
        std::fprintf(stderr, "ppios-simfs: %s\n", problem.c_str());
        return kExitUsage;
    }
    if (cl->print_model) return -1;
    if (argc - optind != 2) {
        std::fprintf(stderr, "ppios-simfs: expected BACKING_DIR and MOUNTPOINT (see --help)\n");
        return kExitUsage;
    }
    cl->backing = argv[optind];
    cl->mountpoint = argv[optind + 1];
    return -1;
}

// Absolute paths, because daemonizing changes the working directory to /.
bool absolutePath(const std::string& path, std::string* out) {
    char resolved[PATH_MAX];
    if (!realpath(path.c_str(), resolved)) return false;
    *out = resolved;
    return true;
}

int checkEnvironment(CommandLine* cl, int* backing_fd) {
    std::string backing, mountpoint;
    struct stat st;
    if (!absolutePath(cl->backing, &backing) || stat(backing.c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
        std::fprintf(stderr, "ppios-simfs: backing directory '%s' is not a directory: %s\n",
                     cl->backing.c_str(), std::strerror(errno ? errno : ENOTDIR));
        return kExitBadPath;
    }
    errno = 0;
    if (!absolutePath(cl->mountpoint, &mountpoint) || stat(mountpoint.c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
        std::fprintf(stderr,
                     "ppios-simfs: mount point '%s' is not a usable directory: %s "
                     "(if a dead simfs is still mounted there, run fusermount3 -u on it)\n",
                     cl->mountpoint.c_str(), std::strerror(errno ? errno : ENOTDIR));
        return kExitBadPath;
    }
    cl->backing = backing;
    cl->mountpoint = mountpoint;
    const int fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fuse_fd < 0) {
        std::fprintf(stderr,
                     "ppios-simfs: FUSE is unavailable: cannot open /dev/fuse: %s "
                     "(load the fuse module, or give the container the device)\n",
                     std::strerror(errno));
        return kExitNoFuse;
    }
    close(fuse_fd);
    *backing_fd = open(backing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*backing_fd < 0) {
        std::fprintf(stderr, "ppios-simfs: cannot open '%s': %s\n", backing.c_str(),
                     std::strerror(errno));
        return kExitBadPath;
    }
    return -1;
}

std::string describeModel(const simfs::ModelParams& m) {
    if (!m.enabled) return "no model (zero delay)";
    char text[256];
    std::snprintf(text, sizeof(text),
                  "peak %.1f MiB/s at %d streams, -%.0f%%/extra stream, floor %.0f%%, "
                  "latency %.0f us; B(1)=%.1f B(%d)=%.1f B(%d)=%.1f MiB/s",
                  m.peak_mibps, m.optimal_streams, m.loss_per_stream * 100,
                  m.floor_fraction * 100, m.latency_us, m.aggregateMibps(1),
                  m.optimal_streams, m.aggregateMibps(m.optimal_streams),
                  2 * m.optimal_streams, m.aggregateMibps(2 * m.optimal_streams));
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    CommandLine cl;
    const int parsed = parseCommandLine(argc, argv, &cl);
    if (parsed >= 0) return parsed;
    if (cl.print_model) {
        std::printf("%s\n", cl.model.toJson(cl.model.defaultCurveLength()).c_str());
        return kExitOk;
    }
    int backing_fd = -1;
    const int env = checkEnvironment(&cl, &backing_fd);
    if (env >= 0) return env;

    simfs::DeviceModel model(cl.model);
    simfs::SimFs fs(backing_fd, cl.backing, &model, cl.fs);

    // max_read must be given both as a mount option and in init() (fuse_common.h).
    std::string mount_options = "fsname=ppios-simfs,subtype=ppios-simfs,default_permissions";
    mount_options += ",max_read=" + std::to_string(cl.fs.max_request_bytes);
    if (cl.allow_other) mount_options += ",allow_other";
    if (!cl.extra_mount_options.empty()) mount_options += "," + cl.extra_mount_options;
    std::vector<std::string> arg_storage = {argv[0], "-o", mount_options};
    if (cl.fuse_debug) arg_storage.push_back("-d");
    std::vector<char*> fuse_argv;
    for (auto& a : arg_storage) fuse_argv.push_back(a.data());
    fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fuse_argv.size()), fuse_argv.data());

    fuse* f = fuse_new(&args, &simfs::SimFs::operations(), sizeof(fuse_operations), &fs);
    // Option parsing may have replaced args.argv with an allocated copy.
    fuse_opt_free_args(&args);
    if (!f) {
        std::fprintf(stderr, "ppios-simfs: fuse_new failed (bad -o option?)\n");
        return kExitUsage;
    }
    if (fuse_mount(f, cl.mountpoint.c_str()) != 0) {
        std::fprintf(stderr, "ppios-simfs: mounting on '%s' failed (see libfuse's message "
                             "above; is something already mounted there?)\n",
                     cl.mountpoint.c_str());
        fuse_destroy(f);
        return kExitMountFailed;
    }
    fuse_session* se = fuse_get_session(f);
    int rc = kExitOk;
    // libfuse's handlers turn SIGTERM/SIGINT/SIGHUP into a clean end of the loop below.
    if (fuse_set_signal_handlers(se) != 0) {
        rc = kExitMountFailed;
    } else {
        std::fprintf(stderr, "ppios-simfs: %s mounted at %s: %s\n", cl.backing.c_str(),
                     cl.mountpoint.c_str(), describeModel(cl.model).c_str());
        if (fuse_daemonize(cl.foreground ? 1 : 0) != 0) {
            rc = kExitMountFailed;
        } else {
            if (!cl.pid_file.empty()) {
                if (FILE* pf = std::fopen(cl.pid_file.c_str(), "w")) {
                    std::fprintf(pf, "%d\n", static_cast<int>(getpid()));
                    std::fclose(pf);
                }
            }
            // libfuse's default of 10 workers would cap the concurrency the model sees.
            // Idle workers are kept (the default), so a burst does not pay thread creation.
            fuse_loop_config* loop = fuse_loop_cfg_create();
            fuse_loop_cfg_set_max_threads(loop, cl.threads);
            // Positive: the signal that ended the loop (a clean stop); negative: an error.
            const int loop_rc = fuse_loop_mt(f, loop);
            if (loop_rc < 0) {
                std::fprintf(stderr, "ppios-simfs: FUSE loop failed: %s\n",
                             std::strerror(-loop_rc));
                rc = kExitMountFailed;
            }
            fuse_loop_cfg_destroy(loop);
        }
        fuse_remove_signal_handlers(se);
    }
    fuse_unmount(f);
    fuse_destroy(f);
    close(backing_fd);
    if (!cl.pid_file.empty()) unlink(cl.pid_file.c_str());
    return rc;
}
