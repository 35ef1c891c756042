// A throwaway redis-server for one test: its own directory, Unix socket and (optionally) a
// free TCP port, no persistence. It runs as our child with PDEATHSIG so a crashed test
// never leaves it behind.
#pragma once

#include <string>
#include <sys/types.h>

namespace ppios::test {

class RedisServer {
 public:
  // tcp: listen on a free loopback port too. password: --requirepass when not empty.
  explicit RedisServer(bool tcp, std::string password = "");
  ~RedisServer();
  RedisServer(const RedisServer &) = delete;
  RedisServer &operator=(const RedisServer &) = delete;

  bool start();           // returns once PING answers (false after 10 s)
  void kill_hard();       // SIGKILL, as a crash or an outage
  bool running() const { return pid_ > 0; }

  // The PPIOS_COORDINATOR address clients should use (TCP when tcp, else the socket).
  std::string address() const;
  std::string socket_path() const { return dir_ + "/r.sock"; }
  int port() const { return port_; }

 private:
  bool tcp_;
  std::string password_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A free loopback TCP port (nothing listens on it right after this returns).
int free_tcp_port();

}  // namespace ppios::test
