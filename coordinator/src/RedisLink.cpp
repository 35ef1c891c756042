#include "RedisLink.h"

#include "RedisScript.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

namespace ppios {
namespace {

timeval to_timeval(int ms) { return timeval{ms / 1000, static_cast<suseconds_t>((ms % 1000) * 1000)}; }

const char *const kKeyNames[] = {"threshold", "state", "holders", "ptlead",  "yield",
                                 "qmt",       "qpt",   "waiting", "procs",   "procinfo"};

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
  if (ctx_->err) {
    *error = ctx_->errstr;
    return nullptr;
  }
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  for (const auto &a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto *r = static_cast<redisReply *>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (!r) {
    *error = ctx_->err ? ctx_->errstr : "no reply";
    return nullptr;
  }
  return RedisReplyPtr(r);
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

RedisReplyPtr RedisLink::run(const std::string &target, const std::vector<std::string> &args, std::string *error) {
  const std::string prefix = key_prefix(target);
  std::vector<std::string> cmd{"EVALSHA", sha_, std::to_string(sizeof kKeyNames / sizeof *kKeyNames)};
  for (const char *k : kKeyNames) cmd.push_back(prefix + k);
  cmd.push_back(args.at(0));
  cmd.push_back(prefix);
  cmd.insert(cmd.end(), args.begin() + 1, args.end());
  for (int attempt = 0; attempt < 2; ++attempt) {
    RedisReplyPtr r = command(cmd, error);
    if (!r) return nullptr;
    if (r->type != REDIS_REPLY_ERROR) return r;
    std::string msg(r->str, r->len);
    // After a server restart the script cache is empty: load it again once.
    if (attempt == 0 && msg.rfind("NOSCRIPT", 0) == 0) {
      if (!load_script(error)) return nullptr;
      cmd[1] = sha_;
      continue;
    }
    *error = "redis: " + msg;
    return nullptr;
  }
  return nullptr;
}

}  // namespace ppios
