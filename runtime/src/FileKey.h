#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <tuple>

namespace ppios {

// Identity of a file, independent of the descriptor, stream or MPI handle it is read
// through: the PT's own descriptor and the MT's resolve to the same key.
struct FileKey {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator<(const FileKey &o) const { return std::tie(dev, ino) < std::tie(o.dev, o.ino); }
  bool operator==(const FileKey &o) const { return dev == o.dev && ino == o.ino; }
};

// What a file looked like when data was prefetched from it. An entry is only served if
// the file still looks the same, which catches changes the runtime did not see (another
// process writing the file) at the resolution of the file system's timestamps.
struct FileStamp {
  off_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileStamp &o) const {
    return size == o.size && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
  bool operator!=(const FileStamp &o) const { return !(*this == o); }
};

inline FileKey key_of(const struct stat &st) { return FileKey{st.st_dev, st.st_ino}; }

inline FileStamp stamp_of(const struct stat &st) {
  FileStamp s;
  s.size = st.st_size;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return s;
}

}  // namespace ppios
