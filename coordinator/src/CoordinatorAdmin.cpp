// Administration of stored coordinator state (ppios-coord status/set-threshold/reset).
#include "ppios/CoordinatorAdmin.h"

#include "RedisAddress.h"
#include "RedisLink.h"
#include "NodeCoordinator.h"
#include "ShmSlotTable.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

namespace ppios {
namespace {

// ShmSlotTable::remove, its note (a planted or malformed segment removed) added to *notes.
bool remove_segment(const std::string &target, int64_t group, bool force, std::string *error,
                    std::vector<std::string> *notes) {
  std::string note;
  const bool ok = ShmSlotTable::remove(target, group, force, error, &note);
  if (!note.empty() && notes) notes->push_back(note);
  return ok;
}

class ShmAdmin final : public CoordinatorAdmin {
 public:
  ShmAdmin(std::string target, int64_t group, int lease_ms) : target_(std::move(target)), group_(group), lease_ms_(lease_ms) {}

  bool status(CoordinatorStatus *out, std::string *error) override {
    *out = CoordinatorStatus{};
    out->backend = "shm";
    out->target = target_;
    out->scope = group_ >= 0 ? "group" : "user";
    std::string problem;
    auto table = ShmSlotTable::open(target_, group_, false, lease_ms_, &problem);
    if (!table) {
      if (!problem.empty()) *error = problem;
      return problem.empty();  // no segment yet: nothing stored, which is a valid status
    }
    if (!table->snapshot(out, error)) return false;
    out->target = target_;
    out->scope = group_ >= 0 ? "group" : "user";
    return true;
  }

  bool set_threshold(int64_t n, std::string *error) override {
    auto table = pinned_table(error);
    if (table) table->set_threshold(n);
    return table != nullptr;
  }

  bool reset(std::string *error, bool force, std::vector<std::string> *notes) override {
    return remove_segment(target_, group_, force, error, notes);
  }

  bool set_auto(std::string *error) override {
    auto table = pinned_table(error);
    if (table) table->enable_auto();
    return table != nullptr;
  }

  bool store_curve(const std::vector<std::pair<int, double>> &curve, std::string *error) override {
    auto table = pinned_table(error);
    if (table) table->store_curve(curve);
    return table != nullptr;
  }

 private:
  // What an admin stores outlives the processes (see ShmSlotTable.h); a segment removed
  // by its last process while we opened it is opened (created) again.
  std::unique_ptr<ShmSlotTable> pinned_table(std::string *error) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      auto table = ShmSlotTable::open(target_, group_, true, lease_ms_, error);
      if (!table || table->pin()) return table;
    }
    *error = "the segment of target '" + target_ + "' was removed again and again while opening it";
    return nullptr;
  }

  std::string target_;
  int64_t group_;
  int lease_ms_;
};

class RedisAdmin final : public CoordinatorAdmin {
 public:
  RedisAdmin(std::unique_ptr<RedisLink> link, std::string target, int64_t group)
      : link_(std::move(link)), target_(std::move(target)), group_(group) {}

  bool status(CoordinatorStatus *out, std::string *error) override {
    // What does not parse or does not add up is repaired first, and said.
    auto fixed = link_->run(target_, {"repair"}, error);
    if (!fixed) return false;
    std::vector<std::string> repairs;
    for (size_t i = 0; fixed->type == REDIS_REPLY_ARRAY && i < fixed->elements; ++i)
      if (fixed->element[i]->type == REDIS_REPLY_STRING) repairs.emplace_back(fixed->element[i]->str, fixed->element[i]->len);
    auto r = link_->run(target_, {"status"}, error);
    if (!r) return false;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 7 || (r->elements - 7) % 3 != 0) {
      *error = "unexpected status reply";
      return false;
    }
    *out = CoordinatorStatus{};
    out->backend = "redis";
    out->target = target_;
    out->scope = "site";
    out->repairs = std::move(repairs);
    out->threshold = r->element[0]->integer;
    out->mt_inflight = static_cast<uint32_t>(r->element[1]->integer);
    out->pt_inflight = static_cast<uint32_t>(r->element[2]->integer);
    out->queued_mt = static_cast<uint32_t>(r->element[3]->integer);
    out->queued_pt = static_cast<uint32_t>(r->element[4]->integer);
    out->processes = static_cast<uint32_t>(r->element[5]->integer);
    out->max_inflight_seen = static_cast<uint64_t>(r->element[6]->integer);
    for (size_t i = 7; i + 2 < r->elements; i += 3) {
      std::string value(r->element[i]->str, r->element[i]->len);     // "cls|lead"
      std::string info(r->element[i + 1]->str, r->element[i + 1]->len);  // "host|pid"
      HolderInfo h;
      h.cls = value.rfind("M", 0) == 0 ? IoClass::MT : IoClass::PT;
      size_t bar = value.find('|');
      h.lead = bar == std::string::npos ? 0 : std::strtoull(value.c_str() + bar + 1, nullptr, 10);
      size_t ibar = info.rfind('|');
      h.host = info.substr(0, ibar);
      h.pid = ibar == std::string::npos ? 0 : std::atoi(info.c_str() + ibar + 1);
      h.yield_requested = r->element[i + 2]->integer != 0;
      out->holders.push_back(h);
    }
    // Two-level backend: the nodes' shares (live leases only).
    auto nr = link_->run(target_, {"node-status"}, error);
    if (!nr) return false;
    if (nr->type == REDIS_REPLY_ARRAY && nr->elements >= 2) {
      auto text = [&](size_t i) { return std::string(nr->element[i]->str ? nr->element[i]->str : "", nr->element[i]->len); };
      int64_t now = std::atoll(text(0).c_str());
      out->node_max_shares = std::atoll(text(1).c_str());
      for (size_t i = 2; i + 1 < nr->elements; i += 2) {
        NodeShareInfo n;
        n.node.assign(nr->element[i]->str, nr->element[i]->len);
        long long share, need, mtneed, pt, deadline;
        std::string v(nr->element[i + 1]->str, nr->element[i + 1]->len);
        if (sscanf(v.c_str(), "%lld|%lld|%lld|%lld|%lld", &share, &need, &mtneed, &pt, &deadline) != 5 ||
            deadline < now)
          continue;
        n.share = share;
        n.need = need;
        n.mt_need = mtneed;
        n.pt_inflight = pt;
        n.lease_left_ms = deadline - now;
        out->nodes.push_back(n);
      }
    }
    auto a = link_->run(target_, {"status-auto"}, error);
    if (!a) return false;
    if (a->type != REDIS_REPLY_ARRAY || a->elements < 3) {
      *error = "unexpected status reply";
      return false;
    }
    auto str = [&](size_t i) { return std::string(a->element[i]->str ? a->element[i]->str : "", a->element[i]->len); };
    out->auto_threshold = str(0) == "1";
    out->mt_hold = str(1) == "1";
    std::string ctl = str(2);
    if (!ctl.empty()) {
      size_t bar = ctl.rfind('|');
      out->controller_host = ctl.substr(0, bar);
      out->controller_pid = bar == std::string::npos ? 0 : std::atoi(ctl.c_str() + bar + 1);
    }
    for (size_t i = 3; i + 1 < a->elements; i += 2) out->curve.emplace_back(std::atoi(str(i).c_str()), std::atof(str(i + 1).c_str()));
    std::sort(out->curve.begin(), out->curve.end());
    return true;
  }

  bool set_auto(std::string *error) override { return link_->run(target_, {"set-auto"}, error) != nullptr; }

  bool store_curve(const std::vector<std::pair<int, double>> &curve, std::string *error) override {
    std::string arg;
    char buf[64];
    for (const auto &[k, mibps] : curve) {
      snprintf(buf, sizeof buf, "%s%d:%.3f", arg.empty() ? "" : ",", k, mibps);
      arg += buf;
    }
    return link_->run(target_, {"curve-put", arg}, error) != nullptr;
  }

  bool set_threshold(int64_t n, std::string *error) override {
    return link_->run(target_, {"set-threshold", std::to_string(n < 0 ? -1 : n)}, error) != nullptr;
  }

  bool reset(std::string *error, bool force, std::vector<std::string> *notes) override {
    if (!force) {
      CoordinatorStatus s;
      if (!status(&s, error)) return false;
      if (s.processes > 0) {
        *error = std::to_string(s.processes) + " process(es) are registered on target '" + target_ +
                 "'; resetting it now would free their slots under them (use --force to reset it anyway)";
        if (!s.repairs.empty()) {
          *error += "; repaired in place instead:";
          for (const auto &line : s.repairs) *error += " " + line + ";";
        }
        return false;
      }
    }
    if (!link_->run(target_, {"reset"}, error)) return false;
    // Per-waiter and per-process lists expire on their own; remove them now anyway.
    std::string cursor = "0";
    do {
      auto r = link_->command({"SCAN", cursor, "MATCH", RedisLink::key_prefix(target_) + "*", "COUNT", "1000"}, error);
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return false;
      cursor.assign(r->element[0]->str, r->element[0]->len);
      redisReply *keys = r->element[1];
      for (size_t i = 0; i < keys->elements; ++i)
        link_->command({"DEL", std::string(keys->element[i]->str, keys->element[i]->len)}, error);
    } while (cursor != "0");
    // This node's stand-in for the server (used during outages) belongs to the target too.
    return remove_segment(target_, group_, force, error, notes);
  }

 private:
  std::unique_ptr<RedisLink> link_;
  std::string target_;
  int64_t group_;  // of this node's stand-in segment
};

// The two-level backend: the cap, the nodes' shares and the queues live on the server,
// the slots in flight in each node's segment. Status adds up the segments of the nodes of
// this machine (the real one and any simulated ones, PPIOS_SIM_NODE), so on one machine it
// shows every slot in flight. max_inflight_seen is an upper bound of the highest count at
// once: the smaller of the sum of those nodes' own maxima and the highest sum of shares the
// server recorded (MTs past the cap between two syncs of their node escape the latter).
class NodeAdmin final : public CoordinatorAdmin {
 public:
  NodeAdmin(std::unique_ptr<RedisAdmin> inner, const CoordinatorOptions &options)
      : inner_(std::move(inner)), options_(options) {}

  bool status(CoordinatorStatus *out, std::string *error) override {
    if (!inner_->status(out, error)) return false;
    out->backend = "node";
    out->max_inflight_seen = 0;
    uint64_t sum_of_maxima = 0;
    for (const std::string &local : local_targets(*out)) {
      std::string problem;
      auto table = ShmSlotTable::open(local, options_.shm_group, false, options_.lease_ms, &problem);
      CoordinatorStatus n;
      if (!table || !table->snapshot(&n, &problem)) continue;  // no segment: nothing in flight there
      out->mt_inflight += n.mt_inflight;
      out->pt_inflight += n.pt_inflight;
      out->queued_mt += n.queued_mt;
      out->queued_pt += n.queued_pt;
      out->processes += n.processes;
      sum_of_maxima += n.max_inflight_seen;
      out->holders.insert(out->holders.end(), n.holders.begin(), n.holders.end());
    }
    // Both bound the highest count at once from above; the smaller is the better bound.
    out->max_inflight_seen = std::min<uint64_t>(sum_of_maxima, static_cast<uint64_t>(std::max<int64_t>(0, out->node_max_shares)));
    return true;
  }

  bool set_threshold(int64_t n, std::string *error) override { return inner_->set_threshold(n, error); }
  bool set_auto(std::string *error) override {
    *error = "PPIOS_THRESHOLD=auto is not available with per-node shares (node+ addresses)";
    return false;
  }
  bool store_curve(const std::vector<std::pair<int, double>> &curve, std::string *error) override {
    return inner_->store_curve(curve, error);
  }

  bool reset(std::string *error, bool force, std::vector<std::string> *notes) override {
    CoordinatorStatus s;
    if (!status(&s, error)) return false;
    if (!force && s.processes > 0) {
      *error = std::to_string(s.processes) + " process(es) use target '" + options_.target +
               "' on this machine; resetting it now would free their slots under them (use --force to reset it anyway)";
      return false;
    }
    if (!inner_->reset(error, true, notes)) return false;
    for (const std::string &local : local_targets(s))
      if (!remove_segment(local, options_.shm_group, force, error, notes)) return false;
    return true;
  }

 private:
  // The node-local targets of this machine's nodes (see NodeCoordinator::local_target),
  // the real node's always, simulated ones when the server lists them.
  std::vector<std::string> local_targets(const CoordinatorStatus &s) const {
    const std::string owner = "/" + (options_.shm_group >= 0 ? "g" + std::to_string(options_.shm_group)
                                                             : "u" + std::to_string(geteuid()));
    CoordinatorOptions o = options_;
    o.sim_node.clear();
    std::vector<std::string> out{NodeCoordinator::local_target(o)};
    for (const auto &n : s.nodes) {
      if (n.node.rfind("sim-", 0) != 0 || n.node.size() <= owner.size() ||
          n.node.compare(n.node.size() - owner.size(), owner.size(), owner) != 0)
        continue;
      o.sim_node = n.node.substr(4, n.node.size() - 4 - owner.size());
      out.push_back(NodeCoordinator::local_target(o));
    }
    return out;
  }

  std::unique_ptr<RedisAdmin> inner_;
  CoordinatorOptions options_;
};

}  // namespace

bool share_segment_with_group(const std::string &target, int64_t gid, int64_t threshold, int lease_ms,
                              std::string *report, std::string *error) {
  // The cap of every member's jobs: only an administrator sets it up (a member could make
  // a group segment too, at its first job, but would own it).
  if (geteuid() != 0) {
    *error = "only root (an administrator) can share a target's segment with a group";
    return false;
  }
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string problem;
    auto table = ShmSlotTable::open(target, gid, true, lease_ms, &problem);
    if (!table) {
      *error = problem;
      return false;
    }
    if (!table->pin()) continue;  // removed by its last process meanwhile: again
    if (threshold >= 1) table->set_threshold(threshold);
    CoordinatorStatus s;
    std::string err;
    const int64_t cap = table->snapshot(&s, &err) ? s.threshold : -1;
    const std::string path = "/dev/shm" + ShmSlotTable::segment_name(target, gid);
    struct stat st;
    const bool ours = stat(path.c_str(), &st) == 0 && st.st_uid == 0;
    *report = "target '" + target + "': " + path + " (group " + std::to_string(gid) + ", mode 660" +
              (ours ? "" : ", made by uid " + std::to_string(st.st_uid) + ", a member, at its first job") +
              "), kept until `reset`; cap " + (cap >= 0 ? std::to_string(cap) : std::string("none")) +
              " over the jobs of every member of the group on this node that sets PPIOS_SHM_GROUP=" +
              std::to_string(gid);
    return true;
  }
  *error = "the segment of target '" + target + "' was removed again and again while making it";
  return false;
}

void collect_unused_segments(bool include_pinned, std::vector<std::string> *removed, std::vector<std::string> *kept) {
  ShmSlotTable::collect_garbage(include_pinned, removed, kept);
}

std::unique_ptr<CoordinatorAdmin> make_coordinator_admin(const CoordinatorOptions &options, std::string *error) {
  std::string problem = validate_coordinator_address(options.address);
  if (!problem.empty()) {
    *error = problem;
    return nullptr;
  }
  if (options.address == "shm") return std::make_unique<ShmAdmin>(options.target, options.shm_group, options.lease_ms);
  RedisAddress address;
  RedisAddress::parse(options.address, &address, &problem);
  RedisLink::Failure failure;
  auto link = RedisLink::connect(address, 2000, &failure, &problem);
  if (!link) {
    *error = "coordinator " + address.describe() + ": " + problem;
    return nullptr;
  }
  auto redis = std::make_unique<RedisAdmin>(std::move(link), options.target, options.shm_group);
  if (address.node_shares) return std::make_unique<NodeAdmin>(std::move(redis), options);
  return redis;
}

int64_t server_requests_processed(const CoordinatorOptions &options, int64_t *all_commands, std::string *error) {
  RedisAddress address;
  std::string problem;
  if (options.address == "shm" || !RedisAddress::parse(options.address, &address, &problem)) return -1;
  RedisLink::Failure failure;
  auto link = RedisLink::connect(address, 2000, &failure, &problem);
  auto r = link ? link->command({"INFO", "commandstats"}, &problem) : nullptr;
  if (!r || r->type != REDIS_REPLY_STRING) {
    if (error) *error = problem;
    return -1;
  }
  // Lines "cmdstat_<name>:calls=<n>,...". Commands a script runs are counted too; the
  // requests are the commands clients send (the coordinator's: scripts, BLPOP, set-up).
  static const char *const kRequests[] = {"evalsha", "eval", "blpop", "ping", "script|load", "auth", "select", "info"};
  std::string text(r->str, r->len);
  int64_t requests = 0, all = 0;
  for (size_t at = text.find("cmdstat_"); at != std::string::npos; at = text.find("cmdstat_", at + 1)) {
    size_t colon = text.find(':', at), calls = text.find("calls=", at);
    if (colon == std::string::npos || calls == std::string::npos) break;
    std::string name = text.substr(at + 8, colon - at - 8);
    int64_t n = std::atoll(text.c_str() + calls + 6);
    all += n;
    for (const char *k : kRequests)
      if (name == k) requests += n;
  }
  if (all_commands) *all_commands = all;
  return requests;
}

}  // namespace ppios
