// simfs-auto-threshold-readers: PPIOS_THRESHOLD=auto against the emulated device.
//
//   simfs-auto-threshold-readers MOUNTPOINT COORDINATOR_ADDRESS TARGET
//
// Real reader threads read a file on a ppios-simfs mount through the coordinator (PT
// class, so the cap binds them), reporting the bytes of every read at release. For
// optimal streams 2, 4 and 8 (each from a fresh target, cap learned from 1), the learned
// cap must settle within +-1 of the optimum within 5 s and never leave +-1 of where it
// settled; then the device is changed live (8 -> 3) and the cap must follow the same way
// within 10 s.
// Prints the cap trace and the learned curve of each phase. Exit 0 pass, 1 fail, 2 error.
#include "ppios/Coordinator.h"
#include "ppios/CoordinatorAdmin.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kReaders = 12;
constexpr size_t kRequest = 256 * 1024;
constexpr uint64_t kRegion = 32ull << 20;

std::string g_mount, g_address, g_target;

bool set_model(int optimal_streams) {
  const std::string path = g_mount + "/.simfs-model.json";
  const std::string doc = "{\"optimal_streams\": " + std::to_string(optimal_streams) +
                          ", \"peak_mibps\": 160, \"loss_per_stream\": 0.15, \"floor_fraction\": 0.2}";
  int fd = open(path.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) return false;
  bool ok = write(fd, doc.data(), doc.size()) == static_cast<ssize_t>(doc.size());
  return close(fd) == 0 && ok;
}

ppios::CoordinatorOptions options() {
  ppios::CoordinatorOptions o;
  o.address = g_address;
  o.target = g_target;
  o.auto_threshold = true;
  o.lease_ms = 1000;
  return o;
}

// kReaders threads reading distinct regions until stopped.
class Readers {
 public:
  Readers(ppios::Coordinator &coord, const std::string &file) {
    for (int i = 0; i < kReaders; ++i) {
      threads_.emplace_back([this, &coord, file, i] {
        int fd = open(file.c_str(), O_RDONLY);
        if (fd < 0) {
          failed_ = true;
          return;
        }
        std::vector<char> buf(kRequest);
        uint64_t pos = 0;
        while (!stop_.load()) {
          ppios::SlotTicket t = coord.acquire(ppios::IoClass::PT, 1);
          ssize_t n = pread(fd, buf.data(), kRequest, static_cast<off_t>(i * kRegion + pos));
          if (n <= 0) failed_ = true;
          else t.bytes = static_cast<uint64_t>(n);
          bytes_ += t.bytes;
          coord.release(t);
          pos = (pos + kRequest) % kRegion;
        }
        close(fd);
      });
    }
  }
  ~Readers() {
    stop_ = true;
    for (auto &t : threads_) t.join();
  }
  bool failed() const { return failed_.load(); }
  uint64_t bytes() const { return bytes_.load(); }

 private:
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<uint64_t> bytes_{0};
  std::vector<std::thread> threads_;
};

// Samples the stored cap every 50 ms for `seconds`; passes if from some time <= `limit_s`
// on, every sample is within opt +- 1 (and at least 2 s of samples follow it).
// Also prints the readers' MiB/s over the whole phase and from the limit on, against the
// device's peak (what a perfect fixed cap would get).
bool watch(ppios::CoordinatorAdmin &admin, const Readers &readers, int opt, double seconds, double limit_s,
           const char *what) {
  std::vector<std::pair<double, int64_t>> trace;
  const uint64_t bytes0 = readers.bytes();
  uint64_t bytes_at_limit = 0;
  double t_limit = -1;
  auto t0 = Clock::now();
  std::string err;
  for (;;) {
    double t = std::chrono::duration<double>(Clock::now() - t0).count();
    if (t > seconds) break;
    ppios::CoordinatorStatus s;
    if (!admin.status(&s, &err)) {
      fprintf(stderr, "status: %s\n", err.c_str());
      return false;
    }
    trace.emplace_back(t, s.threshold);
    if (t_limit < 0 && t >= limit_s) {
      t_limit = t;
      bytes_at_limit = readers.bytes();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The settled cap is the one held most of the time after the limit; it must be within
  // one of the optimum, and from some time within the limit on every sample (probes
  // included) must be within one of it.
  std::map<int64_t, int> held;
  for (auto &[t, cap] : trace)
    if (t >= limit_s) ++held[cap];
  int64_t settled = -1;
  int most = 0;
  for (auto &[cap, n] : held)
    if (n > most) most = n, settled = cap;
  double settled_at = -1;
  for (size_t i = trace.size(); i-- > 0;) {
    if (std::abs(trace[i].second - settled) > 1) break;
    settled_at = trace[i].first;
  }
  if (std::abs(settled - opt) > 1) settled_at = -1;
  const double phase_s = trace.empty() ? 0 : trace.back().first;
  const uint64_t bytes_end = readers.bytes();
  printf("%s: readers %.1f MiB/s over the phase, %.1f MiB/s after %.0f s (device peak 160)\n", what,
         (bytes_end - bytes0) / phase_s / 1048576.0,
         t_limit < 0 ? 0.0 : (bytes_end - bytes_at_limit) / (phase_s - t_limit) / 1048576.0, limit_s);
  printf("%s: optimum %d, cap trace (s:cap at changes):", what, opt);
  int64_t last = -2;
  for (auto &[t, cap] : trace)
    if (cap != last) printf(" %.2f:%lld", t, static_cast<long long>(last = cap));
  printf("\n");
  ppios::CoordinatorStatus s;
  if (admin.status(&s, &err)) {
    printf("%s: learned curve (k: MiB/s):", what);
    for (auto &[k, mibps] : s.curve) printf(" %d:%.0f", k, mibps);
    printf("; controller pid %d\n", s.controller_pid);
    if (s.curve.empty() || s.controller_pid == 0 || !s.auto_threshold) {
      printf("FAIL %s: status shows no curve or no controller\n", what);
      return false;
    }
  }
  bool ok = settled_at >= 0 && settled_at <= limit_s;
  if (ok)
    printf("ok %s: settled at %lld (optimum %d), within +-1 of it from %.2f s on (limit %.0f s)\n", what,
           static_cast<long long>(settled), opt, settled_at, limit_s);
  else
    printf("FAIL %s: settled at %lld (optimum %d), not within +-1 of it from %.0f s on (from %.2f)\n", what,
           static_cast<long long>(settled), opt, limit_s, settled_at);
  fflush(stdout);
  return ok;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MOUNTPOINT COORDINATOR_ADDRESS TARGET\n", argv[0]);
    return 2;
  }
  g_mount = argv[1];
  g_address = argv[2];
  g_target = argv[3];
  const std::string file = g_mount + "/auto-threshold.dat";
  int fd = open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(kReaders * kRegion)) != 0) {
    fprintf(stderr, "cannot create %s: %s\n", file.c_str(), strerror(errno));
    return 2;
  }
  close(fd);
  std::string err;
  auto admin = ppios::make_coordinator_admin(options(), &err);
  if (!admin) {
    fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  bool ok = true;
  for (int opt : {2, 4, 8}) {
    if (!set_model(opt)) {
      fprintf(stderr, "cannot change the model\n");
      return 2;
    }
    admin->reset(&err);
    auto coord = ppios::make_coordinator(options(), &err);
    if (!coord) {
      fprintf(stderr, "%s\n", err.c_str());
      return 2;
    }
    Readers readers(*coord, file);
    std::string what = "fresh opt " + std::to_string(opt);
    ok &= watch(*admin, readers, opt, opt == 8 ? 9 : 8, 5, what.c_str());
    if (opt == 8) {
      // Live change of the device under the running controller.
      if (!set_model(3)) return 2;
      ok &= watch(*admin, readers, 3, 13, 10, "live change 8 -> 3");
    }
    if (readers.failed()) {
      printf("FAIL: a read failed\n");
      ok = false;
    }
  }
  // Reference for the numbers above: the best fixed cap (the optimum, set by hand).
  for (int opt : {2, 4, 8}) {
    if (!set_model(opt)) return 2;
    admin->reset(&err);
    auto coord = ppios::make_coordinator(options(), &err);
    if (!coord || !admin->set_threshold(opt, &err)) return 2;
    Readers readers(*coord, file);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    uint64_t b0 = readers.bytes();
    auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(3));
    double mibps = (readers.bytes() - b0) / std::chrono::duration<double>(Clock::now() - t0).count() / 1048576.0;
    printf("reference fixed cap %d (the optimum): readers %.1f MiB/s (device peak 160)\n", opt, mibps);
  }
  unlink(file.c_str());
  admin->reset(&err);
  return ok ? 0 : 1;
}
