// The cluster-wide backend: slots are arbitrated by a Lua script on a redis-server shared
// by every process of every job that uses the same target. While the server cannot be
// reached, the node-local ShmCoordinator stands in (one warning), and a helper thread
// reconnects when the server is back.
#pragma once

#include "AutoThreshold.h"
#include "LocalTicketTable.h"
#include "RedisAddress.h"
#include "RedisLink.h"
#include "ShmCoordinator.h"
#include "ppios/Coordinator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ppios {

class RedisCoordinator final : public Coordinator {
 public:
  static std::unique_ptr<Coordinator> create(const CoordinatorOptions &options, std::string *error);
  ~RedisCoordinator() override;

  SlotTicket acquire(IoClass cls, uint64_t lead) override;
  void release(SlotTicket &ticket) override;
  bool yield_requested(const SlotTicket &ticket) override;
  const char *name() const override { return "redis"; }

 private:
  RedisCoordinator(const CoordinatorOptions &options, const RedisAddress &address,
                   std::unique_ptr<ShmCoordinator> fallback);

  // Redis-side acquire. Failed: the server failed us (the caller falls back). Unscheduled:
  // the wait passed its bound (WaitBounds.h) and the waiter withdrew: the access proceeds
  // without a slot. `wait` carries the wait's clock across attempts (a Lost waiter asks again).
  enum class Attempt { Granted, Lost, Failed, Unscheduled };
  struct WaitClock {
    bool started = false;
    std::chrono::steady_clock::time_point start, moved_at;  // queued first; the grant count last moved
    int64_t grants_seen = -1;
  };
  Attempt acquire_on_server(IoClass cls, uint64_t lead, uint64_t local_id, WaitClock *wait);
  // Registers a new incarnation, stores the cap again if the server has none (the one in
  // force before, else PPIOS_THRESHOLD) and reads the state's epoch. With `if_epoch`, only
  // if the epoch is still that one (a rebuild after a loss that another thread may have
  // done already); true then when nothing was to be done.
  bool go_online(RedisLink &link, std::string *error, const std::string *if_epoch = nullptr);
  // The server answered -2: the state it held for the target is not the one this process
  // joined (FLUSHALL, eviction, a deleted key). Rebuilds it (go_online) once per loss.
  // The cap the server holds, as this process saw it, also kept in the node's stand-in
  // segment (ShmSlotTable::site_cap) for processes that start while the server is gone.
  void remember_cap(int64_t cap);
  void rebuild_after_loss(RedisLink &link, const std::string &seen_epoch);
  std::string state_epoch() const;
  void go_offline(const std::string &reason);
  std::unique_ptr<RedisLink> take_link(uint64_t *epoch);
  void return_link(std::unique_ptr<RedisLink> link, uint64_t epoch);
  std::string process_id() const;
  std::string holder_id(const std::string &proc, uint64_t local_id) const;
  void helper_loop();
  void apply_yield_request(const std::string &holder);
  void settle_idle_links();

  const CoordinatorOptions options_;
  const RedisAddress address_;
  const std::string host_pid_;  // "host|pid" as status shows it
  const std::string lease_arg_;  // options_.lease_ms as the scripts take it
  std::unique_ptr<ShmCoordinator> fallback_;
  LocalTicketTable tickets_;

  std::atomic<bool> online_{false};
  // Tickets of this process held or being acquired now, on the server (side 0) and in
  // the node-local fallback (side 1). Neither side's cap sees the other's slots: across a
  // switch (the server lost, or back) a process enters a side only once it holds nothing
  // on the other (see enter_side). Guarded by side_mutex_.
  std::mutex side_mutex_;
  std::condition_variable side_cv_;
  int side_held_[2] = {0, 0};
  void enter_side(int side);
  void leave_side(int side);
  std::atomic<bool> warned_offline_{false};
  std::atomic<bool> warned_unscheduled_{false};
  std::atomic<bool> failing_open_{false};  // the last wait passed its bound; cleared at a grant
  std::atomic<bool> warned_threshold_{false};

  // Lock order: identity_mutex_ and pool_mutex_ are leaves (never held together, never
  // held across a network call); stop_mutex_ only guards stopping_; online_mutex_ is taken
  // by go_online only, across its calls, before identity_mutex_.
  mutable std::mutex identity_mutex_;
  std::string process_id_;  // "<host>/<pid>/<incarnation>"; a new incarnation after every outage
  uint64_t incarnation_ = 0;
  std::string epoch_;  // of the state this process joined ("": none seen yet)
  // go_online runs one at a time: the helper after an outage, a thread that found a loss.
  std::mutex online_mutex_;
  // The cap in force when last seen (-1: none), stored again should the server lose it.
  std::atomic<int64_t> known_cap_{-2};  // -2: none seen yet (remember_cap writes the first one through)
  std::atomic<bool> warned_lost_{false};

  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<RedisLink>> idle_links_;
  uint64_t link_epoch_ = 0;  // links from before an outage are not reused

  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread helper_;
  std::unique_ptr<AutoThreshold> controller_;  // PPIOS_THRESHOLD=auto only; stopped first
};

}  // namespace ppios
