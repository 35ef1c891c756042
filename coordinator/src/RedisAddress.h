// A parsed PPIOS_COORDINATOR address for the redis backend.
#pragma once

#include <string>

namespace ppios {

struct RedisAddress {
  bool unix_socket = false;
  std::string host;      // TCP host, or the socket path
  int port = 6379;
  std::string user;      // Redis 6 ACL user; empty = default user
  std::string password;  // empty = no AUTH
  int db = 0;

  // Accepts redis://[[user]:password@]host[:port][/db] and unix:///path.sock[?db=N&password=P].
  static bool parse(const std::string &text, RedisAddress *out, std::string *problem);
  // The address without the password, for messages.
  std::string describe() const;
};

}  // namespace ppios
