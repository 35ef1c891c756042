// What the redis backend does when the server is missing, misconfigured or lost mid-run.
#include "RedisLink.h"
#include "RedisServer.h"
#include "ppios/Coordinator.h"
#include "ppios/CoordinatorAdmin.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace ppios {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string unique_target(const char *what) {
  static int n = 0;
  return std::string("fail-") + what + "-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

CoordinatorOptions opts(const std::string &address, const std::string &target, int64_t threshold, int lease_ms = 1000) {
  CoordinatorOptions o;
  o.address = address;
  o.target = target;
  o.threshold = threshold;
  o.lease_ms = lease_ms;
  return o;
}

void forget(const CoordinatorOptions &o) {
  std::string err;
  if (auto a = make_coordinator_admin(o, &err)) a->reset(&err);
  CoordinatorOptions shm = o;
  shm.address = "shm";
  if (auto a = make_coordinator_admin(shm, &err)) a->reset(&err);
}

size_t count(const std::string &haystack, const std::string &needle) {
  size_t n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) ++n;
  return n;
}

TEST(RedisFailure, MessagesNeverShowThePasswordNorDoubleThePrefix) {
  for (const char *bad : {"redis://:s3cret@host:notaport", "redis://user:s3cret@", "unix://rel.sock?password=s3cret"}) {
    std::string msg = validate_coordinator_address(bad);
    EXPECT_EQ(msg.find("s3cret"), std::string::npos) << msg;
    std::string err;
    EXPECT_EQ(make_coordinator(opts(bad, "x", -1), &err), nullptr);
    EXPECT_EQ(err.find("s3cret"), std::string::npos) << err;
    EXPECT_NE(err.rfind("ppios:", 0), 0u) << "the runtime adds the prefix itself: " << err;
  }
}

// The release script frees a slot only for the process that holds it and with the class it
// was granted in; stored counters below zero are read as zero.
TEST(RedisFailure, ReleaseChecksOwnerAndClassAndCountersNeverGoNegative) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  RedisAddress address;
  std::string err;
  ASSERT_TRUE(RedisAddress::parse(server.address(), &address, &err)) << err;
  RedisLink::Failure failure;
  auto link = RedisLink::connect(address, 2000, &failure, &err);
  ASSERT_TRUE(link) << err;
  const std::string target = unique_target("owner"), proc = "h/1/1/7", id = proc + "#1";
  auto run = [&](std::initializer_list<std::string_view> args) {
    auto r = link->run(target, args, &err);
    EXPECT_TRUE(r) << err;
    return r ? r->integer : -99;
  };
  auto counters = [&] {
    auto a = make_coordinator_admin(opts(server.address(), target, -1), &err);
    CoordinatorStatus s;
    EXPECT_TRUE(a && a->status(&s, &err)) << err;
    return std::to_string(s.mt_inflight) + "," + std::to_string(s.pt_inflight);
  };
  run({"renew", proc, "3000", "h|1"});
  run({"set-threshold", "2"});
  ASSERT_EQ(run({"acquire", proc, "3000", "h|1", id, "P", "1", "0"}), 1);
  EXPECT_EQ(run({"release", id, "P", "0", "other/2/1/1"}), -1) << "another process freed our slot";
  EXPECT_EQ(run({"release", id, "M", "0", proc}), -1) << "a release with the wrong class was accepted";
  EXPECT_EQ(counters(), "0,1");
  EXPECT_EQ(run({"release", id, "P", "0", proc}), 1);
  EXPECT_EQ(counters(), "0,0");
  EXPECT_EQ(run({"release", id, "P", "0", proc}), 0) << "release is idempotent";
  // Counters forged below zero (or drifted) must not let requests queue forever.
  link->command({"HSET", RedisLink::key_prefix(target) + "state", "m", "-1", "p", "-5"}, &err);
  EXPECT_EQ(run({"acquire", proc, "3000", "h|1", proc + "#2", "P", "1", "0"}), 1);
  EXPECT_EQ(run({"acquire", proc, "3000", "h|1", proc + "#3", "P", "1", "0"}), 1);
  EXPECT_EQ(run({"acquire", proc, "3000", "h|1", proc + "#4", "P", "1", "0"}), 0) << "the cap 2 no longer binds";
  EXPECT_EQ(counters(), "0,2");
}

TEST(RedisFailure, BadAddressesAreRejectedWithTheAcceptedForms) {
  for (const char *bad : {"redis://", "redis://host:notaport", "redis://host:70000", "redis://h:1/x",
                          "unix://relative.sock", "http://x", "unix:///a.sock?bogus=1", ""}) {
    std::string msg = validate_coordinator_address(bad);
    EXPECT_NE(msg.find("use shm, redis://"), std::string::npos) << bad << ": " << msg;
    std::string err;
    EXPECT_EQ(make_coordinator(opts(bad, "x", -1), &err), nullptr) << bad;
    EXPECT_FALSE(err.empty());
  }
  for (const char *good : {"shm", "redis://localhost", "redis://:pw@10.0.0.1:6380/2", "redis://[::1]:6379",
                           "unix:///run/r.sock", "unix:///run/r.sock?db=3&password=x"})
    EXPECT_EQ(validate_coordinator_address(good), "") << good;
}

TEST(RedisFailure, WrongPasswordIsAClearErrorAtStart) {
  test::RedisServer server(true, "s3cret");
  ASSERT_TRUE(server.start());
  std::string port = std::to_string(server.port());
  std::string err;
  EXPECT_EQ(make_coordinator(opts("redis://:wrong@127.0.0.1:" + port, "t", -1), &err), nullptr);
  EXPECT_NE(err.find("authentication failed"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(make_coordinator(opts("redis://127.0.0.1:" + port, "t", -1), &err), nullptr);
  EXPECT_NE(err.find("password"), std::string::npos) << err;
  auto o = opts(server.address(), unique_target("pw"), 2);
  auto ok = make_coordinator(o, &err);
  ASSERT_TRUE(ok) << err;
  SlotTicket t = ok->acquire(IoClass::PT, 1);
  EXPECT_TRUE(t.valid());
  ok->release(t);
  ok.reset();
  forget(o);
}

TEST(RedisFailure, WrongDatabaseIsAClearErrorAtStart) {
  test::RedisServer server(true);
  ASSERT_TRUE(server.start());
  std::string err;
  EXPECT_EQ(make_coordinator(opts("redis://127.0.0.1:" + std::to_string(server.port()) + "/999", "t", -1), &err),
            nullptr);
  EXPECT_NE(err.find("cannot select the database"), std::string::npos) << err;
}

TEST(RedisFailure, UnreachableAtStartFallsBackToNodeLocalAndWarnsOnce) {
  auto o = opts("redis://127.0.0.1:" + std::to_string(test::free_tcp_port()), unique_target("down"), 1);
  std::string err;
  testing::internal::CaptureStderr();
  auto start = Clock::now();
  auto c = make_coordinator(o, &err);
  ASSERT_TRUE(c) << err;
  EXPECT_LT(Clock::now() - start, 3s);
  // The node-local stand-in enforces the cap.
  SlotTicket a = c->acquire(IoClass::PT, 1);
  auto b = std::async(std::launch::async, [&] { return c->acquire(IoClass::PT, 1); });
  EXPECT_EQ(b.wait_for(300ms), std::future_status::timeout);
  c->release(a);
  SlotTicket bt = b.get();
  c->release(bt);
  std::this_thread::sleep_for(600ms);  // the helper retries in the background: still no second warning
  c.reset();
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(out, "unreachable"), 1u) << out;
  EXPECT_NE(out.find("node-local"), std::string::npos) << out;
  forget(o);
}

// Clients hammer while the server is killed and then started again on the same socket:
// they keep going on the node-local stand-in (cap intact), warn once, and come back.
TEST(RedisFailure, ServerLostMidRunAndRestarted) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  auto o = opts(server.address(), unique_target("restart"), 2, 600);
  std::string err;
  testing::internal::CaptureStderr();
  auto c = make_coordinator(o, &err);
  ASSERT_TRUE(c) << err;
  std::atomic<int> inflight{0}, violations{0};
  std::atomic<int> phase{0};  // 0 up, 1 down, 2 back
  std::atomic<long> ops[3] = {0, 0, 0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&] {
      while (!stop) {
        SlotTicket t = c->acquire(IoClass::PT, 1);
        if (inflight.fetch_add(1) + 1 > 2) violations.fetch_add(1);
        std::this_thread::sleep_for(200us);
        inflight.fetch_sub(1);
        c->release(t);
        ops[phase.load()].fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(500ms);
  phase = 1;
  server.kill_hard();
  std::this_thread::sleep_for(1000ms);
  ASSERT_TRUE(server.start());
  phase = 2;
  // The helper reconnects within a few hundred ms and registers again.
  auto admin = make_coordinator_admin(o, &err);
  ASSERT_TRUE(admin) << err;
  CoordinatorStatus s;
  auto deadline = Clock::now() + 5s;
  bool back = false;
  while (Clock::now() < deadline && !back) {
    back = admin->status(&s, &err) && s.processes >= 1;
    if (!back) std::this_thread::sleep_for(50ms);
  }
  long ops_before_back_seen = ops[2].load();
  std::this_thread::sleep_for(500ms);
  stop = true;
  for (auto &t : clients) t.join();
  EXPECT_TRUE(back) << "the client never registered with the restarted server";
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(ops[0].load(), 50);
  EXPECT_GT(ops[1].load(), 50) << "clients stalled while the server was down";
  EXPECT_GT(ops[2].load(), ops_before_back_seen) << "clients stalled after the restart";
  ASSERT_TRUE(admin->status(&s, &err)) << err;
  EXPECT_EQ(s.threshold, 2) << "the threshold was not stored again after the restart";
  EXPECT_GT(s.max_inflight_seen, 0u) << "no slot was granted by the restarted server";
  c.reset();
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(out, "unreachable"), 1u) << out;
  forget(o);
}

// A process that stalls past its lease loses its slots, and afterwards registers again.
TEST(RedisFailure, StalledProcessLosesItsLeaseAndRegistersAgain) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  auto o = opts(server.address(), unique_target("stall"), 1, 300);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    std::string err;
    auto c = make_coordinator(o, &err);
    if (!c) _exit(3);
    SlotTicket t = c->acquire(IoClass::PT, 1);
    char x = 'r';
    if (write(ready[1], &x, 1) != 1) _exit(4);
    pause();
    _exit(t.valid() ? 0 : 5);
  }
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  kill(child, SIGSTOP);
  std::string err;
  auto c = make_coordinator(o, &err);
  ASSERT_TRUE(c) << err;
  auto got = std::async(std::launch::async, [&] { return c->acquire(IoClass::PT, 1); });
  EXPECT_EQ(got.wait_for(2000ms), std::future_status::ready) << "the stalled holder's slot never came back";
  kill(child, SIGCONT);
  auto admin = make_coordinator_admin(o, &err);
  CoordinatorStatus s;
  auto deadline = Clock::now() + 3s;
  bool both = false;
  while (Clock::now() < deadline && !both) {
    both = admin->status(&s, &err) && s.processes == 2;
    if (!both) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(both) << "the resumed process did not register again";
  SlotTicket t = got.get();
  c->release(t);
  kill(child, SIGKILL);
  int st;
  waitpid(child, &st, 0);
  close(ready[0]);
  close(ready[1]);
  c.reset();
  forget(o);
}

// A release is sent without waiting for its reply. If the server has lost the script
// (SCRIPT FLUSH on a live server), the release is refused with NOSCRIPT; it must still be
// carried out, even when this process never uses that connection again.
TEST(RedisFailure, OneWayReleaseIsRunAgainAfterScriptFlush) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  auto o = opts(server.address(), unique_target("flush"), 1, 600);
  std::string err;
  auto holder = make_coordinator(o, &err);
  ASSERT_TRUE(holder) << err;
  auto other = make_coordinator(o, &err);
  ASSERT_TRUE(other) << err;
  SlotTicket t = holder->acquire(IoClass::PT, 1);
  ASSERT_TRUE(t.valid());
  auto waiter = std::async(std::launch::async, [&] { return other->acquire(IoClass::PT, 1); });
  EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout);
  redisContext *ctx = redisConnectUnix(server.socket_path().c_str());
  ASSERT_TRUE(ctx && !ctx->err);
  auto *r = static_cast<redisReply *>(redisCommand(ctx, "SCRIPT FLUSH"));
  ASSERT_TRUE(r);
  freeReplyObject(r);
  redisFree(ctx);
  // Refused with NOSCRIPT (unless a renew or check of either process reloaded the script in
  // the microseconds between); `holder` makes no further call.
  holder->release(t);
  // The helper settles idle connections once per renew period (lease / 3 = 200 ms).
  bool ran = waiter.wait_for(2000ms) == std::future_status::ready;
  if (!ran) holder.reset();  // unregisters, so the waiter (and this test) can finish
  ASSERT_TRUE(ran) << "the refused release was never run again";
  SlotTicket w = waiter.get();
  CoordinatorStatus s;
  auto admin = make_coordinator_admin(o, &err);
  ASSERT_TRUE(admin && admin->status(&s, &err)) << err;
  EXPECT_EQ(s.pt_inflight, 1u);
  EXPECT_LE(s.max_inflight_seen, 1u);
  other->release(w);
  holder.reset();
  other.reset();
  forget(o);
}

// Every wait for a slot is bounded as on the node-local backend (WaitBounds.h): behind a
// live holder that never lets go, forged holders, or a cap stored as nan or 0, an access
// proceeds without a slot after max(2 x lease, 2 s) at most, with one notice; later ones
// give up after two polls until a slot is granted again.
TEST(RedisFailure, WaitsAreBoundedAndForgedCapsOrLeasesHangNobody) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  auto o = opts(server.address(), unique_target("bound"), 1, 500);
  std::string err;
  testing::internal::CaptureStderr();
  auto holder = make_coordinator(o, &err);
  ASSERT_TRUE(holder) << err;
  auto waiter = make_coordinator(o, &err);
  ASSERT_TRUE(waiter) << err;
  SlotTicket held = holder->acquire(IoClass::PT, 1);
  ASSERT_TRUE(held.valid());
  auto timed = [&](IoClass cls) {
    auto start = Clock::now();
    auto got = std::async(std::launch::async, [&] { return waiter->acquire(cls, 1); });
    bool ready = got.wait_for(8s) == std::future_status::ready;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    if (!ready) holder->release(held);  // so that the test ends
    SlotTicket t = got.get();
    waiter->release(t);
    return ready ? ms : -1;
  };
  // A live holder (its process renews its lease) that keeps its slot.
  long first = timed(IoClass::MT);
  EXPECT_GE(first, 1900) << "gave up before the bound";
  EXPECT_LE(first, 3500) << "-1: waited behind the holder for more than 8 s";
  long second = timed(IoClass::PT);
  EXPECT_GE(second, 0);
  EXPECT_LE(second, 1000) << "a second access paid the whole bound again";
  printf("behind a live holder: first access %ld ms, second %ld ms\n", first, second);
  holder->release(held);
  // Granted again once the slot is back, and the withdrawn waiters left no trace.
  SlotTicket again = waiter->acquire(IoClass::PT, 1);
  auto admin = make_coordinator_admin(o, &err);
  CoordinatorStatus s;
  ASSERT_TRUE(admin && admin->status(&s, &err)) << err;
  EXPECT_EQ(s.pt_inflight, 1u);
  EXPECT_EQ(s.queued_mt + s.queued_pt, 0u);
  waiter->release(again);

  RedisAddress address;
  ASSERT_TRUE(RedisAddress::parse(server.address(), &address, &err)) << err;
  RedisLink::Failure failure;
  auto link = RedisLink::connect(address, 2000, &failure, &err);
  ASSERT_TRUE(link) << err;
  const std::string state = RedisLink::key_prefix(o.target) + "state";
  // A cap that no grant can satisfy: nan, 0, inf, a fraction, a negative number.
  for (const char *forged : {"nan", "0", "inf", "1.5", "-3"}) {
    link->command({"HSET", state, "n", forged}, &err);
    long ms = timed(IoClass::PT);
    EXPECT_GE(ms, 0) << "n=" << forged;
    EXPECT_LE(ms, 1000) << "n=" << forged << " made the access wait";
  }
  // A forged holder whose process has a lease a year ahead, at cap 1.
  link->command({"HSET", state, "n", "1", "p", "1"}, &err);
  link->command({"HSET", RedisLink::key_prefix(o.target) + "holders", "forged/1/1/1#1", "P|0"}, &err);
  link->command({"ZADD", RedisLink::key_prefix(o.target) + "procs", "99999999999999", "forged/1/1/1"}, &err);
  long forged_ms = timed(IoClass::PT);
  EXPECT_GE(forged_ms, 0);
  EXPECT_LE(forged_ms, 1000) << "a lease far beyond the longest one was trusted";
  ASSERT_TRUE(admin->status(&s, &err)) << err;
  EXPECT_EQ(s.processes, 2u) << "the forged process was not reaped";
  holder.reset();
  waiter.reset();
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(out, "proceeds without a slot"), 1u) << out;
  forget(o);
}

// Entries no ppios process writes (a queue entry, a holder or a yield member that does not
// parse, a key of the wrong type) and counters that disagree with the queues (phantom
// waiters): the target keeps working without a reset. The normal path recounts the
// counters and drops what does not parse (before: every call that read such an entry
// failed, so the jobs went on with node-local scheduling as if the server were gone,
// and phantom queue counters made every PT wait for the bound); status reports what was
// repaired, and reset refused for live processes repairs in place.
TEST(RedisFailure, MalformedEntriesAreDroppedAndPhantomCountersRecounted) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  auto o = opts(server.address(), unique_target("malformed"), 2, 600);
  std::string err;
  std::vector<std::string> notices;
  static std::vector<std::string> *sink_notices;
  sink_notices = &notices;
  set_coordinator_notice_sink([](const CoordinatorNotice &n) { sink_notices->push_back(n.text); });
  auto c = make_coordinator(o, &err);
  ASSERT_TRUE(c) << err;
  RedisAddress address;
  ASSERT_TRUE(RedisAddress::parse(server.address(), &address, &err)) << err;
  RedisLink::Failure failure;
  auto link = RedisLink::connect(address, 2000, &failure, &err);
  ASSERT_TRUE(link) << err;
  const std::string prefix = RedisLink::key_prefix(o.target);
  auto admin = make_coordinator_admin(o, &err);
  ASSERT_TRUE(admin) << err;
  auto forge = [&] {
    link->command({"RPUSH", prefix + "qmt", "garbage"}, &err);
    link->command({"RPUSH", prefix + "qpt", "no|bars|here|at|all"}, &err);
    link->command({"HSET", prefix + "holders", "no-hash-sign", "X|y"}, &err);
    link->command({"SADD", prefix + "yield", "not-a-holder"}, &err);
    link->command({"HSET", prefix + "state", "qm", "7", "qp", "5", "y", "3"}, &err);
  };
  forge();
  // Each access is granted by the server at once, MT and PT alike.
  for (IoClass cls : {IoClass::PT, IoClass::MT, IoClass::PT}) {
    const auto start = Clock::now();
    SlotTicket t = c->acquire(cls, 1);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    EXPECT_LT(ms, 500) << "an access waited for phantom waiters or a malformed entry";
    CoordinatorStatus s;
    ASSERT_TRUE(admin->status(&s, &err)) << err;
    EXPECT_EQ(s.mt_inflight + s.pt_inflight, 1u) << "the access was not granted by the server";
    EXPECT_EQ(s.queued_mt + s.queued_pt, 0u) << "phantom waiters were not recounted";
    c->release(t);
  }
  // A key of the wrong type where the queue should be.
  link->command({"DEL", prefix + "qpt"}, &err);
  link->command({"SET", prefix + "qpt", "a string"}, &err);
  link->command({"HSET", prefix + "state", "qp", "2"}, &err);
  {
    SlotTicket t = c->acquire(IoClass::PT, 1);
    CoordinatorStatus s;
    ASSERT_TRUE(admin->status(&s, &err)) << err;
    EXPECT_EQ(s.pt_inflight, 1u) << "a queue of the wrong type broke the target";
    c->release(t);
  }
  // status says what it repaired; reset refused for a live process repairs in place.
  forge();
  CoordinatorStatus s;
  ASSERT_TRUE(admin->status(&s, &err)) << err;
  EXPECT_FALSE(s.repairs.empty()) << "status did not report the repair";
  EXPECT_EQ(s.queued_mt + s.queued_pt, 0u);
  forge();
  EXPECT_FALSE(admin->reset(&err));
  EXPECT_NE(err.find("repaired"), std::string::npos) << err;
  for (const auto &n : notices) EXPECT_EQ(n.find("unreachable"), std::string::npos) << n;
  c.reset();
  set_coordinator_notice_sink(nullptr);
  forget(o);
}

// The server restarts empty while no process that saw the cap is left (a rank saw it and
// exited, keeping its node's stand-in segment as ranks do), and the cap was set with
// ppios-coord (in no job's options): the next job stores it again from the node's memory
// (before: the restarted server had no cap at all).
TEST(RedisFailure, ACapNoLiveProcessSawComesBackFromTheNode) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  auto o = opts(server.address(), unique_target("memory"), -1, 500);
  std::string err;
  auto admin = make_coordinator_admin(o, &err);
  ASSERT_TRUE(admin && admin->set_threshold(2, &err)) << err;
  pid_t rank = fork();
  if (rank == 0) {
    std::string e;
    auto c = make_coordinator(o, &e);
    if (!c) _exit(3);
    SlotTicket t = c->acquire(IoClass::PT, 1);
    c->release(t);
    c.release();  // not destroyed: it leaves at exit, as a rank does
    exit(0);
  }
  int st = 0;
  waitpid(rank, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  server.kill_hard();
  ASSERT_TRUE(server.start());
  auto c = make_coordinator(o, &err);
  ASSERT_TRUE(c) << err;
  SlotTicket t = c->acquire(IoClass::PT, 1);
  auto again = make_coordinator_admin(o, &err);
  CoordinatorStatus s;
  ASSERT_TRUE(again && again->status(&s, &err)) << err;
  EXPECT_EQ(s.threshold, 2) << "the restarted server got no cap back";
  c->release(t);
  c.reset();
  forget(o);
}

// The server loses the target's state under running jobs (FLUSHALL, then the state key
// alone deleted): the clients find another epoch, store the cap in force again (set with
// ppios-coord, not in their options), grant nothing new for a lease and tell it once;
// the cap holds throughout (before: no cap at all until the jobs ended, no word).
TEST(RedisFailure, LostStateIsDetectedAndRebuilt) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  auto o = opts(server.address(), unique_target("lost"), -1, 600);
  o.mt_at_cap = MtAtCap::Wait;
  std::string err;
  auto admin = make_coordinator_admin(o, &err);
  ASSERT_TRUE(admin && admin->set_threshold(2, &err)) << err;
  testing::internal::CaptureStderr();
  std::unique_ptr<Coordinator> c[2];
  for (auto &one : c) {
    one = make_coordinator(o, &err);
    ASSERT_TRUE(one) << err;
  }
  std::atomic<int> inflight{0}, most{0}, violations{0}, phase{0};
  std::atomic<long> ops[3] = {0, 0, 0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      Coordinator &mine = *c[i % 2];
      while (!stop) {
        SlotTicket t = mine.acquire(i < 2 ? IoClass::PT : IoClass::MT, 1);
        int now = inflight.fetch_add(1) + 1;
        if (now > 2) violations.fetch_add(1);
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(200us);
        inflight.fetch_sub(1);
        mine.release(t);
        ops[phase.load()].fetch_add(1);
      }
    });
  }
  redisContext *ctx = redisConnectUnix(server.socket_path().c_str());
  ASSERT_TRUE(ctx && !ctx->err);
  auto redis = [&](const char *cmd) {
    auto *r = static_cast<redisReply *>(redisCommand(ctx, cmd));
    EXPECT_TRUE(r && r->type != REDIS_REPLY_ERROR) << cmd;
    if (r) freeReplyObject(r);
  };
  std::this_thread::sleep_for(500ms);
  phase = 1;
  redis("FLUSHALL");
  std::this_thread::sleep_for(1500ms);
  long after_flush = ops[1].load();
  phase = 2;
  redis(("DEL " + RedisLink::key_prefix(o.target) + "state").c_str());
  std::this_thread::sleep_for(1500ms);
  stop = true;
  for (auto &t : clients) t.join();
  redisFree(ctx);
  printf("ops %ld / %ld / %ld, most in flight %d\n", ops[0].load(), ops[1].load(), ops[2].load(), most.load());
  EXPECT_EQ(violations.load(), 0) << "more than the cap of 2 in flight (most " << most.load() << ")";
  EXPECT_GT(after_flush, 50) << "clients stalled after FLUSHALL";
  EXPECT_GT(ops[2].load(), 50) << "clients stalled after the state key was deleted";
  CoordinatorStatus s;
  ASSERT_TRUE(admin->status(&s, &err)) << err;
  EXPECT_EQ(s.threshold, 2) << "the cap was not stored again";
  EXPECT_EQ(s.processes, 2u);
  for (auto &one : c) one.reset();
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(out, "lost the target's state"), 2u) << "one notice per process: " << out;
  forget(o);
}

// A process whose connections drop (an outage of its own: the server and the state stay)
// comes back to the same epoch: that is no loss, and no recovery window may start (before:
// a reconnect within the state's first lease set rend, and no job got a new slot until the
// lease from the job start was over).
TEST(RedisFailure, ReconnectToTheSameStateStartsNoRecovery) {
  test::RedisServer server(false);
  ASSERT_TRUE(server.start());
  auto o = opts(server.address(), unique_target("reconnect"), 2, 3000);
  std::string err;
  testing::internal::CaptureStderr();
  auto c = make_coordinator(o, &err);
  ASSERT_TRUE(c) << err;
  SlotTicket t = c->acquire(IoClass::PT, 1);
  c->release(t);
  redisContext *ctx = redisConnectUnix(server.socket_path().c_str());
  ASSERT_TRUE(ctx && !ctx->err);
  auto hexists_rend = [&] {
    auto *r = static_cast<redisReply *>(
        redisCommand(ctx, "HEXISTS %s rend", (RedisLink::key_prefix(o.target) + "state").c_str()));
    bool set = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (r) freeReplyObject(r);
    return set;
  };
  // Every client connection but ours: the coordinator's helper (connected by now) and its
  // pooled link; the state stays as it is.
  std::this_thread::sleep_for(300ms);
  auto *k = static_cast<redisReply *>(redisCommand(ctx, "CLIENT KILL TYPE normal SKIPME yes"));
  ASSERT_TRUE(k && k->type == REDIS_REPLY_INTEGER && k->integer >= 2);
  freeReplyObject(k);
  bool recovering = false;
  for (auto until = Clock::now() + 1200ms; Clock::now() < until;) {
    recovering = recovering || hexists_rend();
    std::this_thread::sleep_for(20ms);
  }
  // Back online by now (the helper retries every 250 ms): a free slot is granted at once.
  auto t0 = Clock::now();
  t = c->acquire(IoClass::PT, 1);
  auto waited = Clock::now() - t0;
  c->release(t);
  recovering = recovering || hexists_rend();
  redisFree(ctx);
  c.reset();
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(out, "unreachable"), 1u) << "the connections were not lost: " << out;
  EXPECT_FALSE(recovering) << "a reconnect to the same state started a recovery window";
  EXPECT_LT(waited, 300ms) << "a free slot waited "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms";
  EXPECT_EQ(count(out, "lost the target's state"), 0u) << out;
  forget(o);
}

}  // namespace
}  // namespace ppios
