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
  // "node+" before the scheme: the two-level backend (NodeCoordinator.h), where each node
  // holds a share of the cap as a lease on this server.
  bool node_shares = false;

  // Accepts redis://[[user]:password@]host[:port][/db] and unix:///path.sock[?db=N&password=P],
  // either with a node+ prefix.
  static bool parse(const std::string &text, RedisAddress *out, std::string *problem);
  // The address without the password, for messages.
  std::string describe() const;

 private:
  static bool parse_plain(const std::string &text, RedisAddress *out, std::string *problem);
};

}  // namespace ppios
