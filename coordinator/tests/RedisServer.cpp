#include "RedisServer.h"

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace ppios::test {

int free_tcp_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

RedisServer::RedisServer(bool tcp, std::string password) : tcp_(tcp), password_(std::move(password)) {
  char tmpl[] = "/tmp/ppios-redis-XXXXXX";
  dir_ = mkdtemp(tmpl);
  if (tcp_) port_ = free_tcp_port();
}

RedisServer::~RedisServer() {
  kill_hard();
  for (const char *f : {"/r.sock", "/r.pid", "/dump.rdb", "/r.log"}) unlink((dir_ + f).c_str());
  rmdir(dir_.c_str());
}

std::string RedisServer::address() const {
  std::string auth = password_.empty() ? "" : ":" + password_ + "@";
  if (tcp_) return "redis://" + auth + "127.0.0.1:" + std::to_string(port_);
  return "unix://" + socket_path() + (password_.empty() ? "" : "?password=" + password_);
}

bool RedisServer::start() {
  std::vector<std::string> args{"redis-server", "--port", std::to_string(tcp_ ? port_ : 0), "--bind", "127.0.0.1",
                                "--unixsocket", socket_path(), "--save", "", "--appendonly", "no", "--dir", dir_,
                                "--daemonize", "no", "--logfile", dir_ + "/r.log"};
  if (!password_.empty()) {
    args.push_back("--requirepass");
    args.push_back(password_);
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("redis-server", argv.data());
    _exit(127);
  }
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    timeval tv{0, 200000};
    redisContext *c = redisConnectUnixWithTimeout(socket_path().c_str(), tv);
    if (c && !c->err) {
      auto *r = static_cast<redisReply *>(redisCommand(c, "PING"));
      // A password-protected server answers NOAUTH, which still means it is up.
      bool up = r != nullptr;
      if (r) freeReplyObject(r);
      redisFree(c);
      if (up) return true;
    } else if (c) {
      redisFree(c);
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void RedisServer::kill_hard() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  unlink(socket_path().c_str());
}

}  // namespace ppios::test
