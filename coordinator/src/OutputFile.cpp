#include "ppios/OutputFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

namespace ppios {
namespace {

// A descriptor that closes itself.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() { reset(); }
  void reset(int f = -1) {
    if (fd >= 0) ::close(fd);
    fd = f;
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

void split_into(const std::string &path, std::deque<std::string> *parts, bool at_front) {
  std::deque<std::string> mine;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(start, slash - start);
    if (!part.empty() && part != ".") mine.push_back(part);
    start = slash + 1;
  }
  if (at_front) parts->insert(parts->begin(), mine.begin(), mine.end());
  else parts->insert(parts->end(), mine.begin(), mine.end());
}

// The caller's own symlinks and root's are followed: only another user's could redirect
// the caller's output somewhere the caller did not mean.
bool trusted_owner(uid_t uid) { return uid == geteuid() || uid == 0; }

}  // namespace

int open_output_file(const std::string &path, bool truncate, std::string *error) {
  auto fail = [&](const std::string &why) {
    *error = path + ": " + why;
    return -1;
  };
  if (path.empty()) return fail("empty path");
  if (path.back() == '/') return fail("names a directory");
  std::deque<std::string> parts;
  split_into(path, &parts, false);
  if (parts.empty() || parts.back() == "..") return fail("names a directory");
  const std::string name = parts.back();
  parts.pop_back();

  // The directory, one component at a time. O_PATH: a directory we may search but not
  // read is still walked through.
  const int dir_flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  Fd dir(::open(path[0] == '/' ? "/" : ".", dir_flags));
  if (dir.fd < 0) return fail(std::strerror(errno));
  std::string walked = path[0] == '/' ? "" : ".";
  int links = 0;
  while (!parts.empty()) {
    const std::string part = parts.front();
    parts.pop_front();
    int next = ::openat(dir.fd, part.c_str(), dir_flags);
    if (next < 0 && (errno == ELOOP || errno == ENOTDIR)) {
      struct stat lst;
      if (::fstatat(dir.fd, part.c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
        if (!trusted_owner(lst.st_uid))
          return fail(walked + "/" + part + " is a symbolic link of another user (uid " + std::to_string(lst.st_uid) +
                      "); not followed");
        char target[4096];
        ssize_t n = ::readlinkat(dir.fd, part.c_str(), target, sizeof target - 1);
        if (n <= 0 || ++links > 40) return fail(std::strerror(n <= 0 ? errno : ELOOP));
        target[n] = '\0';
        if (target[0] == '/') {
          dir.reset(::open("/", dir_flags));
          if (dir.fd < 0) return fail(std::strerror(errno));
          walked = "";
        }
        split_into(target, &parts, true);
        continue;
      }
      errno = ENOTDIR;
    }
    if (next < 0) return fail(walked + "/" + part + ": " + std::strerror(errno));
    dir.reset(next);
    walked += "/" + part;
  }

  struct stat dst;
  if (::fstat(dir.fd, &dst) != 0) return fail(std::strerror(errno));
  // Others may write to the directory: they may have put the file there.
  const bool shared_dir = (dst.st_mode & S_IWOTH) != 0;
  const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (truncate ? 0 : O_APPEND);
  for (int attempt = 0; attempt < 3; ++attempt) {
    Fd fd(::openat(dir.fd, name.c_str(), flags | O_CREAT | O_EXCL, 0644));
    if (fd.fd < 0) {
      if (errno != EEXIST) return fail(std::strerror(errno));
      // Look before opening: a FIFO or a device is never opened (opening one for writing
      // may block, or do something of its own).
      struct stat lst;
      if (::fstatat(dir.fd, name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // removed since: create it again
        return fail(std::strerror(errno));
      }
      if (S_ISLNK(lst.st_mode)) return fail("is a symbolic link; not followed");
      if (!S_ISREG(lst.st_mode)) return fail("is not a regular file");
      fd.reset(::openat(dir.fd, name.c_str(), flags));
      if (fd.fd < 0) {
        if (errno == ENOENT) continue;
        if (errno == ELOOP) return fail("is a symbolic link; not followed");
        if (errno == ENXIO) return fail("is not a regular file");  // a FIFO swapped in
        return fail(std::strerror(errno));
      }
      struct stat st;
      if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) return fail("is not a regular file");
      if (shared_dir && st.st_uid != geteuid())
        return fail("belongs to another user in a directory anyone may write to; not used");
      if (shared_dir && st.st_nlink > 1)
        return fail("has other names (hard links) in a directory anyone may write to; not used");
      if (truncate && ::ftruncate(fd.fd, 0) != 0) return fail(std::strerror(errno));
    }
    // Writes block as usual: the file is regular, O_NONBLOCK only guarded the open.
    ::fcntl(fd.fd, F_SETFL, truncate ? 0 : O_APPEND);
    return fd.release();
  }
  return fail("keeps disappearing");
}

}  // namespace ppios
