// Chooses the backend named by PPIOS_COORDINATOR (already parsed into CoordinatorOptions).
#include "CoordinatorNotices.h"
#include "ShmCoordinator.h"
#include "NodeCoordinator.h"
#include "RedisCoordinator.h"
#include "RedisAddress.h"
#include "ppios/Coordinator.h"

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <grp.h>
#include <unistd.h>
#include <vector>

namespace ppios {

namespace {
std::atomic<CoordinatorNoticeSink> g_notice_sink{nullptr};
}  // namespace

void set_coordinator_notice_sink(CoordinatorNoticeSink sink) {
  g_notice_sink.store(sink, std::memory_order_release);
}

void tell_notice(const CoordinatorNotice &notice) {
  if (CoordinatorNoticeSink sink = g_notice_sink.load(std::memory_order_acquire)) sink(notice);
  else fprintf(stderr, "ppios: warning: %s\n", notice.text.c_str());
}

bool parse_setting_number(const char *text, int64_t min, int64_t max, int64_t *out) {
  if (text == nullptr || *text == '\0' || (text[0] == '0' && text[1] != '\0')) return false;
  for (const char *p = text; *p; ++p)
    if (*p < '0' || *p > '9') return false;
  errno = 0;
  long long v = std::strtoll(text, nullptr, 10);
  if (errno != 0 || v < min || v > max) return false;
  *out = v;
  return true;
}

bool parse_threshold_setting(const char *text, CoordinatorOptions *options, std::string *error) {
  if (text != nullptr && std::strcmp(text, "auto") == 0) {
    options->threshold = -1;
    options->auto_threshold = true;
    return true;
  }
  if (int64_t v; parse_setting_number(text, 1, kMaxThreshold, &v)) {
    options->threshold = v;
    options->auto_threshold = false;
    return true;
  }
  if (error)
    *error = std::string("PPIOS_THRESHOLD='") + (text ? text : "") +
             "' is not valid; use a whole number from 1 to " + std::to_string(kMaxThreshold) +
             " or auto (the cap is learned from the measured throughput)";
  return false;
}

std::string redact_address(const std::string &address) {
  // Whatever the scheme (rediss://, tcp://, Redis://, none) and however mistyped (a
  // forgotten colon): everything between the start of the authority and the last '@' may
  // hold a password, and so may a password= option (any case) and, with no '@', whatever
  // follows the last ':' of the authority unless it is a port number.
  std::string out = address;
  size_t start = out.find("//");
  start = start == std::string::npos ? 0 : start + 2;
  size_t authority_end = out.find_first_of("/?", start);
  if (authority_end == std::string::npos) authority_end = out.size();
  size_t at = out.rfind('@');
  if (at != std::string::npos && at >= start) {
    out.replace(start, at - start, "***");
  } else if (size_t colon = out.rfind(':', authority_end == 0 ? 0 : authority_end - 1);
             colon != std::string::npos && colon >= start && colon + 1 < authority_end &&
             out.find_first_not_of("0123456789", colon + 1) < authority_end) {
    out.replace(colon + 1, authority_end - colon - 1, "***");
  }
  std::string lower = out;
  for (char &c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (size_t pos = lower.find("password="); pos != std::string::npos; pos = lower.find("password=", pos + 1)) {
    size_t value = pos + 9, stop = out.find('&', value);
    size_t len = (stop == std::string::npos ? out.size() : stop) - value;
    out.replace(value, len, "***");
    lower.replace(value, len, "***");
  }
  return out;
}

std::string validate_coordinator_address(const std::string &address) {
  if (address == "shm") return "";
  RedisAddress parsed;
  std::string problem;
  if (RedisAddress::parse(address, &parsed, &problem)) return "";
  return "PPIOS_COORDINATOR='" + redact_address(address) + "' is not valid (" + problem +
         "); use shm, redis://[:password@]host:port[/db] or unix:///path.sock, either optionally "
         "prefixed with node+ (per-node shares of the cap)";
}

std::string validate_target(const std::string &target) {
  bool ok = !target.empty() && target.size() <= 64;
  for (char c : target)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                c == '.');
  if (ok) return "";
  return "PPIOS_TARGET='" + target + "' is not valid; use 1 to 64 characters from A-Z a-z 0-9 . _ -";
}

namespace {

bool parse_whole(const char *text, int64_t min, int64_t max, int64_t *out) {
  return parse_setting_number(text, min, max, out);
}

}  // namespace

// A group name or number the caller belongs to: the creator hands the segment to it.
bool parse_shm_group(const char *text, const char *what, int64_t *gid, std::string *error) {
  int64_t n;
  if (parse_whole(text, 0, INT32_MAX, &n)) {
    *gid = n;
  } else if (struct group *g = *text ? getgrnam(text) : nullptr) {
    *gid = g->gr_gid;
  } else {
    *error = std::string(what) + "='" + text + "' is not a group name or number";
    return false;
  }
  bool member = getegid() == static_cast<gid_t>(*gid) || geteuid() == 0;
  std::vector<gid_t> groups(static_cast<size_t>(std::max(0, getgroups(0, nullptr))));
  int count = groups.empty() ? 0 : getgroups(static_cast<int>(groups.size()), groups.data());
  for (int i = 0; i < count && !member; ++i) member = groups[static_cast<size_t>(i)] == static_cast<gid_t>(*gid);
  if (!member) {
    *error = std::string(what) + "='" + text + "': you are not a member of that group";
    return false;
  }
  return true;
}

const char *cap_scope(const Coordinator &coordinator) {
  if (const auto *shm = dynamic_cast<const ShmCoordinator *>(&coordinator)) return shm->scope();
  if (const auto *node = dynamic_cast<const NodeCoordinator *>(&coordinator)) return node->scope();
  if (dynamic_cast<const RedisCoordinator *>(&coordinator)) return "site";
  return "none";
}

bool parse_coordinator_env(const std::function<const char *(const char *)> &getenv_fn, CoordinatorOptions *options,
                           std::string *error) {
  CoordinatorOptions o = *options;
  auto range = [&](const char *name, const char *text, int64_t min, int64_t max, int64_t *out) {
    if (parse_whole(text, min, max, out)) return true;
    *error = std::string(name) + "='" + text + "' is not valid; use a whole number from " + std::to_string(min) +
             " to " + std::to_string(max);
    return false;
  };
  if (const char *t = getenv_fn("PPIOS_THRESHOLD"); t != nullptr && !parse_threshold_setting(t, &o, error))
    return false;
  int64_t v;
  if (const char *t = getenv_fn("PPIOS_LEASE_MS")) {
    if (!range("PPIOS_LEASE_MS", t, kMinLeaseMs, kMaxLeaseMs, &v)) return false;
    o.lease_ms = static_cast<int>(v);
  }
  if (const char *t = getenv_fn("PPIOS_MT_THROTTLE")) {
    if (!range("PPIOS_MT_THROTTLE", t, 0, 1, &v)) return false;
    o.mt_at_cap = v != 0 ? MtAtCap::Wait : MtAtCap::Pass;
  } else if (const char *th = getenv_fn("PPIOS_THRESHOLD"); th != nullptr && !o.auto_threshold) {
    // A cap the user gave as a number states the device's knee: every access obeys it,
    // MTs too (the paper's system-wide cap). Under auto or a stored cap MtAtCap::Learned
    // (the default) lets the target's controller decide: the caps of a cold start's
    // doubling climb are below the knee and must not throttle the MTs themselves.
    o.mt_at_cap = MtAtCap::Wait;
  }
  if (const char *a = getenv_fn("PPIOS_COORDINATOR")) {
    if (std::string problem = validate_coordinator_address(a); !problem.empty()) {
      *error = problem;
      return false;
    }
    o.address = a;
  }
  if (const char *t = getenv_fn("PPIOS_TARGET")) {
    if (std::string problem = validate_target(t); !problem.empty()) {
      *error = problem;
      return false;
    }
    o.target = t;
  }
  if (const char *g = getenv_fn("PPIOS_SHM_GROUP"); g != nullptr && !parse_shm_group(g, "PPIOS_SHM_GROUP", &o.shm_group, error))
    return false;
  if (const char *t = getenv_fn("PPIOS_SIM_NODE")) {
    // Same alphabet as a target: it becomes part of a segment name and a Redis key.
    if (!validate_target(t).empty()) {
      *error = std::string("PPIOS_SIM_NODE='") + t + "' is not valid; use 1 to 64 characters from A-Z a-z 0-9 . _ -";
      return false;
    }
    o.sim_node = t;
  }
  *options = o;
  return true;
}

std::unique_ptr<Coordinator> make_coordinator(const CoordinatorOptions &options, std::string *error) {
  std::string problem = validate_coordinator_address(options.address);
  if (problem.empty() && options.lease_ms < 10) problem = "PPIOS_LEASE_MS must be at least 10";
  if (problem.empty() && options.target.empty()) problem = "PPIOS_TARGET must not be empty";
  // The one check of this combination (environment or ppios-coord flags).
  if (problem.empty() && options.auto_threshold && options.address.rfind("node+", 0) == 0)
    problem = "PPIOS_THRESHOLD=auto cannot be used with PPIOS_COORDINATOR=node+...: per-node shares do not learn "
              "the cap; give a number, or use a redis:// or unix:// address";
  if (!problem.empty()) {
    if (error) *error = problem;
    return nullptr;
  }
  if (options.address == "shm") return ShmCoordinator::create(options, error);
  if (options.address.rfind("node+", 0) == 0) return NodeCoordinator::create(options, error);
  return RedisCoordinator::create(options, error);
}

}  // namespace ppios
