// PPIOS_TRACE: one Chrome/Perfetto trace-event JSON per rank (`<prefix>.<rank>.json`), with
// the MT, the PT and each waiting thread as threads of their own and an `X` event for every
// read, write, sub-read and wait. The layers of one request (ADMIT, ISSUE, COMPLT, as in
// the multi-layer trace analysis of Lu and Shen, ICPP 2007) are: the app call (`read*`,
// `write`), the process token (`mt_token_wait`), the coordinator (`slot`: asked at ts =
// ADMIT, granted at ts + slot_wait_ns = ISSUE, released at ts + dur = COMPLT) and storage
// (`storage` for the MT, `subread` for the PT and WTs). `ppios-report` reads these files.
//
// Memory is bounded: events are kept in memory in chunks of kChunkEvents (about 5.5 MB);
// a full chunk is spilled to a file of the process's own in the trace's directory (one
// without a name, O_TMPFILE, or else unlinked at once: nothing is left behind, whatever
// happens to the process) and read back when the trace is written. At most kMaxEvents
// are kept in all (about 1.7 GB on disk); later ones are only counted (`dropped_events`),
// as are chunks that could not be spilled.
//
// Spilling is the writer thread's, not the recording thread's (the MT must not pay for a
// 5.5 MB write): a full chunk is queued and the writer, started at the first full chunk,
// writes it. At most kMaxQueued full chunks wait: a thread that fills one more waits for
// the writer (memory stays bounded, no event is lost). write() lets the writer finish
// the queue and ends it before reading the file back; so does the destructor.
//
// Locking: mu_ guards the events, the queue and the writer's state; spill_mu_ guards the
// spill file and is taken after mu_, never before (the writer holds only spill_mu_ while
// it writes). The writer blocks every asynchronous signal, like the PT.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "FileKey.h"

namespace ppios {

// The running executable's path and load base (0 unless it is a PIE): with a call site's
// address, what addr2line needs to name its source line.
void describe_executable(std::string *path, uintptr_t *load_base);

// Trace thread ids: what a person sees as thread names in the viewer.
// WTs are 10-73 (PPIOS_MAX_WT <= 64), PT readers from 100 (PPIOS_PT_READERS <= 16).
enum TraceThread : int { kTraceMT = 1, kTracePT = 2, kTraceFirstWT = 10, kTraceFirstReader = 100 };

class Trace {
 public:
  // Tracing is on when `prefix` (PPIOS_TRACE) is not empty.
  explicit Trace(std::string prefix) : enabled_(!prefix.empty()), prefix_(std::move(prefix)) {}
  ~Trace();
  bool enabled() const { return enabled_; }

  // Remembers the path of a file the first time it is seen, for the events' args: from
  // its descriptor (/proc/self/fd) or the path it was opened by. Keeps errno. Called
  // wherever the runtime identifies a file (FileProbe.h, MPI_File_open, a PT's
  // prefetch), so files only the MT reads or writes are named too.
  void name_file(const FileKey &key, int fd);
  void name_path(const FileKey &key, const std::string &path);

  // An event from `begin_ns` to `end_ns` on thread `tid`. offset/bytes/seq < 0 are
  // omitted; `aux_name` (a string literal) names one more number, written if aux >= 0.
  // `site`: the program's return address of the call (ThreadState::call_site), written
  // as "site" when not null; ppios-report resolves it with the executable's load base.
  // `src`: for the PT and WTs, the source location of the read they prefetch
  // (ThreadState::pt_site, a string literal of the program), written as "src".
  void event(const char *name, int tid, uint64_t begin_ns, uint64_t end_ns, const FileKey *key,
             int64_t offset, int64_t bytes, int64_t seq = -1, const char *aux_name = nullptr,
             int64_t aux = -1, const void *site = nullptr, const char *src = nullptr);

  // Writes `<prefix>.<rank>.json`. `other_data` is JSON members (`"k":v,...`) describing
  // the process, added to otherData with the clocks that let ppios-report align ranks:
  // origin_mono_ns (CLOCK_MONOTONIC at ts 0, the same clock on every process of a node)
  // and origin_unix_ns (the same instant in CLOCK_REALTIME, for jobs across nodes); and
  // `exe` and `exe_base` (its load address), to turn call sites into source lines.
  // Returns false and sets *error on failure.
  bool write(const std::string &prefix, int rank, uint64_t origin_ns, const std::string &other_data,
             std::string *error);

 private:
  struct Event {
    const char *name;
    int tid;
    uint64_t begin_ns, end_ns;
    FileKey key;
    bool has_key;
    int64_t offset, bytes, seq;
    const char *aux_name;
    int64_t aux;
    const void *site;
    const char *src;  // a string literal of the program's (ThreadState::pt_site)
  };
  static constexpr size_t kChunkEvents = 65536;      // in memory: about 5.5 MB
  static constexpr uint64_t kMaxEvents = 20000000;   // in all: about 1.7 GB on disk
  static constexpr size_t kMaxQueued = 2;            // full chunks waiting for the writer

  // Queues the full chunk for the writer (starting it the first time); waits while
  // kMaxQueued chunks are queued already. Called with mu_ held.
  void queue_full_chunk(std::unique_lock<std::mutex> &lock);
  void writer_main();
  // Lets the writer write what is queued, and ends it. Called with mu_ held.
  void stop_writer(std::unique_lock<std::mutex> &lock);
  // Appends a chunk to the spill file; false if it could not.
  bool spill(const std::vector<Event> &chunk);
  void write_event(FILE *f, const Event &e, int rank, uint64_t origin_ns, bool *first) const;

  const bool enabled_;
  const std::string prefix_;
  std::mutex mu_;                 // guards events_, kept_, dropped_, names_, the queue, the writer
  std::vector<Event> events_;
  std::deque<std::vector<Event>> queued_;  // full chunks, oldest first
  bool writer_stop_ = false;
  std::thread writer_;
  pid_t writer_pid_ = 0;          // the process that started the writer (not a forked child)
  std::condition_variable work_cv_;  // a chunk queued, or stop
  std::condition_variable room_cv_;  // a chunk written: room in the queue, or all written
  uint64_t kept_ = 0;             // events in events_ and in the spill file
  uint64_t dropped_ = 0;
  std::map<FileKey, std::string> names_;
  std::mutex spill_mu_;           // guards the spill file; taken after mu_, never before
  int spill_fd_ = -1;
  pid_t spill_pid_ = 0;           // a forked child never writes its parent's spill file
  uint64_t spilled_ = 0;          // events in the spill file
};

}  // namespace ppios
