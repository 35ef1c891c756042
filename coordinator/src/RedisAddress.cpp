#include "RedisAddress.h"

#include <cstdlib>

namespace ppios {
namespace {

bool parse_int(const std::string &s, int lo, int hi, int *out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  int v = std::atoi(s.c_str());
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

bool RedisAddress::parse(const std::string &text, RedisAddress *out, std::string *problem) {
  const std::string node_prefix = "node+";
  if (text.rfind(node_prefix, 0) == 0) {
    if (!parse_plain(text.substr(node_prefix.size()), out, problem)) return false;
    out->node_shares = true;
    return true;
  }
  return parse_plain(text, out, problem);
}

bool RedisAddress::parse_plain(const std::string &text, RedisAddress *out, std::string *problem) {
  RedisAddress a;
  const std::string redis_scheme = "redis://", unix_scheme = "unix://";
  if (text.rfind(unix_scheme, 0) == 0) {
    a.unix_socket = true;
    std::string rest = text.substr(unix_scheme.size());
    std::string query;
    size_t q = rest.find('?');
    if (q != std::string::npos) {
      query = rest.substr(q + 1);
      rest = rest.substr(0, q);
    }
    if (rest.empty() || rest[0] != '/') {
      *problem = "unix:// needs an absolute socket path, as in unix:///run/redis.sock";
      return false;
    }
    a.host = rest;
    size_t pos = 0;
    while (pos < query.size()) {
      size_t amp = query.find('&', pos);
      std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
      pos = amp == std::string::npos ? query.size() : amp + 1;
      size_t eq = kv.find('=');
      std::string key = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
      if (key == "db") {
        if (!parse_int(value, 0, 1 << 20, &a.db)) {
          *problem = "db must be a number";
          return false;
        }
      } else if (key == "password") {
        a.password = value;
      } else {
        *problem = "unknown unix:// option '" + key + "' (use db= and password=)";
        return false;
      }
    }
    *out = a;
    return true;
  }
  if (text.rfind(redis_scheme, 0) != 0) {
    *problem = "unknown scheme";
    return false;
  }
  std::string rest = text.substr(redis_scheme.size());
  size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    std::string cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = cred.find(':');
    if (colon == std::string::npos) {
      *problem = "credentials must be written [user]:password@";
      return false;
    }
    a.user = cred.substr(0, colon);
    a.password = cred.substr(colon + 1);
  }
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    if (!db.empty() && !parse_int(db, 0, 1 << 20, &a.db)) {
      *problem = "the database after '/' must be a number";
      return false;
    }
  }
  if (!hostport.empty() && hostport[0] == '[') {  // [ipv6]:port
    size_t close = hostport.find(']');
    if (close == std::string::npos) {
      *problem = "unterminated [ipv6] host";
      return false;
    }
    a.host = hostport.substr(1, close - 1);
    std::string tail = hostport.substr(close + 1);
    if (!tail.empty()) {
      if (tail[0] != ':' || !parse_int(tail.substr(1), 1, 65535, &a.port)) {
        *problem = "the port must be a number from 1 to 65535";
        return false;
      }
    }
  } else {
    size_t colon = hostport.rfind(':');
    a.host = hostport.substr(0, colon);
    if (colon != std::string::npos && !parse_int(hostport.substr(colon + 1), 1, 65535, &a.port)) {
      *problem = "the port must be a number from 1 to 65535";
      return false;
    }
  }
  if (a.host.empty()) {
    *problem = "no host";
    return false;
  }
  *out = a;
  return true;
}

std::string RedisAddress::describe() const {
  std::string s = std::string(node_shares ? "node+" : "") + (unix_socket ? "unix://" + host : "redis://" + host + ":" + std::to_string(port));
  if (db != 0) s += unix_socket ? "?db=" + std::to_string(db) : "/" + std::to_string(db);
  return s;
}

}  // namespace ppios
