// Redis backend client. Every acquire and release is one EVALSHA of RedisScript.h; a
// waiter blocks in BLPOP on its own list, where the releasing script pushes its grant.
// A release does not wait for its reply (RedisLink::send): the next call on the link reads it.
//
// Threads: the caller's threads (MT, PT, WTs) each borrow a RedisLink from the pool for one
// operation; the helper thread owns its own link, renews the lease, receives yield
// requests for our PTs and reconnects after an outage. Lock order: see RedisCoordinator.h.
#include "RedisCoordinator.h"

#include "CoordinatorNotices.h"
#include "WaitBounds.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <unistd.h>

namespace ppios {
namespace {

constexpr int kConnectTimeoutMs = 1000;
constexpr int kCommandTimeoutMs = 2000;

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string local_host() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string seconds_arg(int ms) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f", ms / 1000.0);
  return buf;
}

// The controller's view of the target on the server, through a link of its own (the
// controller thread is its only user). While the server cannot be reached it leads
// nothing and changes nothing; the next call reconnects.
class RedisControlPlane final : public ControlPlane {
 public:
  RedisControlPlane(const RedisAddress &address, std::string target, std::function<std::string()> process_id)
      : address_(address), target_(std::move(target)), process_id_(std::move(process_id)) {}

  bool lead(int lease_ms) override {
    proc_ = process_id_();
    auto r = call({"ctl-lead", proc_, std::to_string(lease_ms)});
    return r && r->integer == 1;
  }
  void resign() override {
    if (!proc_.empty()) call({"ctl-resign", proc_});
  }
  bool sample(Sample *out) override {
    auto r = call({"ctl-sample"});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 7) return false;
    out->bytes = static_cast<uint64_t>(r->element[0]->integer);
    out->cap = r->element[1]->integer;
    out->inflight = static_cast<uint32_t>(r->element[2]->integer);
    out->queued = static_cast<uint32_t>(r->element[3]->integer);
    out->auto_on = r->element[4]->integer != 0;
    out->mt_hold = r->element[5]->integer != 0;
    out->mt_demand = static_cast<uint32_t>(r->element[6]->integer);
    return true;
  }
  void set_cap(int64_t k, bool hold_mts) override { call({"ctl-set", std::to_string(k), hold_mts ? "1" : "0"}); }
  void publish_curve(const std::map<int, double> &mibps_by_k) override {
    std::string arg;
    char buf[64];
    for (const auto &[k, mibps] : mibps_by_k) {
      snprintf(buf, sizeof buf, "%s%d:%.3f", arg.empty() ? "" : ",", k, mibps);
      arg += buf;
    }
    call({"curve-put", arg});
  }
  std::map<int, double> stored_curve() override {
    // {auto, hold, controller, k1, mibps1, ...}, all strings (RedisScript.h, status-auto).
    std::map<int, double> curve;
    auto r = call({"status-auto"});
    if (!r || r->type != REDIS_REPLY_ARRAY) return curve;
    for (size_t i = 3; i + 1 < r->elements; i += 2) {
      const redisReply *k = r->element[i], *v = r->element[i + 1];
      if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
        curve[std::atoi(std::string(k->str, k->len).c_str())] = std::atof(std::string(v->str, v->len).c_str());
    }
    return curve;
  }

 private:
  RedisReplyPtr call(std::initializer_list<std::string_view> args) {
    std::string err;
    if (!link_ || link_->broken()) {
      RedisLink::Failure failure;
      link_ = RedisLink::connect(address_, kConnectTimeoutMs, &failure, &err);
      if (!link_) return nullptr;
    }
    auto r = link_->run(target_, args, &err);
    if (!r) link_.reset();
    return r;
  }

  const RedisAddress address_;
  const std::string target_;
  const std::function<std::string()> process_id_;
  std::string proc_;
  std::unique_ptr<RedisLink> link_;
};

}  // namespace

std::unique_ptr<Coordinator> RedisCoordinator::create(const CoordinatorOptions &options, std::string *error) {
  RedisAddress address;
  std::string problem;
  if (!RedisAddress::parse(options.address, &address, &problem)) {
    if (error) *error = "PPIOS_COORDINATOR='" + redact_address(options.address) + "': " + problem;
    return nullptr;
  }
  // Connect first: a configuration error must stop the program before anything is created.
  RedisLink::Failure failure;
  auto link = RedisLink::connect(address, kConnectTimeoutMs, &failure, &problem);
  if (failure == RedisLink::Failure::Fatal) {
    if (error) *error = "coordinator " + address.describe() + ": " + problem;
    return nullptr;
  }
  // The stand-in only mirrors the stored cap; the cap is learned on the server.
  CoordinatorOptions local = options;
  local.auto_threshold = false;
  auto fallback = ShmCoordinator::create(local, error, /*quiet_threshold_conflict=*/true);
  if (!fallback) return nullptr;
  std::unique_ptr<RedisCoordinator> c(new RedisCoordinator(options, address, std::move(fallback)));
  if (link && c->go_online(*link, &problem))
    c->return_link(std::move(link), c->link_epoch_);
  else
    c->go_offline(problem);
  c->helper_ = std::thread([raw = c.get()] { raw->helper_loop(); });
  if (options.auto_threshold)
    c->controller_ = std::make_unique<AutoThreshold>(
        std::make_unique<RedisControlPlane>(address, options.target, [raw = c.get()] { return raw->process_id(); }),
        options.lease_ms);
  return c;
}

RedisCoordinator::RedisCoordinator(const CoordinatorOptions &options, const RedisAddress &address,
                                   std::unique_ptr<ShmCoordinator> fallback)
    : options_(options),
      address_(address),
      host_pid_(local_host() + "|" + std::to_string(getpid())),
      lease_arg_(std::to_string(options.lease_ms)),
      fallback_(std::move(fallback)) {}

RedisCoordinator::~RedisCoordinator() {
  controller_.reset();
  {
    std::lock_guard<std::mutex> g(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (helper_.joinable()) helper_.join();
  if (online_.load()) {
    // Give our slots and queue places back now rather than after the lease.
    uint64_t epoch;
    if (auto link = take_link(&epoch)) {
      std::string err;
      link->run(options_.target, {"unregister", process_id()}, &err);
    }
  }
}

std::string RedisCoordinator::process_id() const {
  std::lock_guard<std::mutex> g(identity_mutex_);
  return process_id_;
}

// Registers a fresh incarnation of this process and adopts or checks the threshold.
// A new incarnation after every outage means that whatever the server still holds for
// the old one (a grant that raced with the failure) is reaped with its lease.
std::string RedisCoordinator::state_epoch() const {
  std::lock_guard<std::mutex> g(identity_mutex_);
  return epoch_;
}

bool RedisCoordinator::go_online(RedisLink &link, std::string *error, const std::string *if_epoch) {
  std::lock_guard<std::mutex> online(online_mutex_);
  if (if_epoch && *if_epoch != state_epoch()) return true;  // rebuilt already
  std::string proc, seen_epoch;
  {
    std::lock_guard<std::mutex> g(identity_mutex_);
    seen_epoch = epoch_;
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    process_id_ = local_host() + "/" + std::to_string(getpid()) + "/" + std::to_string(++incarnation_) + "/" +
                  std::to_string(rng() % 1000000);
    proc = process_id_;
  }
  auto r = link.run(options_.target, {"renew", proc, lease_arg_, host_pid_}, error);
  if (!r) return false;
  // The cap in force before (a server that lost it, or restarted empty, gets it back):
  // ours, else the one the node's stand-in segment remembers (a process that started
  // while the server was gone saw none), else our PPIOS_THRESHOLD.
  ShmSlotTable *stand_in = fallback_->table();
  const int64_t remembered = stand_in ? stand_in->site_cap() : -1;
  int64_t known = known_cap_.load();
  if (known < 1) known = remembered;
  r = link.run(options_.target,
               {"adopt", std::to_string(known >= 1 ? known : options_.threshold), options_.auto_threshold ? "1" : "0"},
               error);
  if (!r) return false;
  int64_t stored = r->integer;
  remember_cap(stored);
  // The epoch of the state joined. "1" and the epoch this process saw before: if the state
  // has another one, it was lost under us: no new grant for a lease from the new epoch
  // (RedisScript.h). The same one (back from an outage of our own) is no loss.
  auto e = link.run(options_.target, {"epoch", seen_epoch.empty() ? "0" : "1", lease_arg_, seen_epoch}, error);
  if (!e) return false;
  if (e->type != REDIS_REPLY_STRING) {
    *error = "the server's coordinator script gave no epoch";
    return false;
  }
  {
    std::lock_guard<std::mutex> g(identity_mutex_);
    epoch_.assign(e->str, e->len);
  }
  if (options_.threshold >= 0 && stored != options_.threshold && !warned_threshold_.exchange(true))
    tell_threshold_conflict(options_.threshold, stored, options_.target);
  // Should the server go away, the node-local stand-in starts from the same cap.
  fallback_->adopt_threshold(stored);
  online_.store(true);
  return true;
}

void RedisCoordinator::remember_cap(int64_t cap) {
  if (known_cap_.exchange(cap) == cap) return;
  if (ShmSlotTable *stand_in = fallback_->table()) stand_in->remember_site_cap(cap);
}

void RedisCoordinator::rebuild_after_loss(RedisLink &link, const std::string &seen_epoch) {
  std::string err;
  if (!go_online(link, &err, &seen_epoch)) {
    go_offline(err);
    return;
  }
  if (!warned_lost_.exchange(true))
    tell_notice("coordinator " + address_.describe() + ", target '" + options_.target +
                "': the server lost the target's state while this job ran (FLUSHALL, eviction or a deleted key); "
                "rebuilt it (cap " + (known_cap_.load() >= 1 ? std::to_string(known_cap_.load()) : std::string("none")) +
                "), no new grant for one lease");
}

void RedisCoordinator::go_offline(const std::string &reason) {
  online_.store(false);
  {
    std::lock_guard<std::mutex> g(pool_mutex_);
    idle_links_.clear();
    ++link_epoch_;
  }
  if (!warned_offline_.exchange(true))
    tell_notice("coordinator " + address_.describe() + " unreachable (" + reason +
                "); using node-local scheduling until it is back");
}

std::unique_ptr<RedisLink> RedisCoordinator::take_link(uint64_t *epoch) {
  {
    std::lock_guard<std::mutex> g(pool_mutex_);
    *epoch = link_epoch_;
    if (!idle_links_.empty()) {
      auto link = std::move(idle_links_.back());
      idle_links_.pop_back();
      return link;
    }
  }
  RedisLink::Failure failure;
  std::string problem;
  return RedisLink::connect(address_, kConnectTimeoutMs, &failure, &problem);
}

void RedisCoordinator::return_link(std::unique_ptr<RedisLink> link, uint64_t epoch) {
  if (!link || link->broken()) return;
  std::lock_guard<std::mutex> g(pool_mutex_);
  if (epoch == link_epoch_) idle_links_.push_back(std::move(link));
}

RedisCoordinator::Attempt RedisCoordinator::acquire_on_server(IoClass cls, uint64_t lead, uint64_t local_id,
                                                              WaitClock *wait) {
  uint64_t epoch;
  auto link = take_link(&epoch);
  if (!link) {
    go_offline("cannot connect");
    return Attempt::Failed;
  }
  const std::string proc = process_id();
  const std::string seen_epoch = state_epoch();
  const std::string holder = proc + "#" + std::to_string(local_id);
  tickets_.find(local_id)->holder = holder;
  std::string err;
  auto fail = [&]() {
    go_offline(err);
    return Attempt::Failed;
  };
  const char *cls_arg = cls == IoClass::MT ? "M" : "P";
  const std::string lead_arg = std::to_string(cls == IoClass::MT ? 0 : lead);
  // The MtAtCap rule as the script's queue entries carry it (RedisScript.h).
  const char *throttle_arg = options_.mt_at_cap == MtAtCap::Wait ? "1" : options_.mt_at_cap == MtAtCap::Pass ? "0" : "L";
  auto r = link->run(options_.target,
                     {"acquire", proc, lease_arg_, host_pid_, holder, cls_arg, lead_arg, throttle_arg, seen_epoch}, &err);
  if (!r) return fail();
  auto lost_state = [&]() {  // -2: ask again once the state is rebuilt
    rebuild_after_loss(*link, seen_epoch);
    return_link(std::move(link), epoch);
    return Attempt::Lost;
  };
  if (r->integer == -2) return lost_state();
  if (r->integer == 1) {
    return_link(std::move(link), epoch);
    return Attempt::Granted;
  }
  // Queued. Wake up at least every poll_ms to run "check", which reaps dead holders and
  // tells whether the queue moves. The wait is bounded as on every backend (WaitBounds.h):
  // past the bound the waiter withdraws and the access proceeds without a slot.
  const int poll_ms = std::clamp(options_.lease_ms / 4, 10, 250);
  const WaitBounds bounds{options_.lease_ms};
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  if (!wait->started) {
    wait->started = true;
    wait->start = wait->moved_at = Clock::now();
  }
  const std::string wake_list = RedisLink::key_prefix(options_.target) + "w:" + holder;
  link->set_timeout(poll_ms + kCommandTimeoutMs);
  Attempt result;
  for (;;) {
    auto w = link->command({"BLPOP", wake_list, seconds_arg(poll_ms)}, &err);
    if (!w || w->type == REDIS_REPLY_ERROR) {
      if (w) err = std::string(w->str, w->len);
      return fail();
    }
    if (w->type == REDIS_REPLY_ARRAY) {
      result = Attempt::Granted;
      break;
    }
    auto c = link->run(options_.target, {"check", holder, cls_arg, lead_arg, throttle_arg, seen_epoch}, &err);
    if (!c) return fail();
    if (c->type == REDIS_REPLY_INTEGER && c->integer == -2) {
      link->set_timeout(kCommandTimeoutMs);
      return lost_state();
    }
    if (c->type == REDIS_REPLY_INTEGER && c->integer == 1) {
      result = Attempt::Granted;
      break;
    }
    if (c->type == REDIS_REPLY_INTEGER && c->integer == -1) {
      result = Attempt::Lost;
      break;
    }
    // Still waiting: {0, grants handed to waiters of the target so far}. The first answer
    // is the baseline; the queue moved when a later one differs.
    if (c->type == REDIS_REPLY_ARRAY && c->elements == 2 && c->element[1]->type == REDIS_REPLY_INTEGER &&
        c->element[1]->integer != wait->grants_seen) {
      if (wait->grants_seen >= 0) wait->moved_at = Clock::now();
      wait->grants_seen = c->element[1]->integer;
    }
    if (since(wait->moved_at) >= bounds.stall_ms(failing_open_.load(), poll_ms) ||
        since(wait->start) >= bounds.max_wait_ms()) {
      auto w = link->run(options_.target, {"withdraw", holder, cls_arg, lead_arg, throttle_arg}, &err);
      if (!w) return fail();
      result = w->integer == 1 ? Attempt::Granted : Attempt::Unscheduled;  // 1: the grant came first
      break;
    }
  }
  link->set_timeout(kCommandTimeoutMs);
  return_link(std::move(link), epoch);
  return result;
}

// Slots held on one side are invisible to the other side's cap. Switching sides, a grant
// waits until this process holds none on the other side (their accesses end within a
// sub-read), so the process never holds more than the cap across the switch. Bounded by
// the lease: a holder stuck longer would lose its slot to the lease anyway.
void RedisCoordinator::enter_side(int side) {
  std::unique_lock<std::mutex> lock(side_mutex_);
  side_cv_.wait_for(lock, std::chrono::milliseconds(options_.lease_ms),
                    [&] { return side_held_[1 - side] == 0; });
  side_held_[side]++;
}

void RedisCoordinator::leave_side(int side) {
  std::lock_guard<std::mutex> lock(side_mutex_);
  side_held_[side]--;
  side_cv_.notify_all();
}

SlotTicket RedisCoordinator::acquire(IoClass cls, uint64_t lead) {
  uint64_t id;
  while ((id = tickets_.allocate()) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  WaitClock wait;
  while (online_.load()) {
    enter_side(0);
    Attempt a = wait.started && std::chrono::steady_clock::now() - wait.start >=
                                    std::chrono::milliseconds(WaitBounds{options_.lease_ms}.max_wait_ms())
                    ? Attempt::Unscheduled  // lost again and again: the bound holds across attempts
                    : acquire_on_server(cls, lead, id, &wait);
    if (a == Attempt::Granted) {
      if (failing_open_.load(std::memory_order_relaxed)) failing_open_.store(false);
      return SlotTicket{id, cls};
    }
    if (a == Attempt::Unscheduled) {
      // Counted on the server's side (side 0) until released, as the access it stands for.
      failing_open_.store(true);
      tickets_.find(id)->unscheduled = true;
      if (!warned_unscheduled_.exchange(true))
        tell_notice("coordinator " + address_.describe() + ", target '" + options_.target +
                    "': no slot was granted on the target for twice the lease (holders that never finish?); "
                    "the access proceeds without a slot");
      return SlotTicket{id, cls};
    }
    leave_side(0);
    if (a == Attempt::Failed) break;
    // Lost: the server forgot our waiter (lease expired or reset); ask again.
  }
  enter_side(1);
  SlotTicket inner = fallback_->acquire(cls, lead);
  LocalTicketTable::Entry *e = tickets_.find(id);
  e->fallback = true;
  e->fallback_ticket = inner.id;
  return SlotTicket{id, cls};
}

void RedisCoordinator::release(SlotTicket &ticket) {
  LocalTicketTable::Entry *e = tickets_.find(ticket.id);
  if (!e) {
    ticket.id = 0;
    return;
  }
  leave_side(e->fallback ? 1 : 0);
  if (e->fallback) {
    SlotTicket inner{e->fallback_ticket, ticket.cls};
    fallback_->release(inner);
  } else if (e->unscheduled) {
    // Nothing is held: the wait passed its bound and the waiter withdrew.
  } else if (online_.load()) {
    uint64_t epoch;
    std::string err;
    auto link = take_link(&epoch);
    if (!link) {
      go_offline("cannot connect");
    } else if (!link->send(options_.target,
                           {"release", e->holder, ticket.cls == IoClass::MT ? "M" : "P", std::to_string(ticket.bytes),
                            process_id()},
                           &err)) {
      // One-way: the server frees the slot (and hands it on) as soon as it reads this; the
      // reply is checked by the next call on this link. Not waiting halves the wake-ups of
      // an uncontended acquire+release pair.
      go_offline(err);
    } else {
      return_link(std::move(link), epoch);
    }
  }
  // Offline: the server reaps the slot with our old incarnation's lease.
  tickets_.free(ticket.id);
  ticket.id = 0;
  ticket.bytes = 0;
}

// A release is sent one-way and its reply read by the link's next user. A link that sits
// idle in the pool would never read it, so a release the server refused (NOSCRIPT after a
// SCRIPT FLUSH; settle() re-runs it) or a dead connection would go unnoticed: the helper
// settles idle links once per renew period.
void RedisCoordinator::settle_idle_links() {
  std::vector<std::unique_ptr<RedisLink>> links;
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> g(pool_mutex_);
    links.swap(idle_links_);
    epoch = link_epoch_;
  }
  std::string err;
  bool failed = false;
  for (auto &link : links) {
    if (failed || !link->settle(&err)) {
      failed = true;
      continue;
    }
    return_link(std::move(link), epoch);
  }
  if (failed) go_offline(err);
}

bool RedisCoordinator::yield_requested(const SlotTicket &ticket) {
  LocalTicketTable::Entry *e = tickets_.find(ticket.id);
  if (!e) return false;
  if (e->fallback) return fallback_->yield_requested(SlotTicket{e->fallback_ticket, ticket.cls});
  return e->yield.load(std::memory_order_acquire) != 0;
}

void RedisCoordinator::apply_yield_request(const std::string &holder) {
  size_t hash = holder.rfind('#');
  if (hash == std::string::npos || holder.compare(0, hash, process_id()) != 0) return;
  uint64_t id = std::strtoull(holder.c_str() + hash + 1, nullptr, 10);
  if (LocalTicketTable::Entry *e = tickets_.find(id)) e->yield.store(1, std::memory_order_release);
}

// Renews the lease every third of it, receives yield requests (BLPOP on our control list,
// short timeout so shutdown is quick) and reconnects after an outage.
void RedisCoordinator::helper_loop() {
  const int renew_ms = std::max(10, options_.lease_ms / 3);
  const int poll_ms = std::min(100, renew_ms);
  std::unique_ptr<RedisLink> link;
  int64_t next_renew = steady_ms() + renew_ms;
  auto should_stop = [this](int wait_ms) {
    std::unique_lock<std::mutex> lk(stop_mutex_);
    return stop_cv_.wait_for(lk, std::chrono::milliseconds(wait_ms), [this] { return stopping_; });
  };
  while (!should_stop(0)) {
    std::string err;
    if (!online_.load()) {
      link.reset();
      if (should_stop(250)) break;
      RedisLink::Failure failure;
      link = RedisLink::connect(address_, 500, &failure, &err);
      if (link && go_online(*link, &err)) next_renew = steady_ms() + renew_ms;
      else link.reset();
      continue;
    }
    if (!link) {
      RedisLink::Failure failure;
      link = RedisLink::connect(address_, kConnectTimeoutMs, &failure, &err);
      if (!link) {
        go_offline(err);
        continue;
      }
    }
    const std::string proc = process_id();
    if (steady_ms() >= next_renew) {
      // Re-registers under the same id if the lease was lost (a long stall).
      const std::string seen_epoch = state_epoch();
      auto r = link->run(options_.target, {"renew", proc, lease_arg_, host_pid_, seen_epoch}, &err);
      if (!r) {
        go_offline(err);
        link.reset();
        continue;
      }
      if (r->type == REDIS_REPLY_INTEGER && r->integer == -2) {
        rebuild_after_loss(*link, seen_epoch);
        continue;
      }
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_INTEGER)
        remember_cap(r->element[1]->integer);
      next_renew = steady_ms() + renew_ms;
      settle_idle_links();
    }
    link->set_timeout(poll_ms + kCommandTimeoutMs);
    auto r = link->command({"BLPOP", RedisLink::key_prefix(options_.target) + "ctl:" + proc, seconds_arg(poll_ms)},
                           &err);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      go_offline(r ? std::string(r->str, r->len) : err);
      link.reset();
      continue;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2)
      apply_yield_request(std::string(r->element[1]->str, r->element[1]->len));
  }
}

}  // namespace ppios
