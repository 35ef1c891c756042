// The offline sweep behind `ppios-coord calibrate`: k = 1..K reader threads, one request
// outstanding each, on distinct regions of a file and then all on the same region, the
// way the I/O stream throttling study (Seelam, Kerstens and Teller; Figs. 2-3) and the
// PPIOS paper (Zhao, Yoshigoe and Xie, 2013) measured their storage. It is the mechanism of
// bench/simfs's ppios-simfs-calibrate (start gate, page-aligned buffers, fixed time per
// point) aimed at any path: it compares with nothing, it finds the knee.
//
// O_DIRECT is used where the file system takes it, so the page cache neither serves
// repeated regions nor reads ahead; otherwise a warning says the numbers may be the
// cache's.
#include "Calibrate.h"

#include "ppios/CoordinatorAdmin.h"
#include "ppios/OutputFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace ppios {

const char *const kCalibrateHelp =
    "usage: ppios-coord calibrate PATH [--max-streams K] [--seconds S] [--request-kib N]\n"
    "                             [--region-mib M] [--mode distinct|same|both] [--png FILE|none]\n"
    "                             [--csv FILE] [--store]\n"
    "\n"
    "Measures the aggregate read bandwidth B(k) of k = 1..K concurrent readers (one request\n"
    "outstanding each) on PATH, first on distinct regions, then all on the same region\n"
    "(the two curves of Seelam, Kerstens and Teller, \"Throttling I/O streams to accelerate\n"
    "file-IO performance\"), prints the table and the knee: the smallest k whose\n"
    "distinct-region bandwidth is within 5% of the best. Reads use O_DIRECT where the file\n"
    "system allows it (else a warning: the page cache may serve them).\n"
    "PATH is a regular file (read only; each reader gets 1/K of it) or a directory (a file of\n"
    "K x M MiB is written there, read, and removed).\n"
    "  --max-streams K   largest k (default 16, at most 256)\n"
    "  --seconds S       measuring time per point (default 1)\n"
    "  --request-kib N   size of each read (default 1024)\n"
    "  --region-mib M    bytes per reader for a directory PATH (default 16)\n"
    "  --mode            distinct, same or both (default both)\n"
    "  --png FILE        draw B(k) (python3-matplotlib); default ppios-calibrate-<target>.png,\n"
    "                    none: no plot\n"
    "  --csv FILE        also write mode,k,mibps,requests to FILE\n"
    "  --store           store the knee as the target's threshold and the distinct-region\n"
    "                    curve as its learned curve (`status` shows it). Processes with\n"
    "                    PPIOS_THRESHOLD unset obey the stored cap; with PPIOS_THRESHOLD=auto\n"
    "                    they start learning from it. Turns learning off until a process\n"
    "                    with PPIOS_THRESHOLD=auto (or `set-threshold auto`) turns it on.\n";

namespace {

using Clock = std::chrono::steady_clock;

struct Point {
  std::string mode;
  int k = 0;
  double mibps = 0;
  uint64_t requests = 0;
};

struct Sweep {
  std::string file;
  bool direct = false;
  uint64_t region = 0;   // bytes each distinct reader cycles over
  size_t request = 0;
  double seconds = 1;
};

bool parse_num(const std::string &s, double lo, double hi, double *out) {
  char *end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (s.empty() || *end || !(v >= lo) || !(v <= hi)) return false;
  *out = v;
  return true;
}

// One point: k readers for sweep.seconds. False (with a message) if a read fails.
bool measure(const Sweep &sw, bool same, int k, Point *p) {
  std::vector<int> fds;
  for (int i = 0; i < k; ++i) {
    int fd = open(sw.file.c_str(), O_RDONLY | O_CLOEXEC | (sw.direct ? O_DIRECT : 0));
    if (fd < 0) {
      fprintf(stderr, "ppios-coord: calibrate: open %s: %s\n", sw.file.c_str(), strerror(errno));
      for (int f : fds) close(f);
      return false;
    }
    fds.push_back(fd);
  }
  std::atomic<bool> stop{false}, failed{false};
  std::vector<uint64_t> bytes(k, 0), requests(k, 0);
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool open_gate = false;
  std::vector<std::thread> readers;
  const uint64_t span = sw.region - sw.region % sw.request;
  for (int i = 0; i < k; ++i) {
    readers.emplace_back([&, i] {
      std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char *>(std::aligned_alloc(4096, sw.request)),
                                                      &std::free);
      const uint64_t base = same ? 0 : uint64_t(i) * sw.region;
      // Readers of the same region start at the same place, like Fig. 3's clients.
      uint64_t pos = 0;
      {
        std::unique_lock<std::mutex> lock(gate_mu);
        gate_cv.wait(lock, [&] { return open_gate; });
      }
      while (!stop.load(std::memory_order_relaxed)) {
        ssize_t n = pread(fds[i], buf.get(), sw.request, static_cast<off_t>(base + pos));
        if (n <= 0) {
          failed = true;
          break;
        }
        bytes[i] += uint64_t(n);
        requests[i] += 1;
        pos = (pos + sw.request) % span;
      }
    });
  }
  auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> lock(gate_mu);
    open_gate = true;
  }
  gate_cv.notify_all();
  std::this_thread::sleep_for(std::chrono::duration<double>(sw.seconds));
  stop = true;
  for (auto &t : readers) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int fd : fds) close(fd);
  if (failed) {
    fprintf(stderr, "ppios-coord: calibrate: a read of %s failed or hit its end\n", sw.file.c_str());
    return false;
  }
  uint64_t total = 0;
  p->requests = 0;
  for (int i = 0; i < k; ++i) total += bytes[i], p->requests += requests[i];
  p->mode = same ? "same" : "distinct";
  p->k = k;
  p->mibps = total / elapsed / (1024.0 * 1024.0);
  return true;
}

// True when the file system takes O_DIRECT reads of this size at 4 KiB alignment.
bool direct_works(const std::string &file, size_t request) {
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd < 0) return false;
  std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char *>(std::aligned_alloc(4096, request)), &std::free);
  bool ok = pread(fd, buf.get(), request, 0) > 0;
  close(fd);
  return ok;
}

bool write_data_file(const std::string &file, uint64_t size) {
  int fd = open(file.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  std::vector<char> chunk(1 << 20);
  for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>(i * 2654435761u >> 13);
  bool ok = true;
  for (uint64_t done = 0; ok && done < size; done += chunk.size())
    ok = write(fd, chunk.data(), chunk.size()) == static_cast<ssize_t>(chunk.size());
  ok = ok && fsync(fd) == 0;
  close(fd);
  return ok;
}

// Draws the table with python3-matplotlib; false (with a message) if it cannot.
bool draw_png(const std::vector<Point> &points, int knee, const std::string &title, const std::string &png) {
  std::string data;
  for (const Point &p : points) data += p.mode + " " + std::to_string(p.k) + " " + std::to_string(p.mibps) + "\n";
  const char *script =
      "import sys\n"
      "import matplotlib\n"
      "matplotlib.use('Agg')\n"
      "import matplotlib.pyplot as plt\n"
      "title, knee = sys.argv[2], int(sys.argv[3])\n"
      "curves = {}\n"
      "for line in sys.stdin:\n"
      "    mode, k, v = line.split()\n"
      "    curves.setdefault(mode, []).append((int(k), float(v)))\n"
      "fig, ax = plt.subplots(figsize=(6, 4))\n"
      "for mode, pts in curves.items():\n"
      "    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker='o', label=mode + ' regions')\n"
      "ax.axvline(knee, color='gray', linestyle='--', label='knee k=%d' % knee)\n"
      "ax.set_xlabel('concurrent readers k')\n"
      "ax.set_ylabel('aggregate bandwidth B(k), MiB/s')\n"
      "ax.set_title(title)\n"
      "ax.set_ylim(bottom=0)\n"
      "ax.legend()\n"
      "fig.tight_layout()\n"
      "with open(3, 'wb', closefd=False) as out:\n"
      "    fig.savefig(out, dpi=100, format='png')\n";
  // Opened here with the safe opener and handed to python as descriptor 3: matplotlib
  // would follow a symlink planted at the path (the default name is in the current
  // directory).
  std::string problem;
  int out = open_output_file(png, /*truncate=*/true, &problem);
  if (out >= 0 && out < 3) {  // stdin, stdout or stderr were closed: keep clear of them
    int moved = fcntl(out, F_DUPFD_CLOEXEC, 4);
    close(out);
    out = moved;
    if (out < 0) problem = png + ": " + strerror(errno);
  }
  if (out < 0) {
    fprintf(stderr, "ppios-coord: calibrate: warning: no plot (cannot write %s)\n", problem.c_str());
    return false;
  }
  int in[2];
  if (pipe(in) != 0) {
    close(out);
    return false;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(out);
    return false;
  }
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[0]);
    close(in[1]);
    // The copy dup2 makes has no FD_CLOEXEC; descriptor 3 itself keeps it unless cleared.
    if (out == 3 ? fcntl(3, F_SETFD, 0) != 0 : dup2(out, 3) != 3) _exit(127);
    std::string knee_arg = std::to_string(knee);
    // Debian's python3 (where python3-matplotlib lives) before whatever PATH offers.
    execl("/usr/bin/python3", "python3", "-c", script, png.c_str(), title.c_str(), knee_arg.c_str(), (char *)nullptr);
    execlp("python3", "python3", "-c", script, png.c_str(), title.c_str(), knee_arg.c_str(), (char *)nullptr);
    _exit(127);
  }
  close(in[0]);
  close(out);
  bool wrote = write(in[1], data.data(), data.size()) == static_cast<ssize_t>(data.size());
  close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!wrote || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "ppios-coord: calibrate: warning: no plot (python3 with matplotlib failed; "
                    "install python3-matplotlib)\n");
    return false;
  }
  return true;
}

}  // namespace

int run_calibrate(const CoordinatorOptions &options, const std::vector<std::string> &args) {
  auto usage = [](const std::string &msg) {
    fprintf(stderr, "ppios-coord: calibrate: %s\n(run `ppios-coord calibrate --help` for usage)\n", msg.c_str());
    return 2;
  };
  std::string path, png = "ppios-calibrate-" + options.target + ".png", csv;
  double max_streams = 16, seconds = 1, request_kib = 1024, region_mib = 16;
  bool distinct = true, same = true, store = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    const std::string *v = i + 1 < args.size() ? &args[i + 1] : nullptr;
    auto number = [&](double lo, double hi, double *out) {
      if (!v || !parse_num(*v, lo, hi, out)) return false;
      ++i;
      return true;
    };
    if (a == "--max-streams") {
      if (!number(1, 256, &max_streams) || max_streams != static_cast<int>(max_streams))
        return usage("--max-streams needs a whole number from 1 to 256");
    } else if (a == "--seconds") {
      if (!number(0.05, 3600, &seconds)) return usage("--seconds needs a number from 0.05 to 3600");
    } else if (a == "--request-kib") {
      if (!number(4, 65536, &request_kib) || static_cast<int>(request_kib) % 4 != 0)
        return usage("--request-kib needs a multiple of 4 from 4 to 65536");
    } else if (a == "--region-mib") {
      if (!number(1, 65536, &region_mib)) return usage("--region-mib needs a number from 1 to 65536");
    } else if (a == "--mode") {
      if (!v || (*v != "distinct" && *v != "same" && *v != "both")) return usage("--mode is distinct, same or both");
      distinct = *v != "same";
      same = *v != "distinct";
      ++i;
    } else if (a == "--png") {
      if (!v) return usage("--png needs a file name or none");
      png = *v == "none" ? "" : *v;
      ++i;
    } else if (a == "--csv") {
      if (!v) return usage("--csv needs a file name");
      csv = *v;
      ++i;
    } else if (a == "--store") {
      store = true;
    } else if (path.empty() && !a.empty() && a[0] != '-') {
      path = a;
    } else {
      return usage("unexpected argument '" + a + "'");
    }
  }
  if (path.empty()) return usage("needs a PATH (a file to read or a directory to write a test file in)");
  const int K = static_cast<int>(max_streams);
  Sweep sw;
  sw.seconds = seconds;
  sw.request = static_cast<size_t>(request_kib) * 1024;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    fprintf(stderr, "ppios-coord: calibrate: %s: %s\n", path.c_str(), strerror(errno));
    return 1;
  }
  std::string created;
  if (S_ISDIR(st.st_mode)) {
    sw.region = static_cast<uint64_t>(region_mib * 1048576) / sw.request * sw.request;
    if (sw.region < sw.request) sw.region = sw.request;
    created = path + "/ppios-calibrate." + std::to_string(getpid()) + ".dat";
    printf("# writing %s (%llu MiB)\n", created.c_str(), static_cast<unsigned long long>(sw.region * K >> 20));
    fflush(stdout);
    if (!write_data_file(created, sw.region * K)) {
      fprintf(stderr, "ppios-coord: calibrate: cannot write %s: %s\n", created.c_str(), strerror(errno));
      unlink(created.c_str());
      return 1;
    }
    sw.file = created;
  } else if (S_ISREG(st.st_mode)) {
    sw.file = path;
    sw.region = static_cast<uint64_t>(st.st_size) / K / sw.request * sw.request;
    if (sw.region < sw.request) {
      fprintf(stderr, "ppios-coord: calibrate: %s is too small: %d readers need %d x %g KiB at least\n",
              path.c_str(), K, K, request_kib);
      return 1;
    }
  } else {
    fprintf(stderr, "ppios-coord: calibrate: %s is neither a regular file nor a directory\n", path.c_str());
    return 1;
  }
  sw.direct = direct_works(sw.file, sw.request);
  if (!sw.direct)
    fprintf(stderr, "ppios-coord: calibrate: warning: %s does not take O_DIRECT reads; using the page cache, "
                    "which may serve repeated reads (drop it first: echo 3 > /proc/sys/vm/drop_caches)\n",
            sw.file.c_str());
  printf("# %s: k = 1..%d readers, %zu KiB requests, %.2f s per point, %s\n", sw.file.c_str(), K, sw.request >> 10,
         sw.seconds, sw.direct ? "O_DIRECT" : "buffered");
  printf("%-9s %4s %12s %10s\n", "mode", "k", "MiB/s", "requests");
  fflush(stdout);
  std::vector<Point> points;
  bool ok = true;
  for (bool same_region : {false, true}) {
    if ((same_region && !same) || (!same_region && !distinct)) continue;
    for (int k = 1; ok && k <= K; ++k) {
      Point p;
      ok = measure(sw, same_region, k, &p);
      if (!ok) break;
      printf("%-9s %4d %12.1f %10llu\n", p.mode.c_str(), p.k, p.mibps, static_cast<unsigned long long>(p.requests));
      fflush(stdout);
      points.push_back(p);
    }
  }
  if (!created.empty()) unlink(created.c_str());
  if (!ok) return 1;
  // The knee: fewest streams within 5% of the best distinct-region (else same-region) bandwidth.
  const std::string knee_mode = distinct ? "distinct" : "same";
  double best = 0;
  for (const Point &p : points)
    if (p.mode == knee_mode) best = std::max(best, p.mibps);
  int knee = 1;
  for (const Point &p : points)
    if (p.mode == knee_mode && p.mibps >= 0.95 * best) {
      knee = p.k;
      break;
    }
  printf("knee %d (%s regions, %.1f MiB/s best)\n", knee, knee_mode.c_str(), best);
  if (!csv.empty()) {
    // The safe opener: a symlink, FIFO or another user's file planted at the path (or a
    // symlinked directory on the way) is refused, not written through.
    std::string problem;
    int fd = open_output_file(csv, /*truncate=*/true, &problem);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : nullptr;
    if (!f) {
      if (fd >= 0) close(fd);
      fprintf(stderr, "ppios-coord: calibrate: cannot write %s\n", problem.empty() ? csv.c_str() : problem.c_str());
      return 1;
    }
    fprintf(f, "mode,k,mibps,requests\n");
    for (const Point &p : points)
      fprintf(f, "%s,%d,%.3f,%llu\n", p.mode.c_str(), p.k, p.mibps, static_cast<unsigned long long>(p.requests));
    fclose(f);
  }
  if (!png.empty() && draw_png(points, knee, "B(k) of " + path, png)) printf("plot %s\n", png.c_str());
  if (store) {
    std::string err;
    auto admin = make_coordinator_admin(options, &err);
    std::vector<std::pair<int, double>> curve;
    for (const Point &p : points)
      if (p.mode == knee_mode) curve.emplace_back(p.k, p.mibps);
    if (!admin || !admin->set_threshold(knee, &err) || !admin->store_curve(curve, &err)) {
      fprintf(stderr, "ppios-coord: calibrate: --store: %s\n", err.c_str());
      return 1;
    }
    printf("stored threshold %d for target %s\n", knee, options.target.c_str());
  }
  return 0;
}

}  // namespace ppios
