// One connection to the coordinator's redis-server. hiredis contexts are not thread-safe,
// so a RedisLink is used by one thread at a time (RedisCoordinator keeps a pool).
#pragma once

#include "RedisAddress.h"

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
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

  // Runs the coordinator script for the target: args[0] is the operation, the rest its
  // arguments. Reloads the script on NOSCRIPT. Returns nullptr on a connection or script
  // error (message in *error). Allocates nothing per call but the formatted request.
  RedisReplyPtr run(const std::string &target, std::initializer_list<std::string_view> args, std::string *error);
  // Sends a script call without waiting for its reply (release: the caller needs no
  // answer, and not waiting saves a wake-up per call). The server runs it as soon as it
  // reads it; the reply is read and checked by the next call on this link (settle), which
  // re-runs the call once if the server had lost the script (NOSCRIPT). False when the
  // connection failed (message in *error).
  bool send(const std::string &target, std::initializer_list<std::string_view> args, std::string *error);
  // Reads the reply of a call made with send(), if any. False on a connection error or an
  // error reply. Every other call settles first, so replies never get out of step.
  bool settle(std::string *error);
  // Plain command; nullptr on connection error. Error replies are returned as replies.
  RedisReplyPtr command(const std::vector<std::string> &args, std::string *error);
  // Socket timeout for subsequent calls (BLPOP waits need more than the default).
  void set_timeout(int timeout_ms);
  bool broken() const;

  static std::string key_prefix(const std::string &target) { return "ppios:{" + target + "}:"; }

 private:
  explicit RedisLink(redisContext *ctx) : ctx_(ctx) {}
  bool load_script(std::string *error);
  // Formats EVALSHA into argv/lens (arrays of at least kMaxArgv); returns argc or 0.
  int format_call(const std::string &target, std::initializer_list<std::string_view> args, const char **argv,
                  size_t *lens, std::string *error);
  bool put(int argc, const char **argv, const size_t *lens, std::string *error);  // write one request
  RedisReplyPtr exchange(int argc, const char **argv, const size_t *lens, std::string *error);
  redisContext *ctx_;
  bool pending_ = false;                 // a send() whose reply is unread
  std::vector<std::string> pending_args_;  // its arguments, for a re-run after NOSCRIPT
  std::string sha_;
  std::string target_, state_key_;  // the last target run() saw and its state key
};

}  // namespace ppios
