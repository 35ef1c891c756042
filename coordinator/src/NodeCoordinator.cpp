// The two-level backend: see NodeCoordinator.h for the design, the invariant and the
// lock order.
#include "NodeCoordinator.h"

#include "CoordinatorNotices.h"

#include "ppios/CoordinatorAdmin.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unistd.h>

namespace ppios {
namespace {

constexpr int kConnectTimeoutMs = 1000;
constexpr int kCommandTimeoutMs = 2000;
// How often the acting agent samples its segment. What must not wait for it rings the
// segment's bell instead (an MT starts waiting, a lowered cap drained, the listener).
constexpr int kTickMs = 5;
constexpr int kMinGapMs = 1;        // syncs to ask for more are at least this far apart
constexpr int kMinPassUs = 200;     // the agent's passes are at least this far apart
constexpr int kGiveBackMs = 5;      // slots unused this long go to nodes that need them
constexpr int kListenMs = 100;      // BLPOP timeout of the listener (bounds shutdown)
constexpr int kReconnectMs = 250;
constexpr int kRefreshMs = 20;      // at most this often a sync only to report PTs and their lead
constexpr int kLeadIdleMs = 100;    // ... while no other node's MTs wait

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string node_name(const CoordinatorOptions &options) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string name = options.sim_node.empty() ? std::string(host) : "sim-" + options.sim_node;
  // Each user (or PPIOS_SHM_GROUP) of a node has a segment of its own, so a share of its own.
  return name + "/" + (options.shm_group >= 0 ? "g" + std::to_string(options.shm_group)
                                               : "u" + std::to_string(geteuid()));
}

}  // namespace

std::string NodeCoordinator::local_target(const CoordinatorOptions &options) {
  return options.target + "@node" + (options.sim_node.empty() ? "" : "-" + options.sim_node);
}

std::unique_ptr<Coordinator> NodeCoordinator::create(const CoordinatorOptions &options, std::string *error) {
  RedisAddress address;
  std::string problem;
  if (!RedisAddress::parse(options.address, &address, &problem) || !address.node_shares) {
    if (error) *error = "PPIOS_COORDINATOR='" + redact_address(options.address) + "': " + problem;
    return nullptr;
  }
  // A configuration error (password, db, not a Redis) stops the program before anything starts.
  RedisLink::Failure failure;
  auto probe = RedisLink::connect(address, kConnectTimeoutMs, &failure, &problem);
  if (failure == RedisLink::Failure::Fatal) {
    if (error) *error = "coordinator " + address.describe() + ": " + problem;
    return nullptr;
  }
  int64_t stored = -1;
  std::string epoch;
  if (probe) {
    // The first process of the target stores its PPIOS_THRESHOLD; the stored one wins.
    auto r = probe->run(options.target, {"adopt", std::to_string(options.threshold), "0"}, &problem);
    if (r && options.threshold >= 0 && r->integer != options.threshold)
      tell_threshold_conflict(options.threshold, r->integer, options.target);
    if (r) stored = r->integer;
    auto e = probe->run(options.target, {"epoch", "0", std::to_string(options.lease_ms), ""}, &problem);
    if (e && e->type == REDIS_REPLY_STRING) epoch.assign(e->str, e->len);
  }
  if (probe) probe->run(options.target, {"node-hello", node_name(options), std::to_string(2 * options.lease_ms)}, &problem);
  probe.reset();
  // The node's processes start with a cap of 0 (no share yet) unless the segment has one.
  CoordinatorOptions local = options;
  local.target = local_target(options);
  local.threshold = 0;
  local.auto_threshold = false;
  auto shm = ShmCoordinator::create(local, error, /*quiet_threshold_conflict=*/true);
  if (!shm) return nullptr;
  std::unique_ptr<NodeCoordinator> c(new NodeCoordinator(options, address, std::move(shm)));
  c->known_cap_ = stored;  // (the agent's state: set before its thread starts)
  c->epoch_ = epoch;
  if (c->table_) {  // without a segment the process schedules only within itself (warned)
    c->agent_ = std::thread([raw = c.get()] { raw->agent_loop(); });
    c->listener_ = std::thread([raw = c.get()] { raw->listener_loop(); });
    c->local_->set_exit_hook([raw = c.get()] { raw->stop(); });
  }
  return c;
}

NodeCoordinator::NodeCoordinator(const CoordinatorOptions &options, const RedisAddress &address,
                                 std::unique_ptr<ShmCoordinator> local)
    : options_(options),
      address_(address),
      node_(node_name(options)),
      wake_list_(RedisLink::key_prefix(options.target) + "nw:" + node_),
      node_lease_ms_(2 * options.lease_ms),
      local_(std::move(local)),
      table_(local_->table()) {}

NodeCoordinator::~NodeCoordinator() {
  local_->set_exit_hook(nullptr);
  stop();
}

void NodeCoordinator::stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> g(wake_mutex_);
    stopping_ = true;
  }
  wake_cv_.notify_all();
  if (table_) table_->ring_agent();  // an acting agent sleeps on the segment's bell
  if (agent_.joinable()) agent_.join();
  if (listener_.joinable()) listener_.join();
  if (table_ && acting_.load()) {
    // The last process of the node gives the share back now rather than after the lease.
    CoordinatorStatus st;
    std::string err;
    // A state lost since our last sync gets the cap we knew back before we go: the
    // process that takes our part over may have started after the loss, knowing none.
    if (online_ && link_ && known_cap_ >= 1) link_->run(options_.target, {"adopt", std::to_string(known_cap_), "0"}, &err);
    if (online_ && link_ && table_->snapshot(&st, &err) && st.processes <= 1)
      link_->run(options_.target, {"node-leave", node_}, &err);
    table_->resign_controller(local_->process_handle());
  }
}

bool NodeCoordinator::sleep_or_stop(int ms, bool *woken) {
  std::unique_lock<std::mutex> lk(wake_mutex_);
  wake_cv_.wait_for(lk, std::chrono::milliseconds(ms), [this] { return stopping_ || woken_; });
  *woken = woken_;
  woken_ = false;
  return stopping_;
}

// Every process runs this; only the holder of the segment's controller lease acts.
void NodeCoordinator::agent_loop() {
  const int lead_period_ms = std::max(5, options_.lease_ms / 4);
  int64_t next_lead_ms = 0;
  bool woken = false;
  for (;;) {
    // Read before looking at the segment: a ring while we act is not lost.
    const uint32_t bell = table_->agent_bell();
    const auto pass_start = std::chrono::steady_clock::now();
    int64_t now = steady_ms();
    if (now >= next_lead_ms) {
      bool lead = table_->lead_controller(local_->process_handle(), options_.lease_ms);
      if (lead && !acting_.load()) {
        // Taking over: what the previous agent knew is unknown here. The first sync
        // reports the floor. Without the server the local cap stands for one lease (a
        // connection refused once at start must not grant the fair share of a node that
        // never had one; the previous agent's record outlives it by about that much), then
        // the offline rule applies. Credits wait for its first sync.
        std::lock_guard<std::mutex> g(cap_mutex_);
        share_ = 0;
        credit_seq_ = kNoCredits;
        lease_end_ms_ = now + options_.lease_ms;
        reported_unmet_ = reported_mt_unmet_ = -1;
      }
      acting_.store(lead);
      next_lead_ms = now + lead_period_ms;
    }
    if (acting_.load()) {
      if (!online_ && now >= next_connect_ms_ && !connect_agent_link()) next_connect_ms_ = now + kReconnectMs;
      if (online_ && !agent_step(woken)) {
        online_ = false;
        link_.reset();
        next_connect_ms_ = now + kReconnectMs;
      }
      if (!online_) apply_offline_rule();
    } else {
      online_ = false;
      link_.reset();
    }
    if (acting_.load()) {
      // The segment's bell: an MT started waiting, a lowered cap drained, our listener.
      // Rings come in bursts (every MT that waits rings): one pass per kMinPassUs at most.
      table_->wait_agent_bell(bell, kTickMs);
      const auto since = std::chrono::steady_clock::now() - pass_start;
      if (since < std::chrono::microseconds(kMinPassUs))
        std::this_thread::sleep_for(std::chrono::microseconds(kMinPassUs) - since);
      if (sleep_or_stop(0, &woken)) break;
    } else if (sleep_or_stop(lead_period_ms, &woken)) {
      break;
    }
  }
}

bool NodeCoordinator::connect_agent_link() {
  RedisLink::Failure failure;
  std::string err;
  link_ = RedisLink::connect(address_, kConnectTimeoutMs, &failure, &err);
  if (link_) {
    // A server that came back empty learns the cap again: the one we knew (set with
    // ppios-coord, it is not in our options), else ours.
    if (adopt_known_cap(&err)) {
      online_ = true;
      next_renew_ms_ = 0;  // sync at once
      return true;
    }
    link_.reset();
  }
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    tell_notice("coordinator " + address_.describe() + " unreachable (" + err +
                "); this node keeps its share until its lease ends, then its fair share of the cap");
  return false;
}

bool NodeCoordinator::adopt_known_cap(std::string *err) {
  // Ours, else the node's memory (a process that started while the state was gone knew
  // none), else our PPIOS_THRESHOLD.
  int64_t known = known_cap_ >= 1 ? known_cap_ : table_->site_cap();
  if (known < 1) known = options_.threshold;
  if (!link_->run(options_.target, {"adopt", std::to_string(known), "0"}, err)) return false;
  auto e = link_->run(options_.target, {"epoch", epoch_.empty() ? "0" : "1", std::to_string(options_.lease_ms), epoch_},
                      err);
  if (!e || e->type != REDIS_REPLY_STRING) return false;
  epoch_.assign(e->str, e->len);
  return true;
}

// Redis lost: the share holds until the lease would have ended, then the fair share,
// rounded down, so the nodes' caps add up to the cap at most even when it is smaller than
// the number of nodes (those nodes get 0: their PTs wait, see the header).
void NodeCoordinator::apply_offline_rule() {
  std::lock_guard<std::mutex> g(cap_mutex_);
  credit_seq_ = kNoCredits;  // a credit left in our list is counted by the next sync
  if (steady_ms() < lease_end_ms_) return;
  int64_t fair = 0;  // never synced: nothing known about the cap or the nodes
  if (cap_seen_ < 0 && live_seen_ > 0) fair = -1;  // the target had no cap
  else if (cap_seen_ >= 0 && live_seen_ > 0) fair = cap_seen_ / live_seen_;
  uint64_t bytes;
  int64_t cap;
  uint32_t inflight, queued, mt_demand;
  bool auto_on, mt_hold;
  if (table_->control_sample(&bytes, &cap, &inflight, &queued, &mt_demand, &auto_on, &mt_hold) && cap != fair)
    table_->set_threshold(fair);
  share_ = fair;
}

bool NodeCoordinator::agent_step(bool woken) {
  // From the snapshot to the cap set from the reply: no credit in between (header).
  std::lock_guard<std::mutex> g(cap_mutex_);
  CoordinatorStatus st;
  std::string err;
  if (!table_->snapshot(&st, &err)) return true;  // a lock that is not let go: next tick
  const int64_t now = steady_ms();
  const int64_t in_use = int64_t{st.mt_inflight} + st.pt_inflight;
  const int64_t local_cap = st.threshold;
  const int64_t floor = std::max<int64_t>(local_cap < 0 ? 0 : local_cap, in_use);
  const int64_t need = in_use + st.queued_mt + st.queued_pt;
  const int64_t mtneed = int64_t{st.mt_inflight} + st.queued_mt;
  uint64_t lead = 0;
  for (const auto &h : st.holders)
    if (h.cls == IoClass::PT) lead = std::max(lead, h.lead);
  const bool more_mts = mtneed - local_cap > reported_mt_unmet_;
  // MTs queue beyond what the server knows: at once, not kMinGapMs after the last sync (an
  // MT that came during a sync would wait out the gap; one sync is in flight at a time).
  // MTs past the cap that do not wait (PPIOS_MT_THROTTLE=0) keep the gap.
  bool due = woken || now >= next_renew_ms_ || (cap_seen_ >= 0 && st.queued_mt > 0 && more_mts);
  if (!due && cap_seen_ >= 0 && now - last_sync_ms_ >= kMinGapMs) {
    const int64_t live = std::max<int64_t>(1, live_seen_);
    const int64_t fair = std::max<int64_t>(1, (cap_seen_ + live - 1) / live);  // as the script's fair_up
    due = share_ > floor                                                     // a lowered cap drained: hand back
          || need - local_cap > reported_unmet_ || more_mts                  // more wanted than known
          || (others_need_ > 0 && local_cap > std::max(std::min(need, fair), mtneed) &&
              now - last_sync_ms_ >= kGiveBackMs)                            // others need what we do not use
          || (mtneed > local_cap && now - last_sync_ms_ >= kRefreshMs)  // our MTs wait: fresher victims
          // The server picks victims by PT lead, only for nodes whose MTs wait: PTs starting
          // or stopping are reported at once; while another node's MTs wait (as of our last
          // sync) a lead grown is reported a few ms apart, other changes every kRefreshMs;
          // otherwise every kLeadIdleMs (these reports were 90% of the syncs in the cross bench).
          || (int64_t{st.pt_inflight} > 0) != (reported_pt_ > 0)
          || (static_cast<int64_t>(lead) > reported_lead_ && others_mt_ > 0 && now - last_sync_ms_ >= kGiveBackMs)
          || (static_cast<int64_t>(lead) != reported_lead_ &&
              now - last_sync_ms_ >= (others_mt_ > 0 ? kRefreshMs : kLeadIdleMs));
  }
  if (!due) return true;
  auto r = link_->run(options_.target,
                      {"node-sync", node_, std::to_string(node_lease_ms_), std::to_string(floor), std::to_string(need),
                       std::to_string(mtneed), std::to_string(st.pt_inflight), std::to_string(lead), epoch_},
                      &err);
  if (r && r->type == REDIS_REPLY_INTEGER && r->integer == -2) {
    // The state was lost under us: the cap we knew is stored again, then we sync at once.
    if (!adopt_known_cap(&err)) return false;
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      tell_notice("coordinator " + address_.describe() + ", target '" + options_.target +
                  "': the server lost the target's state while this job ran (FLUSHALL, eviction or a deleted key); "
                  "stored its cap again (" + (known_cap_ >= 1 ? std::to_string(known_cap_) : std::string("none")) + ")");
    next_renew_ms_ = 0;
    return true;
  }
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 8) return false;
  auto at = [&](size_t i) { return r->element[i]->integer; };
  share_ = at(0);
  const int64_t target = at(1);
  if (at(2) != last_remembered_) {
    table_->remember_site_cap(at(2));
    last_remembered_ = at(2);
  }
  cap_seen_ = known_cap_ = at(2);
  live_seen_ = at(3);
  free_seen_ = at(4);
  others_need_ = at(5);
  others_mt_ = at(6);
  credit_seq_ = at(7);
  // The record lives node_lease_ms_ from when the server ran the script, after we sent it.
  lease_end_ms_ = now + node_lease_ms_ - std::max(1, options_.lease_ms / 10);
  last_sync_ms_ = now;
  // What the server now knows we lack: a queue that shrinks and grows back within it
  // needs no new sync (no sync per queue move on a saturated node).
  reported_pt_ = st.pt_inflight;
  reported_lead_ = static_cast<int64_t>(lead);
  reported_unmet_ = std::max<int64_t>(0, need - std::max<int64_t>(target, 0));
  reported_mt_unmet_ = std::max<int64_t>(0, mtneed - std::max<int64_t>(target, 0));
  next_renew_ms_ = now + std::max(10, options_.lease_ms / 3);  // every sync renews the lease
  // target <= share_: the invariant of the header.
  if (target >= 0 && local_cap >= 0 && target < local_cap) {
    // Lowered (slots given back, or owed): but not below the MTs in flight and waiting now.
    // MTs that came during the sync keep what it was giving away (MT-first) rather than
    // wait for another sync: the recorded share covers them (it is at least the floor we
    // sent, our cap then), and our next sync reports them. A target below the MTs we
    // reported is the fairness rule across nodes (another node's MTs are below their
    // entitlement): then our MTs give the slots back as they finish.
    table_->lower_threshold(local_cap - target, /*keep_mts=*/target >= mtneed);
  } else if (target != local_cap) {
    table_->set_threshold(std::min(target, share_));
  }
  return true;
}

bool NodeCoordinator::apply_credit(const char *text) {
  char *end = nullptr;
  const long long seq = strtoll(text, &end, 10);
  if (end == text || *end != ':') return false;
  const long long k = atoll(end + 1);
  if (seq <= 0 || k <= 0 || k > kMaxThreshold) return false;
  std::lock_guard<std::mutex> g(cap_mutex_);
  if (!acting_.load() || seq <= credit_seq_) return false;
  credit_seq_ = seq;
  share_ += k;
  table_->raise_threshold(k);
  return true;
}

// Wakes the agent when the server asks this node to act (another node's MTs wait, or
// slots were given back). Only listens while this process's agent acts.
void NodeCoordinator::listener_loop() {
  std::unique_ptr<RedisLink> link;
  auto wait_stop = [this](int ms) {
    std::unique_lock<std::mutex> lk(wake_mutex_);
    return wake_cv_.wait_for(lk, std::chrono::milliseconds(ms), [this] { return stopping_; });
  };
  char timeout[16];
  snprintf(timeout, sizeof timeout, "%.3f", kListenMs / 1000.0);
  while (!wait_stop(0)) {
    if (!acting_.load()) {
      link.reset();
      if (wait_stop(std::max(5, options_.lease_ms / 4))) break;
      continue;
    }
    std::string err;
    if (!link) {
      RedisLink::Failure failure;
      link = RedisLink::connect(address_, kConnectTimeoutMs, &failure, &err);
      if (!link) {
        if (wait_stop(kReconnectMs)) break;
        continue;
      }
      link->set_timeout(kListenMs + kCommandTimeoutMs);
    }
    auto r = link->command({"BLPOP", wake_list_, timeout}, &err);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      link.reset();
      continue;
    }
    if (r->type == REDIS_REPLY_ARRAY) {
      // Our PTs owe another node's waiting MTs k slots: lower the cap now (always safe),
      // so they yield within a sub-read. Slots still in use: the segment rings the agent
      // once they are back (a sync before that could not pay anything).
      const char *msg = r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING ? r->element[1]->str : "";
      if (msg[0] == 'g') {
        long long k = atoll(msg + 1);
        if (k > 0 && k <= kMaxThreshold && table_->lower_threshold(k)) continue;
      }
      // Another node paid k slots straight into our share ("c<seq>:<k>"): raise the cap
      // now, unless our agent's last sync counted that credit already (or it has not
      // synced since taking over or losing the server): then its next sync picks it up.
      if (msg[0] == 'c' && apply_credit(msg + 1)) continue;
      {
        std::lock_guard<std::mutex> g(wake_mutex_);
        woken_ = true;
      }
      table_->ring_agent();
    }
  }
}

}  // namespace ppios
