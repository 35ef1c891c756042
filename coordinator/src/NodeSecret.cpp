// The user's node secret and the keyed segment names made with it (ppios/NodeSecret.h).
//
// The secret file is reached with openat() from a descriptor of $HOME, never by a path
// walked twice, and every step refuses what it does not expect instead of following it: a
// symlink (O_NOFOLLOW), a FIFO or device (opened O_NONBLOCK, then refused by fstat, so the
// open cannot wait for a writer), a file of someone else's or one others may read.
//
// Creation: the 16 random bytes are written to a temporary file of our own, which is then
// hard-linked to the final name. link() fails when the name exists, so of several
// processes creating at once exactly one wins and every one of them then reads the
// winner's file, which was complete before it had its name.
#include "ppios/NodeSecret.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ppios {
namespace {

constexpr const char *kDirName = ".ppios";
constexpr const char *kFileName = "node-secret";
constexpr size_t kFileSize = 33;  // 32 hex digits and a newline

uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

// Closes a descriptor at scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

std::string mode_text(mode_t mode) {
  char buf[8];
  snprintf(buf, sizeof buf, "%03o", static_cast<unsigned>(mode & 0777));
  return buf;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Fills `out` with the kernel's randomness without waiting for it (early boot: refused).
bool random_bytes(unsigned char *out, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = getrandom(out + done, len - done, GRND_NONBLOCK);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Makes the secret file under `dir` unless it exists; "" or why not.
std::string create_secret(int dir, const std::string &dir_path) {
  unsigned char key[16];
  if (!random_bytes(key, sizeof key)) return "no randomness to make " + dir_path + "/" + kFileName + " with";
  char text[kFileSize + 1];
  for (size_t i = 0; i < sizeof key; ++i) snprintf(text + 2 * i, 3, "%02x", key[i]);
  text[kFileSize - 1] = '\n';
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%s.%ld.%02x%02x%02x%02x", kFileName, static_cast<long>(getpid()), key[0] ^ key[8],
           key[1] ^ key[9], key[2] ^ key[10], key[3] ^ key[11]);
  int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return dir_path + "/" + kFileName + " cannot be created: " + strerror(errno);
  std::string why;
  // The mode asked for whatever the umask; on disk before it has its name (a crash then
  // leaves no empty secret behind).
  if (fchmod(fd, 0600) != 0 || write(fd, text, kFileSize) != static_cast<ssize_t>(kFileSize) || fdatasync(fd) != 0)
    why = dir_path + "/" + kFileName + " cannot be written: " + strerror(errno);
  close(fd);
  if (why.empty() && linkat(dir, tmp, dir, kFileName, 0) != 0 && errno != EEXIST)
    why = dir_path + "/" + kFileName + " cannot be created: " + strerror(errno);
  unlinkat(dir, tmp, 0);
  return why;
}

}  // namespace

uint64_t siphash24(uint64_t k0, uint64_t k1, const void *data, size_t len) {
  uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
  uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
  uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
  uint64_t v3 = 0x7465646279746573ULL ^ k1;
  auto round = [&] {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  };
  const auto *p = static_cast<const unsigned char *>(data);
  const size_t whole = len - len % 8;
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t m = 0;
    for (int b = 7; b >= 0; --b) m = (m << 8) | p[i + static_cast<size_t>(b)];  // little-endian
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
  // The last block: the remaining bytes, and the length's low byte on top.
  uint64_t m = static_cast<uint64_t>(len & 0xff) << 56;
  for (size_t i = whole; i < len; ++i) m |= static_cast<uint64_t>(p[i]) << (8 * (i - whole));
  v3 ^= m;
  round();
  round();
  v0 ^= m;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

NodeSecret load_node_secret(const char *home) {
  NodeSecret s;
  if (home == nullptr || *home == '\0') {
    s.why = "$HOME is unset";
    return s;
  }
  std::string home_path = home;
  if (home_path[0] != '/') {
    s.why = "$HOME (" + home_path + ") is not an absolute path";
    return s;
  }
  while (home_path.size() > 1 && home_path.back() == '/') home_path.pop_back();
  const std::string dir_path = (home_path == "/" ? "" : home_path) + "/" + kDirName;
  s.path = dir_path + "/" + kFileName;
  auto refuse = [&](const std::string &why) {
    s.why = why;
    return s;
  };
  // $HOME itself may be a symlink (many sites link homes); what is in it may not.
  Fd home_fd(open(home_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (home_fd.fd < 0) return refuse("$HOME (" + home_path + ") cannot be opened: " + strerror(errno));
  bool made_dir = mkdirat(home_fd.fd, kDirName, 0700) == 0;
  if (!made_dir && errno != EEXIST) return refuse(dir_path + " cannot be created: " + strerror(errno));
  Fd dir(openat(home_fd.fd, kDirName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.fd < 0)
    return refuse(dir_path + " cannot be opened" + (errno == ENOTDIR || errno == ELOOP ? ": it is not a directory"
                                                                                      : std::string(": ") + strerror(errno)));
  struct stat st;
  if (made_dir) fchmod(dir.fd, 0700);  // whatever the umask
  if (fstat(dir.fd, &st) != 0) return refuse(dir_path + " cannot be examined: " + strerror(errno));
  if (st.st_uid != geteuid())
    return refuse(dir_path + " belongs to uid " + std::to_string(st.st_uid) + ", not to uid " + std::to_string(geteuid()));
  // Anyone who may write the directory may replace the secret with a file of their own.
  if (st.st_mode & 022) return refuse(dir_path + " may be written by other users (mode " + mode_text(st.st_mode) + ")");

  const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  int fd = openat(dir.fd, kFileName, flags);
  if (fd < 0 && errno == ENOENT) {
    if (std::string why = create_secret(dir.fd, dir_path); !why.empty()) return refuse(why);
    fd = openat(dir.fd, kFileName, flags);
  }
  Fd file(fd);
  if (fd < 0)
    return refuse(s.path + " cannot be opened" + (errno == ELOOP ? ": it is a symbolic link" : std::string(": ") + strerror(errno)));
  if (fstat(fd, &st) != 0) return refuse(s.path + " cannot be examined: " + strerror(errno));
  if (!S_ISREG(st.st_mode)) return refuse(s.path + " is not a regular file");
  if (st.st_uid != geteuid())
    return refuse(s.path + " belongs to uid " + std::to_string(st.st_uid) + ", not to uid " + std::to_string(geteuid()));
  if (st.st_mode & 077) return refuse(s.path + " is accessible to other users (mode " + mode_text(st.st_mode) + ")");
  char text[kFileSize + 1];
  size_t got = 0;
  while (got < sizeof text) {
    ssize_t n = read(fd, text + got, sizeof text - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(s.path + " cannot be read: " + strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  uint64_t key[2] = {0, 0};
  bool ok = got == kFileSize && text[kFileSize - 1] == '\n';
  for (size_t i = 0; ok && i < 32; ++i) {
    const int v = hex_value(text[i]);
    ok = v >= 0;
    key[i / 16] = (key[i / 16] << 4) | static_cast<uint64_t>(v < 0 ? 0 : v);
  }
  if (!ok) return refuse(s.path + " is not 32 hexadecimal digits and a newline (remove it: a new one is made)");
  s.k0 = key[0];
  s.k1 = key[1];
  s.usable = true;
  return s;
}

const NodeSecret &node_secret() {
  // Never destroyed: the runtime's threads may still name segments while exit runs.
  static const NodeSecret *secret = new NodeSecret(load_node_secret(getenv("HOME")));
  return *secret;
}

std::string keyed_segment_name(const std::string &fixed, const NodeSecret &secret) {
  if (!secret.usable) return fixed;
  char buf[24];
  snprintf(buf, sizeof buf, ".%016llx",
           static_cast<unsigned long long>(siphash24(secret.k0, secret.k1, fixed.data(), fixed.size())));
  return fixed + buf;
}

bool is_keyed_segment_name(const std::string &name, const NodeSecret &secret) {
  if (!secret.usable || name.size() < 18 || name[name.size() - 17] != '.') return false;
  return keyed_segment_name(name.substr(0, name.size() - 17), secret) == name;
}

std::string predictable_name_note(const NodeSecret &secret) {
  if (secret.usable) return "";
  return "its name is predictable, so any local user can take it first (no node secret: " + secret.why + ")";
}

}  // namespace ppios
