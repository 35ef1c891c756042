// PPIOS_TRACE: one Chrome/Perfetto trace-event JSON per rank (`<prefix>.<rank>.json`),
// with the MT, the PT and each waiting thread as threads of their own and an `X` event
// for every read, write, sub-read and wait.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "FileKey.h"

namespace ppios {

// Trace thread ids: what a person sees as thread names in the viewer.
enum TraceThread : int { kTraceMT = 1, kTracePT = 2, kTraceFirstWT = 10 };

class Trace {
 public:
  explicit Trace(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }

  // Remembers the path of a file the first time it is seen, for the events' args.
  void name_file(const FileKey &key, int fd);

  // An event from `begin_ns` to `end_ns` on thread `tid`. offset/bytes < 0 are omitted.
  void event(const char *name, int tid, uint64_t begin_ns, uint64_t end_ns, const FileKey *key,
             int64_t offset, int64_t bytes, int64_t seq = -1);

  // Writes `<prefix>.<rank>.json`. Returns false and sets *error on failure.
  bool write(const std::string &prefix, int rank, uint64_t origin_ns, std::string *error);

 private:
  struct Event {
    const char *name;
    int tid;
    uint64_t begin_ns, end_ns;
    FileKey key;
    bool has_key;
    int64_t offset, bytes, seq;
  };
  static constexpr size_t kMaxEvents = 2000000;  // about 150 MB; later events are counted only

  const bool enabled_;
  std::mutex mu_;
  std::vector<Event> events_;
  uint64_t dropped_ = 0;
  std::map<FileKey, std::string> names_;
};

}  // namespace ppios
