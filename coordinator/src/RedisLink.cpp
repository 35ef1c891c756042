#include "RedisLink.h"

#include "RedisScript.h"

#include <hiredis/hiredis.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/socket.h>
#include <sys/time.h>

namespace ppios {
namespace {

timeval to_timeval(int ms) { return timeval{ms / 1000, static_cast<suseconds_t>((ms % 1000) * 1000)}; }

// The script gets one key, the target's state hash; it derives the others from its
// "ppios:{<target>}:" prefix (same hash slot). See RedisScript.h.
constexpr size_t kMaxScriptArgs = 16;
constexpr size_t kMaxArgv = kMaxScriptArgs + 4;  // EVALSHA sha 1 key

}  // namespace

void ReplyDeleter::operator()(redisReply *r) const { freeReplyObject(r); }

std::unique_ptr<RedisLink> RedisLink::connect(const RedisAddress &address, int timeout_ms, Failure *failure,
                                              std::string *error) {
  timeval tv = to_timeval(timeout_ms);
  redisContext *ctx = address.unix_socket ? redisConnectUnixWithTimeout(address.host.c_str(), tv)
                                          : redisConnectWithTimeout(address.host.c_str(), address.port, tv);
  if (!ctx || ctx->err) {
    *failure = Failure::Unreachable;
    *error = ctx ? ctx->errstr : "out of memory";
    if (ctx) redisFree(ctx);
    return nullptr;
  }
  redisSetTimeout(ctx, tv);
  if (!address.unix_socket) redisEnableKeepAlive(ctx);
  std::unique_ptr<RedisLink> link(new RedisLink(ctx));
  auto step = [&](const std::vector<std::string> &args, const char *what) -> bool {
    std::string err;
    RedisReplyPtr r = link->command(args, &err);
    if (!r) {
      *failure = Failure::Unreachable;
      *error = err;
      return false;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      *failure = Failure::Fatal;
      *error = std::string(what) + ": " + r->str;
      return false;
    }
    return true;
  };
  if (!address.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!address.user.empty()) auth.push_back(address.user);
    auth.push_back(address.password);
    if (!step(auth, "authentication failed (check the password in PPIOS_COORDINATOR)")) return nullptr;
  }
  // PING also reveals a server that wants a password we were not given (NOAUTH).
  if (!step({"PING"}, "the server refused PING (does it need a password?)")) return nullptr;
  if (address.db != 0 && !step({"SELECT", std::to_string(address.db)}, "cannot select the database"))
    return nullptr;
  std::string err;
  if (!link->load_script(&err)) {
    *failure = link->broken() ? Failure::Unreachable : Failure::Fatal;
    *error = err;
    return nullptr;
  }
  *failure = Failure::None;
  return link;
}

RedisLink::~RedisLink() { redisFree(ctx_); }

bool RedisLink::broken() const { return ctx_->err != 0; }

void RedisLink::set_timeout(int timeout_ms) { redisSetTimeout(ctx_, to_timeval(timeout_ms)); }

RedisReplyPtr RedisLink::command(const std::vector<std::string> &args, std::string *error) {
  if (!settle(error)) return nullptr;
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  for (const auto &a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return exchange(static_cast<int>(argv.size()), argv.data(), lens.data(), error);
}

// hiredis 0.14 writes with write(), which raises SIGPIPE once the server is gone and so
// would kill the program (a library must not change the process's SIGPIPE disposition).
// Requests are therefore written here with send(MSG_NOSIGNAL); hiredis only reads replies.
bool RedisLink::put(int argc, const char **argv, const size_t *lens, std::string *error) {
  if (ctx_->err) {
    *error = ctx_->errstr;
    return false;
  }
  char *cmd = nullptr;
  int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
  if (len < 0) {
    *error = "out of memory";
    return false;
  }
  const char *p = cmd;
  size_t left = static_cast<size_t>(len);
  while (left > 0) {
    ssize_t n = ::send(ctx_->fd, p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Mark the context broken, as hiredis itself would, so the link is not reused.
      ctx_->err = REDIS_ERR_IO;
      snprintf(ctx_->errstr, sizeof ctx_->errstr, "%s",
               n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? "write timed out" : strerror(errno));
      redisFreeCommand(cmd);
      *error = ctx_->errstr;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  redisFreeCommand(cmd);
  return true;
}

RedisReplyPtr RedisLink::exchange(int argc, const char **argv, const size_t *lens, std::string *error) {
  if (!put(argc, argv, lens, error)) return nullptr;
  void *raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || !raw) {
    *error = ctx_->err ? ctx_->errstr : "no reply";
    return nullptr;
  }
  return RedisReplyPtr(static_cast<redisReply *>(raw));
}

bool RedisLink::load_script(std::string *error) {
  RedisReplyPtr r = command({"SCRIPT", "LOAD", kRedisScript}, error);
  if (!r) return false;
  if (r->type != REDIS_REPLY_STRING) {
    *error = std::string("SCRIPT LOAD failed: ") + (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    return false;
  }
  sha_.assign(r->str, r->len);
  return true;
}

int RedisLink::format_call(const std::string &target, std::initializer_list<std::string_view> args,
                           const char **argv, size_t *lens, std::string *error) {
  if (args.size() == 0 || args.size() > kMaxScriptArgs) {
    *error = "internal: bad coordinator script call";
    return 0;
  }
  if (state_key_.empty() || target != target_) {
    target_ = target;
    state_key_ = key_prefix(target) + "state";
  }
  int argc = 0;
  auto push = [&](std::string_view v) {
    argv[argc] = v.data();
    lens[argc++] = v.size();
  };
  push("EVALSHA");
  push(sha_);
  push("1");
  push(state_key_);
  for (std::string_view a : args) push(a);
  return argc;
}

RedisReplyPtr RedisLink::run(const std::string &target, std::initializer_list<std::string_view> args,
                             std::string *error) {
  if (!settle(error)) return nullptr;
  const char *argv[kMaxArgv];
  size_t lens[kMaxArgv];
  int argc = format_call(target, args, argv, lens, error);
  if (argc == 0) return nullptr;
  bool reloaded = false, repaired = *args.begin() == std::string_view("repair");
  for (int attempt = 0; attempt < 3; ++attempt) {
    argv[1] = sha_.data();
    lens[1] = sha_.size();
    RedisReplyPtr r = exchange(argc, argv, lens, error);
    if (!r) return nullptr;
    if (r->type != REDIS_REPLY_ERROR) return r;
    std::string msg(r->str, r->len);
    // After a server restart the script cache is empty: load it again once.
    if (!reloaded && msg.rfind("NOSCRIPT", 0) == 0) {
      reloaded = true;
      if (!load_script(error)) return nullptr;
      continue;
    }
    // The script failed on what it read (a key of the wrong type, an entry no ppios
    // process wrote): the target's state is brought back to what ppios writes (the
    // script's repair) and the call runs once more, so such an entry never makes the
    // jobs take the server for lost.
    if (!repaired) {
      repaired = true;
      const char *rargv[5] = {"EVALSHA", sha_.c_str(), "1", state_key_.c_str(), "repair"};
      const size_t rlens[5] = {7, sha_.size(), 1, state_key_.size(), 6};
      RedisReplyPtr fixed = exchange(5, rargv, rlens, error);
      if (fixed && fixed->type != REDIS_REPLY_ERROR) continue;
    }
    *error = "redis: " + msg;
    return nullptr;
  }
  return nullptr;
}

bool RedisLink::send(const std::string &target, std::initializer_list<std::string_view> args, std::string *error) {
  if (!settle(error)) return false;
  const char *argv[kMaxArgv];
  size_t lens[kMaxArgv];
  int argc = format_call(target, args, argv, lens, error);
  if (argc == 0) return false;
  // On the wire now: the server must act on it without waiting for our next call.
  if (!put(argc, argv, lens, error)) return false;
  pending_ = true;
  pending_args_.assign(args.begin(), args.end());
  return true;
}

bool RedisLink::settle(std::string *error) {
  if (!pending_) return true;
  pending_ = false;
  void *raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || !raw) {
    *error = ctx_->err ? ctx_->errstr : "no reply";
    return false;
  }
  RedisReplyPtr r(static_cast<redisReply *>(raw));
  if (r->type != REDIS_REPLY_ERROR) return true;
  std::string msg(r->str, r->len);
  if (msg.rfind("NOSCRIPT", 0) != 0) {
    *error = "redis: " + msg;
    return false;
  }
  // The server lost the script (restart, SCRIPT FLUSH) before it ran our call: run it
  // again, synchronously this time.
  std::vector<std::string> args = std::move(pending_args_);
  std::string target = target_;
  switch (args.size()) {  // run() takes an initializer_list; send() is only used with few arguments
    case 1: return run(target, {args[0]}, error) != nullptr;
    case 2: return run(target, {args[0], args[1]}, error) != nullptr;
    case 3: return run(target, {args[0], args[1], args[2]}, error) != nullptr;
    case 4: return run(target, {args[0], args[1], args[2], args[3]}, error) != nullptr;
    default: *error = "internal: unexpected pending call"; return false;
  }
}

}  // namespace ppios
