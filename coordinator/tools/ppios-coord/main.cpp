// ppios-coord: inspect and administer the PPIOS coordinator, and measure it.
//
//   ppios-coord [--coordinator ADDR] [--target NAME] COMMAND [options]
//
// The backend defaults come from PPIOS_COORDINATOR and PPIOS_TARGET, like a ppios program.
#include "Calibrate.h"
#include "ppios/Coordinator.h"
#include "ppios/CoordinatorAdmin.h"
#include "ppios/NodeSecret.h"
#include "ppios_version.h"

#include <algorithm>
#include <atomic>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using ppios::CoordinatorOptions;
using ppios::CoordinatorStatus;

const char *const kGlobalHelp =
    "usage: ppios-coord [--coordinator ADDR] [--target NAME] COMMAND [options]\n"
    "\n"
    "Inspects and administers the system-wide I/O slot coordinator of PPIOS.\n"
    "\n"
    "commands:\n"
    "  status          threshold, MT/PT accesses in flight, queued requests, holders\n"
    "  watch           status, refreshed until interrupted\n"
    "  set-threshold   change the stored cap of the target, live\n"
    "  reset           forget everything stored for the target (refused while processes use it)\n"
    "  gc              remove the node-local segments no process uses\n"
    "  share-group     (root) make the target's node-local cap cover every member of a group\n"
    "  bench           acquire+release latency and throughput with K concurrent clients\n"
    "  calibrate       measure B(k) of k concurrent readers on a path, find the knee, --store it\n"
    "\n"
    "options (before or after the command):\n"
    "  --coordinator ADDR  shm | redis://[[user]:password@]host[:port][/db] | unix:///path.sock[?db=N&password=P]\n"
    "                      (node+redis://... or node+unix://...: per-node shares of the cap)\n"
    "                      (default: $PPIOS_COORDINATOR, else shm)\n"
    "  --target NAME       storage target the threshold belongs to (default: $PPIOS_TARGET, else default)\n"
    "The other PPIOS_* variables a program reads (PPIOS_THRESHOLD, PPIOS_LEASE_MS, PPIOS_MT_THROTTLE,\n"
    "PPIOS_SHM_GROUP, PPIOS_SIM_NODE) are read and checked the same way.\n"
    "  --help              this text; `ppios-coord COMMAND --help` describes a command\n"
    "  --version           ppios's version and the git id of its source\n";

const char *const kStatusHelp =
    "usage: ppios-coord status [--json]\n"
    "\n"
    "Prints one consistent snapshot of the target: threshold (none = no cap), MT and PT\n"
    "accesses in flight, queued MT and PT requests, live processes, the highest number of\n"
    "accesses ever in flight together, every slot holder (host, pid, class, lead), and for\n"
    "PPIOS_THRESHOLD=auto whether the cap is learned, by which process, and the curve\n"
    "learned (k -> MiB/s; or measured by `calibrate --store`).\n"
    "  --json   one JSON object: threshold (null = none), mt_inflight, pt_inflight, queued,\n"
    "           queued_mt, queued_pt, processes, max_inflight_seen, backend, target,\n"
    "           holders [{host, pid, class, lead, yield_requested}], auto (bool), mt_hold\n"
    "           (bool: the auto controller holds MTs at the cap),\n"
    "           controller ({host, pid} or null), nodes [{node, share, need, mt_need, pt_inflight,\n"
    "           lease_left_ms}] (two-level backend), curve [{k, mibps}], scope (which jobs the\n"
    "           cap covers: user, group or site), segment_names and segment_names_why (scope\n"
    "           user: \"keyed\" with ~/.ppios/node-secret, or \"predictable\" and why),\n"
    "           repairs (what status repaired first),\n"
    "           guarantee (what the cap\n"
    "           promises), over_cap (MT accesses in flight beyond the cap now)\n"
    "Exits 1 with a message when the backend cannot be reached.\n";

const char *const kShareGroupHelp =
    "usage: ppios-coord share-group GROUP [--threshold N]\n"
    "\n"
    "For an administrator (root): makes the node-local segment of the target shared with\n"
    "GROUP (a name or gid): owner root, group GROUP, mode 0660, kept until `reset`. The jobs\n"
    "of every member of GROUP on this node that set PPIOS_SHM_GROUP=GROUP then share one\n"
    "cap (by default each user's jobs have a cap of their own). Run it on every node (at\n"
    "boot); a cap across nodes too needs a Redis server (PPIOS_COORDINATOR=redis://...).\n"
    "A file already at the name that is not such a segment (another group, access for\n"
    "others, not a regular file) is refused with why.\n"
    "  --threshold N  also stores N (1..1048576) as the cap\n";

const char *const kWatchHelp =
    "usage: ppios-coord watch [--interval SECONDS] [--count N]\n"
    "\n"
    "Redraws `status` every SECONDS (default 1) until interrupted, or N times.\n";

const char *const kSetThresholdHelp =
    "usage: ppios-coord set-threshold N|none|auto [--curve K:MIBPS,...]\n"
    "\n"
    "Stores N (>= 1) as the cap of concurrent accesses for the target; running processes\n"
    "obey it from their next request, and waiters are re-examined at once. `none` removes\n"
    "the cap (processes then schedule only within themselves). Both stop the learning of\n"
    "PPIOS_THRESHOLD=auto; `auto` turns it back on (a running process started with\n"
    "PPIOS_THRESHOLD=auto learns the cap, starting from the stored curve's best cap, else\n"
    "the stored cap, 1 if none).\n"
    "  --curve K:MIBPS,...  also replaces the stored curve B(k) (K 1..256, MiB/s > 0), as a\n"
    "                       target keeps what it learned: e.g. one an earlier `status --json`\n"
    "                       showed (bench/run carries it from one auto run to the next)\n";

const char *const kResetHelp =
    "usage: ppios-coord reset [--force]\n"
    "\n"
    "Forgets everything stored for the target: threshold, holders, queues, processes\n"
    "(shm: removes the shared-memory segment). Refused while processes are registered on the\n"
    "target: they would go on with the old state and later jobs with a new one, two caps.\n"
    "A file another user planted under the target's predictable name (its name without the\n"
    "hash keyed with ~/.ppios/node-secret) is said in one line and left alone.\n"
    "  --force  reset anyway\n";

const char *const kGcHelp =
    "usage: ppios-coord gc [--pinned]\n"
    "\n"
    "Removes the node-local segments (/dev/shm/ppios-coord*, of every ppios version) that no\n"
    "process maps and that you may remove (yours; every one as root), and lists them. A\n"
    "segment holding a threshold set with ppios-coord is kept unless --pinned. A file another\n"
    "user planted under one of your names (/dev/shm/ppios-coord-v*.<uid>.*, or the change\n"
    "table's ppios-generations-v*.<uid>) is listed as kept, with what it costs your jobs;\n"
    "root's gc removes such files.\n";

const char *const kBenchHelp =
    "usage: ppios-coord bench [--clients K | --nodes N --clients-per-node K] [--seconds S]\n"
    "                         [--class pt|mt|mix|cross] [--hold-us U] [--threshold N|none] [--json]\n"
    "\n"
    "Runs K client threads (default 1) that acquire and release slots back to back for S\n"
    "seconds (default 2) against the configured backend and target, then prints the\n"
    "acquire+release pair latency (p50, p99, microseconds), pairs per second and the highest\n"
    "number of slots the clients held at once. The threshold (default $PPIOS_THRESHOLD, else\n"
    "16) is stored only if the target has none. --class pt (default) measures PT requests,\n"
    "which the cap always binds; mt uses MT requests; mix alternates (the MT acquire wait p99 is\n"
    "printed); cross (with --nodes) runs MTs on node 0 (each pausing 5 ms between accesses, so\n"
    "the node's share drifts away) and PTs on the others: the MT wait is the wait for slots that\n"
    "PTs of other nodes hold (set PPIOS_MT_THROTTLE=1: the bench's --threshold is not a\n"
    "program's PPIOS_THRESHOLD, so MTs would never wait for a slot while no PT of their own\n"
    "node holds one). --hold-us U holds each slot U microseconds (a PT gives it back early when asked to\n"
    "yield), so the cap binds. --nodes N --clients-per-node K (two-level backend only,\n"
    "--coordinator node+...) runs N simulated nodes (PPIOS_SIM_NODE bench-0..N-1) with K clients\n"
    "each in this process, all against one server; the clients' in-flight count is one atomic\n"
    "over every node; the first 0.5 s are a warm-up (the agents connect and take their shares)\n"
    "that no figure counts but the cap check. With a redis server its load is printed: requests (script calls, BLPOP,\n"
    "connection set-up) per second, and every command it ran including inside scripts.\n"
    "  --json   one JSON object: clients, nodes, class, hold_us, pairs, p50_us, p99_us, mt_wait_p50_us,\n"
    "           mt_wait_p99_us, pairs_per_s, server_requests_per_s and server_commands_per_s (-1: shm),\n"
    "           client_pairs_min (the fewest pairs of one client), max_us (the longest pair),\n"
    "           max_inflight_seen,\n"
    "           coordinator_max_inflight_seen, threshold, cap_exceeded, backend, target,\n"
    "           node_pairs (--nodes: the pairs of each node; [] without)\n"
    "max_inflight_seen counts what the clients held between acquire and release (no hold time,\n"
    "so it rarely reaches the cap); coordinator_max_inflight_seen is the coordinator's own\n"
    "highest count over the life of the target: run bench on a target of its own.\n"
    "Exits 1 with a message when the backend cannot be reached (before or after the run): a\n"
    "redis backend is never measured through its node-local fallback.\n";

int usage_error(const std::string &msg) {
  fprintf(stderr, "ppios-coord: %s\n(run `ppios-coord --help` for usage)\n", msg.c_str());
  return 2;
}

// Whole-number flags and arguments follow the rule of the PPIOS_* variables (digits only:
// no sign, space or leading zero), so `set-threshold ' 5'` is refused as `'5 '` is.
bool parse_i64(const std::string &s, int64_t lo, int64_t hi, int64_t *out) {
  return ppios::parse_setting_number(s.c_str(), lo, hi, out);
}

// A number above 0 and at most `max`.
bool parse_positive(const std::string &s, double max, double *out) {
  char *end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (s.empty() || *end || !(v > 0) || v > max) return false;
  *out = v;
  return true;
}

bool parse_seconds(const std::string &s, double *out) { return parse_positive(s, 86400, out); }

// "K:MIBPS,K:MIBPS,...": K from 1 to 256 (the k a learned curve keeps), MIBPS > 0.
bool parse_curve(const std::string &s, std::vector<std::pair<int, double>> *out) {
  out->clear();
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, comma - pos);
    const size_t colon = item.find(':');
    int64_t k;
    double mibps;
    if (colon == std::string::npos || !parse_i64(item.substr(0, colon), 1, 256, &k) ||
        !parse_positive(item.substr(colon + 1), 1e9, &mibps))
      return false;
    out->emplace_back(static_cast<int>(k), mibps);
    pos = comma + 1;
  }
  return !out->empty();
}

std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += c;
  }
  return out + "\"";
}

// What the cap promises, as docs/coordinator.md states it: MT accesses are only held at the cap by
// processes with PPIOS_MT_THROTTLE=1 (the default of a numeric PPIOS_THRESHOLD).
const char *const kGuarantee =
    "a PT access starts only while fewer than threshold accesses are in flight; an MT access "
    "waits at the cap for PTs to yield, and for MTs too if its process has PPIOS_MT_THROTTLE=1 "
    "(the default with a numeric PPIOS_THRESHOLD) or the auto controller holds MTs (the default "
    "otherwise, once it measured the cap), so MTs of other processes may exceed the cap";

// Which jobs the cap covers, in words (status).
std::string scope_text(const CoordinatorStatus &s) {
  if (s.scope == "site") return "site: every job on this target of the server, of every user and node";
  if (s.scope == "group") return "group: the jobs on this node of the members of PPIOS_SHM_GROUP";
  return "user: only uid " + std::to_string(geteuid()) +
         "'s jobs on this node; a cap across users needs the site's coordinator (PPIOS_COORDINATOR=redis://..., "
         "or a group segment an administrator makes: ppios-coord share-group GROUP)";
}

// How the user's private segments are named (status of a "user" scope): keyed with the
// node secret, or predictable (any local user can take the name first), and why.
std::string names_text() {
  const ppios::NodeSecret &secret = ppios::node_secret();
  if (secret.usable) return "keyed with " + secret.path + " (other users cannot take the name first)";
  return "predictable: " + ppios::predictable_name_note(secret);
}

uint64_t over_cap(const CoordinatorStatus &s) {
  uint64_t inflight = uint64_t{s.mt_inflight} + s.pt_inflight;
  return s.threshold < 0 || inflight <= static_cast<uint64_t>(s.threshold) ? 0 : inflight - s.threshold;
}

std::string status_json(const CoordinatorStatus &s) {
  std::string out = "{\"backend\":" + json_string(s.backend) + ",\"target\":" + json_string(s.target) +
                    ",\"scope\":" + json_string(s.scope) +
                    (s.scope != "user" ? std::string()
                                       : ",\"segment_names\":" + json_string(ppios::node_secret().usable ? "keyed" : "predictable") +
                                             ",\"segment_names_why\":" + json_string(ppios::node_secret().why)) +
                    ",\"threshold\":" + (s.threshold < 0 ? std::string("null") : std::to_string(s.threshold)) +
                    ",\"mt_inflight\":" + std::to_string(s.mt_inflight) +
                    ",\"pt_inflight\":" + std::to_string(s.pt_inflight) +
                    ",\"queued\":" + std::to_string(s.queued_mt + s.queued_pt) +
                    ",\"queued_mt\":" + std::to_string(s.queued_mt) + ",\"queued_pt\":" + std::to_string(s.queued_pt) +
                    ",\"processes\":" + std::to_string(s.processes) +
                    ",\"max_inflight_seen\":" + std::to_string(s.max_inflight_seen) + ",\"holders\":[";
  for (size_t i = 0; i < s.holders.size(); ++i) {
    const auto &h = s.holders[i];
    out += (i ? "," : "") + std::string("{\"host\":") + json_string(h.host) + ",\"pid\":" + std::to_string(h.pid) +
           ",\"class\":\"" + (h.cls == ppios::IoClass::MT ? "MT" : "PT") + "\",\"lead\":" + std::to_string(h.lead) +
           ",\"yield_requested\":" + (h.yield_requested ? "true" : "false") + "}";
  }
  out += "],\"auto\":" + std::string(s.auto_threshold ? "true" : "false") +
         ",\"mt_hold\":" + (s.mt_hold ? "true" : "false") + ",\"controller\":";
  out += s.controller_pid == 0 ? std::string("null")
                               : "{\"host\":" + json_string(s.controller_host) + ",\"pid\":" + std::to_string(s.controller_pid) + "}";
  out += ",\"nodes\":[";
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const auto &n = s.nodes[i];
    out += (i ? "," : "") + std::string("{\"node\":") + json_string(n.node) + ",\"share\":" + std::to_string(n.share) +
           ",\"need\":" + std::to_string(n.need) + ",\"mt_need\":" + std::to_string(n.mt_need) +
           ",\"pt_inflight\":" + std::to_string(n.pt_inflight) + ",\"lease_left_ms\":" + std::to_string(n.lease_left_ms) +
           "}";
  }
  out += "],\"curve\":[";
  for (size_t i = 0; i < s.curve.size(); ++i) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s{\"k\":%d,\"mibps\":%.1f}", i ? "," : "", s.curve[i].first, s.curve[i].second);
    out += buf;
  }
  out += "],\"repairs\":[";
  for (size_t i = 0; i < s.repairs.size(); ++i) out += (i ? "," : "") + json_string(s.repairs[i]);
  return out + "],\"guarantee\":" + json_string(s.threshold < 0 ? "no cap" : kGuarantee) +
         ",\"over_cap\":" + std::to_string(over_cap(s)) + "}";
}

void print_status_text(const CoordinatorStatus &s) {
  printf("target %s (%s)\n", s.target.c_str(), s.backend.c_str());
  for (const auto &line : s.repairs) printf("repaired   %s\n", line.c_str());
  printf("scope      %s\n", scope_text(s).c_str());
  if (s.scope == "user") printf("names      %s\n", names_text().c_str());
  if (s.threshold < 0) printf("threshold  none (no cap)%s\n", s.auto_threshold ? ", learned (auto)" : "");
  else printf("threshold  %lld%s\n", static_cast<long long>(s.threshold), s.auto_threshold ? ", learned (auto)" : "");
  if (s.auto_threshold)
    printf("controller %s\n", s.controller_pid ? (s.controller_host + " pid " + std::to_string(s.controller_pid)).c_str()
                                               : "none (no process with PPIOS_THRESHOLD=auto holds the lease)");
  if (s.auto_threshold)
    printf("MTs        %s\n", s.mt_hold ? "wait at the learned cap (unless PPIOS_MT_THROTTLE=0)"
                                        : "pass a full cap (a slow start: the cap climbs from below), unless PPIOS_MT_THROTTLE=1");
  printf("in flight  %u MT, %u PT", s.mt_inflight, s.pt_inflight);
  if (uint64_t over = over_cap(s)) printf(" (%llu over the cap: MTs)", static_cast<unsigned long long>(over));
  printf("\n");
  if (s.threshold >= 0) printf("guarantee  %s\n", kGuarantee);
  printf("queued     %u MT, %u PT\n", s.queued_mt, s.queued_pt);
  printf("processes  %u\n", s.processes);
  printf("max seen   %llu in flight at once\n", static_cast<unsigned long long>(s.max_inflight_seen));
  if (!s.holders.empty()) printf("%-24s %8s %5s %8s %s\n", "host", "pid", "class", "lead", "");
  for (const auto &h : s.holders)
    printf("%-24s %8d %5s %8llu %s\n", h.host.c_str(), h.pid, h.cls == ppios::IoClass::MT ? "MT" : "PT",
           static_cast<unsigned long long>(h.lead), h.yield_requested ? "yield requested" : "");
  if (!s.nodes.empty()) {
    int64_t sum = 0;
    for (const auto &n : s.nodes) sum += n.share;
    printf("nodes      %zu holding %lld slot(s) of the cap\n", s.nodes.size(), static_cast<long long>(sum));
    printf("  %-32s %6s %6s %6s %6s %9s\n", "node", "share", "need", "MTs", "PTs", "lease ms");
    for (const auto &n : s.nodes)
      printf("  %-32s %6lld %6lld %6lld %6lld %9lld\n", n.node.c_str(), static_cast<long long>(n.share),
             static_cast<long long>(n.need), static_cast<long long>(n.mt_need), static_cast<long long>(n.pt_inflight),
             static_cast<long long>(n.lease_left_ms));
  }
  if (!s.curve.empty()) {
    printf("curve      k -> MiB/s\n");
    for (const auto &[k, mibps] : s.curve)
      printf("  %4d %9.1f%s\n", k, mibps, k == s.threshold ? "  <- cap" : "");
  }
}

struct Args {
  CoordinatorOptions options;
  std::string command;
  std::vector<std::string> rest;  // command arguments, global flags removed
  bool help = false;
};

int run_status(ppios::CoordinatorAdmin &admin, bool json) {
  CoordinatorStatus s;
  std::string err;
  if (!admin.status(&s, &err)) return fprintf(stderr, "ppios-coord: status: %s\n", err.c_str()), 1;
  if (json) printf("%s\n", status_json(s).c_str());
  else print_status_text(s);
  return 0;
}

int run_bench(const CoordinatorOptions &base, const std::vector<std::string> &rest) {
  int64_t clients = 1, nodes = 0, per_node = 1, hold_us = 0;
  double seconds = 2;
  std::string cls = "pt";
  bool json = false;
  CoordinatorOptions options = base;
  if (options.threshold < 0) options.threshold = 16;
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string &a = rest[i];
    auto value = [&](const char *flag) -> const std::string * {
      if (i + 1 >= rest.size()) return nullptr;
      (void)flag;
      return &rest[++i];
    };
    if (a == "--json") json = true;
    else if (a == "--clients") {
      const std::string *v = value("--clients");
      if (!v || !parse_i64(*v, 1, 4096, &clients)) return usage_error("bench: --clients needs a number from 1 to 4096");
    } else if (a == "--nodes") {
      const std::string *v = value("--nodes");
      if (!v || !parse_i64(*v, 1, 256, &nodes)) return usage_error("bench: --nodes needs a number from 1 to 256");
    } else if (a == "--clients-per-node") {
      const std::string *v = value("--clients-per-node");
      if (!v || !parse_i64(*v, 1, 256, &per_node))
        return usage_error("bench: --clients-per-node needs a number from 1 to 256");
    } else if (a == "--hold-us") {
      const std::string *v = value("--hold-us");
      if (!v || !parse_i64(*v, 0, 1000000, &hold_us)) return usage_error("bench: --hold-us needs a number from 0 to 1000000");
    } else if (a == "--seconds") {
      const std::string *v = value("--seconds");
      if (!v || !parse_seconds(*v, &seconds)) return usage_error("bench: --seconds needs a positive number");
    } else if (a == "--class") {
      const std::string *v = value("--class");
      if (!v || (*v != "pt" && *v != "mt" && *v != "mix" && *v != "cross"))
        return usage_error("bench: --class must be pt, mt, mix or cross");
      cls = *v;
    } else if (a == "--threshold") {
      const std::string *v = value("--threshold");
      if (v && *v == "none") options.threshold = -1;
      else if (!v || !parse_i64(*v, 1, ppios::kMaxThreshold, &options.threshold))
        return usage_error("bench: --threshold needs a number >= 1 or none");
    } else {
      return usage_error("bench: unknown argument '" + a + "'");
    }
  }
  if (nodes > 0 && options.address.rfind("node+", 0) != 0)
    return usage_error("bench: --nodes needs a two-level address (--coordinator node+redis://... or node+unix://...)");
  if (cls == "cross" && nodes < 2) return usage_error("bench: --class cross needs --nodes 2 or more");
  if (nodes > 0) clients = nodes * per_node;
  std::string err;
  // A redis backend that cannot be reached would be measured through its node-local
  // fallback and reported as redis: refuse instead.
  if (!ppios::make_coordinator_admin(options, &err))
    return fprintf(stderr, "ppios-coord: bench: %s\n", err.c_str()), 1;
  int64_t all_before = 0, all_after = 0;
  // --nodes: one coordinator per simulated node (PPIOS_SIM_NODE bench-<i>), each with its
  // own node-local segment and agent, all against the same server.
  std::vector<std::unique_ptr<ppios::Coordinator>> coords;
  for (int64_t n = 0; n < std::max<int64_t>(nodes, 1); ++n) {
    CoordinatorOptions o = options;
    if (nodes > 0) o.sim_node = "bench-" + std::to_string(n);
    coords.push_back(ppios::make_coordinator(o, &err));
    if (!coords.back()) return fprintf(stderr, "ppios-coord: bench: %s\n", err.c_str()), 1;
  }
  std::atomic<int64_t> inflight{0}, max_seen{0};
  std::atomic<bool> stop{false}, counting{nodes == 0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients)), mt_waits(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      ppios::Coordinator &coord = *coords[static_cast<size_t>(nodes > 0 ? c / per_node : 0)];
      auto &lat = latencies[static_cast<size_t>(c)];
      auto &mtw = mt_waits[static_cast<size_t>(c)];
      lat.reserve(1 << 16);
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        // cross: node 0 runs only MTs, every other node only PTs, so an MT waits only
        // behind PTs of other nodes.
        ppios::IoClass k = cls == "mt"    ? ppios::IoClass::MT
                           : cls == "pt"  ? ppios::IoClass::PT
                           : cls == "cross" ? (c < per_node ? ppios::IoClass::MT : ppios::IoClass::PT)
                                          : ((n + c) % 2 ? ppios::IoClass::MT : ppios::IoClass::PT);
        const bool counted = counting.load(std::memory_order_relaxed);  // pairs that start after the warm-up
        auto t0 = std::chrono::steady_clock::now();
        ppios::SlotTicket t = coord.acquire(k, k == ppios::IoClass::PT ? 1 + (n % 7) : 0);
        auto granted = std::chrono::steady_clock::now();
        if (k == ppios::IoClass::MT && counted) mtw.push_back(std::chrono::duration<double, std::micro>(granted - t0).count());
        int64_t now = inflight.fetch_add(1) + 1;
        int64_t prev = max_seen.load();
        while (now > prev && !max_seen.compare_exchange_weak(prev, now)) {
        }
        // A PT yields at its next "sub-read" boundary when asked (every 100 us of holding).
        for (int64_t held = 0; held < hold_us && !(k == ppios::IoClass::PT && coord.yield_requested(t)); held += 100)
          std::this_thread::sleep_for(std::chrono::microseconds(std::min<int64_t>(100, hold_us - held)));
        inflight.fetch_sub(1);
        coord.release(t);
        auto t1 = std::chrono::steady_clock::now();
        if (counted) lat.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        ++n;
        // cross: node 0's MTs pause, so their node's share drifts to the PT nodes meanwhile
        // and the next MT must win slots back from them.
        if (cls == "cross" && k == ppios::IoClass::MT) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  // --nodes: a warm-up while the agents connect and take their first shares.
  if (nodes > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    counting = true;
  }
  const int64_t requests_before = ppios::server_requests_processed(options, &all_before, &err);
  auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto &t : threads) t.join();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t requests_after = ppios::server_requests_processed(options, &all_after, &err);
  std::vector<double> all, mt_all;
  // The fewest pairs any client completed: a client starved by the others shows here.
  size_t client_min = SIZE_MAX;
  for (auto &l : latencies) {
    all.insert(all.end(), l.begin(), l.end());
    client_min = std::min(client_min, l.size());
  }
  for (auto &l : mt_waits) mt_all.insert(mt_all.end(), l.begin(), l.end());
  // --nodes: the pairs of each simulated node (a node starved by the others shows here).
  std::string node_pairs = "[";
  for (int64_t n = 0; n < nodes; ++n) {
    size_t sum = 0;
    for (int64_t c = n * per_node; c < (n + 1) * per_node; ++c) sum += latencies[static_cast<size_t>(c)].size();
    node_pairs += (n ? "," : "") + std::to_string(sum);
  }
  node_pairs += "]";
  std::sort(all.begin(), all.end());
  std::sort(mt_all.begin(), mt_all.end());
  auto pct_of = [](const std::vector<double> &v, double q) {
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
  };
  auto pct = [&](double q) { return pct_of(all, q); };
  // The clients' own count only covers the instant between acquire returning and release
  // being called; the coordinator's max_inflight_seen covers every slot it granted (for the
  // whole life of the target, so use a target of its own). With --nodes the coordinator's
  // count is per node, so only the clients' count (one atomic over every node) is shown.
  int64_t threshold = options.threshold, coordinator_max = -1;
  {
    auto admin = ppios::make_coordinator_admin(options, &err);
    CoordinatorStatus s;
    if (admin && admin->status(&s, &err)) {
      threshold = s.threshold;
      if (nodes == 0 && options.address.rfind("node+", 0) != 0)
        coordinator_max = static_cast<int64_t>(s.max_inflight_seen);
    } else if (options.address != "shm") {
      return fprintf(stderr, "ppios-coord: bench: the backend could not be reached after the run (%s); "
                             "the figures may come from the node-local fallback, not reported\n", err.c_str()), 1;
    } else {
      fprintf(stderr, "ppios-coord: bench: warning: %s\n", err.c_str());
    }
  }
  // The INFO call that took the first count is not the coordinator's load.
  const bool counted = requests_before >= 0 && requests_after >= 0;
  const double requests_per_s = counted ? (requests_after - requests_before - 1) / elapsed : -1;
  const double commands_per_s = counted ? (all_after - all_before - 1) / elapsed : -1;
  // MTs may pass the cap when MTs alone fill it (unless they wait at it: MtAtCap::Wait, or
  // Learned once an auto controller holds them, which a fixed --threshold never does):
  // only PT runs, and MT runs that wait, check it.
  bool exceeded = threshold >= 0 && (cls == "pt" || options.mt_at_cap == ppios::MtAtCap::Wait) && max_seen.load() > threshold;
  double pairs_per_s = all.size() / elapsed;
  const std::string backend = coords[0]->name();
  std::vector<std::thread> closers;  // nodes leave in parallel (each joins its threads)
  for (auto &c : coords) closers.emplace_back([c = std::move(c)]() mutable { c.reset(); });
  for (auto &t : closers) t.join();
  if (json) {
    printf("{\"backend\":%s,\"target\":%s,\"clients\":%lld,\"nodes\":%lld,\"class\":\"%s\",\"hold_us\":%lld,"
           "\"pairs\":%zu,\"client_pairs_min\":%zu,\"p50_us\":%.2f,"
           "\"p99_us\":%.2f,\"max_us\":%.2f,\"mt_wait_p50_us\":%.2f,\"mt_wait_p99_us\":%.2f,\"pairs_per_s\":%.0f,"
           "\"server_requests_per_s\":%.0f,\"server_commands_per_s\":%.0f,"
           "\"max_inflight_seen\":%lld,\"coordinator_max_inflight_seen\":%s,"
           "\"threshold\":%s,\"cap_exceeded\":%s,\"node_pairs\":%s}\n",
           json_string(backend).c_str(), json_string(options.target).c_str(), static_cast<long long>(clients),
           static_cast<long long>(nodes), cls.c_str(), static_cast<long long>(hold_us), all.size(), client_min, pct(0.5),
           pct(0.99), all.empty() ? 0.0 : all.back(), pct_of(mt_all, 0.5), pct_of(mt_all, 0.99), pairs_per_s, requests_per_s, commands_per_s, static_cast<long long>(max_seen.load()),
           coordinator_max < 0 ? "null" : std::to_string(coordinator_max).c_str(), threshold < 0 ? "null" : std::to_string(threshold).c_str(), exceeded ? "true" : "false",
           node_pairs.c_str());
  } else {
    printf("backend %s, target %s, %lld client(s)", backend.c_str(), options.target.c_str(),
           static_cast<long long>(clients));
    if (nodes > 0) printf(" on %lld nodes", static_cast<long long>(nodes));
    printf(", class %s, threshold %s\n", cls.c_str(), threshold < 0 ? "none" : std::to_string(threshold).c_str());
    printf("pairs %zu in %.2f s: %.0f pairs/s\n", all.size(), elapsed, pairs_per_s);
    printf("acquire+release latency: p50 %.2f us, p99 %.2f us, max %.2f us\n", pct(0.5), pct(0.99),
           all.empty() ? 0.0 : all.back());
    printf("fewest pairs of one client: %zu (of %.0f per client on average)\n", client_min,
           static_cast<double>(all.size()) / static_cast<double>(clients));
    if (nodes > 0) printf("pairs per node: %s\n", node_pairs.c_str());
    if (!mt_all.empty()) printf("MT acquire wait: p50 %.2f us, p99 %.2f us\n", pct_of(mt_all, 0.5), pct_of(mt_all, 0.99));
    if (counted)
      printf("server load: %.0f requests/s (%.0f commands/s counting those its scripts ran)\n", requests_per_s,
             commands_per_s);
    printf("max in flight seen by the clients: %lld%s\n", static_cast<long long>(max_seen.load()),
           exceeded ? " (CAP EXCEEDED)" : "");
    if (coordinator_max >= 0)
      printf("max in flight seen by the coordinator (life of the target): %lld\n", static_cast<long long>(coordinator_max));
  }
  return exceeded ? 3 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  Args args;
  {
    // The same parser as a ppios program's (an empty variable counts as unset, as here
    // before, so `PPIOS_TARGET= ppios-coord ...` keeps working).
    std::string problem;
    auto env = [](const char *name) -> const char * {
      const char *v = getenv(name);
      return v && *v ? v : nullptr;
    };
    if (!ppios::parse_coordinator_env(env, &args.options, &problem)) return usage_error(problem);
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--coordinator" || a == "--target") {
      if (i + 1 >= argc) return usage_error(a + " needs a value");
      (a == "--coordinator" ? args.options.address : args.options.target) = argv[++i];
    } else if (a.rfind("--coordinator=", 0) == 0) {
      args.options.address = a.substr(14);
    } else if (a.rfind("--target=", 0) == 0) {
      args.options.target = a.substr(9);
    } else if (a == "--help" || a == "-h") {
      args.help = true;
    } else if (a == "--version") {
      return printf("ppios-coord (ppios) %s, git %s\n", PPIOS_VERSION, PPIOS_GIT_ID), 0;
    } else if (args.command.empty() && a[0] != '-') {
      args.command = a;
    } else {
      args.rest.push_back(a);
    }
  }
  const char *help = args.command.empty()               ? kGlobalHelp
                     : args.command == "status"         ? kStatusHelp
                     : args.command == "watch"          ? kWatchHelp
                     : args.command == "set-threshold"  ? kSetThresholdHelp
                     : args.command == "reset"          ? kResetHelp
                     : args.command == "gc"             ? kGcHelp
                     : args.command == "share-group"    ? kShareGroupHelp
                     : args.command == "bench"          ? kBenchHelp
                     : args.command == "calibrate"      ? ppios::kCalibrateHelp
                                                        : nullptr;
  if (!help) return usage_error("unknown command '" + args.command + "'");
  if (args.help) return fputs(help, stdout), 0;
  if (args.command.empty()) return fputs(kGlobalHelp, stderr), 2;
  if (std::string p = ppios::validate_coordinator_address(args.options.address); !p.empty()) return usage_error(p);
  if (std::string p = ppios::validate_target(args.options.target); !p.empty()) return usage_error(p);

  if (args.command == "bench") return run_bench(args.options, args.rest);
  if (args.command == "calibrate") return ppios::run_calibrate(args.options, args.rest);
  if (args.command == "share-group") {
    int64_t gid = -1, threshold = -1;
    for (size_t i = 0; i < args.rest.size(); ++i) {
      const std::string &a = args.rest[i];
      std::string problem;
      if (a == "--threshold") {
        if (i + 1 >= args.rest.size() || !parse_i64(args.rest[++i], 1, ppios::kMaxThreshold, &threshold))
          return usage_error("share-group: --threshold needs a number from 1 to " + std::to_string(ppios::kMaxThreshold));
      } else if (gid < 0 && a[0] != '-') {
        if (!ppios::parse_shm_group(a.c_str(), "share-group GROUP", &gid, &problem)) return usage_error(problem);
      } else {
        return usage_error("share-group: unexpected argument '" + a + "'");
      }
    }
    if (gid < 0) return usage_error("share-group needs a GROUP (a name or gid)");
    if (args.options.address != "shm")
      return usage_error("share-group is for the node-local segment (shm): with " +
                         ppios::redact_address(args.options.address) + " the cap covers every user already");
    std::string report, err;
    if (!ppios::share_segment_with_group(args.options.target, gid, threshold, args.options.lease_ms, &report, &err))
      return fprintf(stderr, "ppios-coord: share-group: %s\n", err.c_str()), 1;
    printf("%s\n", report.c_str());
    return 0;
  }
  if (args.command == "gc") {
    bool pinned = false;
    for (const auto &a : args.rest) {
      if (a == "--pinned") pinned = true;
      else return usage_error("gc: unexpected argument '" + a + "'");
    }
    std::vector<std::string> removed, kept;
    ppios::collect_unused_segments(pinned, &removed, &kept);
    for (const auto &p : removed) printf("removed %s\n", p.c_str());
    for (const auto &p : kept) printf("kept    %s\n", p.c_str());
    return 0;
  }

  // Check the command's arguments before connecting.
  bool json = false;
  double interval = 1;
  int64_t count = -1, threshold = 0;
  bool set_auto = false, force = false;
  std::vector<std::pair<int, double>> curve;
  for (size_t i = 0; i < args.rest.size(); ++i) {
    const std::string &a = args.rest[i];
    bool has_value = i + 1 < args.rest.size();
    if (args.command == "status" && a == "--json") json = true;
    else if (args.command == "reset" && a == "--force") force = true;
    else if (args.command == "watch" && a == "--interval") {
      if (!has_value || !parse_seconds(args.rest[++i], &interval)) return usage_error("watch: --interval needs a positive number of seconds");
    } else if (args.command == "watch" && a == "--count") {
      if (!has_value || !parse_i64(args.rest[++i], 1, 1LL << 40, &count)) return usage_error("watch: --count needs a number >= 1");
    } else if (args.command == "set-threshold" && i > 0 && a == "--curve") {
      if (!has_value || !parse_curve(args.rest[++i], &curve))
        return usage_error("set-threshold: --curve needs K:MIBPS,... with K from 1 to 256 and MiB/s above 0");
    } else if (args.command == "set-threshold" && i == 0) {
      if (a == "none") threshold = -1;
      else if (a == "auto") set_auto = true;
      else if (!parse_i64(a, 1, ppios::kMaxThreshold, &threshold))
        return usage_error("set-threshold: '" + a + "' is not a number from 1 to " + std::to_string(ppios::kMaxThreshold) +
                           ", none or auto");
    } else {
      return usage_error(args.command + ": unexpected argument '" + a + "'");
    }
  }
  if (args.command == "set-threshold" && args.rest.empty()) return usage_error("set-threshold needs N or none");

  std::string err;
  auto admin = ppios::make_coordinator_admin(args.options, &err);
  if (!admin) return fprintf(stderr, "ppios-coord: %s\n", err.c_str()), 1;
  if (args.command == "status") return run_status(*admin, json);
  if (args.command == "watch") {
    for (int64_t n = 0; count < 0 || n < count; ++n) {
      if (n) std::this_thread::sleep_for(std::chrono::duration<double>(interval));
      printf("\033[H\033[2J");
      if (int rc = run_status(*admin, false)) return rc;
      fflush(stdout);
    }
    return 0;
  }
  if (args.command == "set-threshold") {
    if (!(set_auto ? admin->set_auto(&err) : admin->set_threshold(threshold, &err)))
      return fprintf(stderr, "ppios-coord: set-threshold: %s\n", err.c_str()), 1;
    if (!curve.empty() && !admin->store_curve(curve, &err))
      return fprintf(stderr, "ppios-coord: set-threshold: --curve: %s\n", err.c_str()), 1;
    return 0;
  }
  std::vector<std::string> notes;
  const bool reset_ok = admin->reset(&err, force, &notes);
  for (const auto &n : notes) printf("%s\n", n.c_str());
  if (!reset_ok) return fprintf(stderr, "ppios-coord: reset: %s\n", err.c_str()), 1;
  return 0;
}
