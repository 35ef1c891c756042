// Opening the files a run writes (PPIOS_STATS, PPIOS_TRACE) so that another local user
// cannot redirect them: in a shared directory such as /tmp anyone may plant a symlink or
// a file of their own at the path before the run.
//   - O_NOFOLLOW: a symlink at the path is refused, never followed;
//   - a new file is created with O_EXCL, so nothing can be slipped in between;
//   - an existing file (another rank's, an earlier run's) is used only if it is a regular
//     file, and, in a directory others may write to, only if it is ours.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ppios {

// Returns a descriptor open for writing (appending, or emptied first with `truncate`),
// or -1 with a message naming the path in *error.
inline int open_output_file(const std::string &path, bool truncate, std::string *error) {
  const int flags = O_WRONLY | O_NOFOLLOW | O_CLOEXEC | (truncate ? 0 : O_APPEND);
  auto fail = [&](const std::string &why) {
    *error = path + ": " + why;
    return -1;
  };
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST) return fail(std::strerror(errno));
    fd = ::open(path.c_str(), flags);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // removed since: create it again
      return fail(errno == ELOOP ? "is a symbolic link; not followed" : std::strerror(errno));
    }
    struct stat st;
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
    struct stat dst;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return fail("is not a regular file");
    }
    if (st.st_uid != geteuid() && (stat(dir.c_str(), &dst) != 0 || (dst.st_mode & S_IWOTH))) {
      ::close(fd);
      return fail("belongs to another user in a directory anyone may write to; not used");
    }
    if (truncate && ftruncate(fd, 0) != 0) {
      int e = errno;
      ::close(fd);
      return fail(std::strerror(e));
    }
    return fd;
  }
  return fail("keeps disappearing");
}

}  // namespace ppios
