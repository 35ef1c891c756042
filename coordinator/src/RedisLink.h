// One connection to the coordinator's redis-server. hiredis contexts are not thread-safe,
// so a RedisLink is used by one thread at a time (RedisCoordinator keeps a pool).
#pragma once

#include "RedisAddress.h"

#include <memory>
#include <string>
#include <vector>

struct redisContext;
struct redisReply;

namespace ppios {

struct ReplyDeleter {
  void operator()(redisReply *r) const;
};
using RedisReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisLink {
 public:
  enum class Failure { None, Unreachable, Fatal };

  // Connects, authenticates, selects the db and loads the script, all bounded by
  // timeout_ms. Fatal means retrying cannot help (wrong password, bad db, not a Redis).
  static std::unique_ptr<RedisLink> connect(const RedisAddress &address, int timeout_ms, Failure *failure,
                                            std::string *error);
  ~RedisLink();

  // Runs the coordinator script with the target's keys; reloads it on NOSCRIPT.
  // Returns nullptr on a connection or script error (message in *error).
  RedisReplyPtr run(const std::string &target, const std::vector<std::string> &args, std::string *error);
  // Plain command; nullptr on connection error. Error replies are returned as replies.
  RedisReplyPtr command(const std::vector<std::string> &args, std::string *error);
  // Socket timeout for subsequent calls (BLPOP waits need more than the default).
  void set_timeout(int timeout_ms);
  bool broken() const;

  static std::string key_prefix(const std::string &target) { return "ppios:{" + target + "}:"; }

 private:
  explicit RedisLink(redisContext *ctx) : ctx_(ctx) {}
  bool load_script(std::string *error);
  redisContext *ctx_;
  std::string sha_;
};

}  // namespace ppios
