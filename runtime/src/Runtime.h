// The per-process runtime behind the C ABI: configuration, the prefetch cache, the
// intra-process scheduler, the coordinator, the prefetch and waiting threads, and the
// statistics and trace.
//
// Threads: the MT (any thread that is not the PT or a WT; normally the program's main
// thread), one PT started by ppios_pt_start, at most PPIOS_MAX_WT waiting threads, and in
// PPIOS_MODE=ppios at most PPIOS_PT_READERS reader threads that fill the PT's prefetches.
//
// Lock order: PrefetchBackoff::mu_ is a leaf (taken inside PrefetchCache::mu_ when the
// cache reports a freed entry). No two of these are ever held together: PrefetchCache::mu_,
// IoScheduler::mu_, Runtime::progress_mu_, Runtime::wt_mu_, Runtime::lifecycle_mu_,
// Runtime::handoff_mu_, Runtime::readers_mu_, PtResources::streams_mu_. Trace::mu_ and CallSiteStats::mu_ are leaves. Coordinator calls and storage I/O happen with none held.
#pragma once

#include <pthread.h>
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "Backoff.h"
#include "CallSiteStats.h"
#include "ChangeGenerations.h"
#include "Coherence.h"
#include "Config.h"
#include "FileKey.h"
#include "FunctionRef.h"
#include "IoScheduler.h"
#include "PrefetchCache.h"
#include "PtThread.h"
#include "Trace.h"
#include "ppios/Coordinator.h"

namespace ppios {

// A file whose bytes an MT read may take from the cache.
struct CachedFile {
  FileKey key;
  FileStamp stamp;
};

// Counters behind PPIOS_STATS, declared once: C(name) is a count written as "name",
// T(name) a time kept in nanoseconds as name_ns and written in seconds as "name_s".
#define PPIOS_STATS_FIELDS(C, T)                                                       \
  C(mt_read_calls) C(mt_read_bytes) C(hit_bytes) T(mt_read_wait)                       \
  C(mt_write_calls) C(mt_write_bytes) T(mt_write_wait) T(mt_token_wait)                \
  T(mt_slot_wait) T(pt_slot_wait)                                                      \
  C(pt_prefetch_calls) C(pt_read_bytes) C(pt_subreads) C(pt_yields) C(pt_skipped)      \
  C(pt_unmapped)                                                                       \
  C(pt_late) T(pt_room_wait) T(pt_reader_wait) C(pt_faults) T(pt_cpu) T(pt_reader_cpu)  \
  T(pt_speculation_wait)                                                               \
  C(wt_started) C(wt_dropped)                                                          \
  C(pt_backoffs) C(pt_backoff_late) C(pt_backoff_unused) C(pt_backoff_cpu)             \
  C(pt_backoff_skips)

struct Stats {
#define PPIOS_STATS_COUNT(name) std::atomic<uint64_t> name{0};
#define PPIOS_STATS_TIME(name) std::atomic<uint64_t> name##_ns{0};
  PPIOS_STATS_FIELDS(PPIOS_STATS_COUNT, PPIOS_STATS_TIME)
#undef PPIOS_STATS_COUNT
#undef PPIOS_STATS_TIME
};

// What an MT transfer reaches (FileProbe.h: what_reaches):
// - Storage: it takes the process I/O token and a system slot;
// - Messages: a pipe, FIFO or socket, through which another process can order its changes
//   of a file before this process's reads: the transfer is a synchronization of the
//   coherence rule (docs/design/coherence.md), a release point before it and an acquire
//   point after it, as an MPI message is;
// - Other: neither (a tty, a character device, a collective MPI-IO transfer, whose
//   storage access MPI's aggregators make and which brackets its own synchronization).
enum class Reaches { Storage, Messages, Other };

// The MT's hold on the process I/O token and a system slot, taken only when it really
// goes to storage and given back when its access is done. In the work-conserving mode
// (PPIOS_MODE=ppios) a storage access takes only the slot: the process's prefetches may
// read at the same time whenever the coordinator grants them slots of their own. The
// token is then taken only to claim a prefetch in flight (claim_in_flight), and given
// back as soon as the claim is done.
class MtStorageAccess {
 public:
  explicit MtStorageAccess(class Runtime &rt) : rt_(rt) {}
  ~MtStorageAccess();
  // Takes the slot (and, unless work-conserving, the token), unless the transfer does
  // not reach storage.
  void acquire();
  // Pauses the prefetch for transfer `seq` in flight between sub-reads while the MT
  // takes what it fetched so far: work-conserving, a claim of that prefetch only (the
  // other readers read on); otherwise the whole token, with the slot (acquire()).
  // end_claim() gives the claim back.
  void claim_in_flight(uint64_t seq);
  void end_claim();
  // Before the transfer: what it reaches. Only storage takes a slot (a blocking read on
  // an idle pipe must not hold a system-wide storage slot); a message channel is a
  // release point now and an acquire point when the access is over.
  void reaches(Reaches what);
  // Bytes moved from or to storage under the slot, reported at release (PPIOS_THRESHOLD=auto).
  void add_bytes(uint64_t n) { slot_.bytes += n; }
  void release();
  // The transfer may wait from now on (a storage access, a channel that may block, a
  // prefetch in flight): the MT's read wait is timed from the first such moment, so a
  // call its stdio buffer or the cache answers reads no clock.
  void may_wait();
  uint64_t may_wait_from() const { return may_wait_from_ns_; }

 private:
  // The whole token, or with `claim_seq` a claim of that prefetch only.
  void take_token(const uint64_t *claim_seq = nullptr);
  Runtime &rt_;
  bool token_held_ = false;
  bool slot_held_ = false;
  bool exempt_ = false;
  bool message_ = false;
  SlotTicket slot_;
  uint64_t slot_asked_ns_ = 0, slot_granted_ns_ = 0;  // for the trace's `slot` event
  uint64_t storage_begin_ns_ = 0;  // the trace's `storage` event: from here to release()
  uint64_t may_wait_from_ns_ = 0;
  TokenTimes token_;
};

class Runtime {
 public:
  // Parses the configuration; exits the program with a message if it is invalid.
  static void load();
  static Runtime &get();

  const Config &config() const { return config_; }
  Mode mode() const { return config_.mode; }
  // True when MT reads look in the cache (any mode but off).
  bool caching() const { return config_.mode != Mode::Off; }
  // Whether a read may be served from the cache at all: until a PT starts the MT's reads
  // skip the probes a serve needs (PrefetchCache::used), unless a trace names the files
  // they read.
  bool may_serve() { return caching() && (cache_.used() || trace_.enabled()); }
  // PPIOS_MODE=off without a trace: nothing is prefetched and nothing waits for the MT's
  // progress, so an MT read is the plain call at the plain call's cost, only counted
  // (calls and bytes; its wait is not measured). count_plain_read is the MT's alone:
  // plain loads and stores, no locked instruction.
  bool plain_reads() const { return config_.mode == Mode::Off && !trace_.enabled(); }
  void count_plain_read(ssize_t bytes) {
    auto add = [](std::atomic<uint64_t> &v, uint64_t n) {
      v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    };
    add(stats_.mt_read_calls, 1);
    if (bytes > 0) add(stats_.mt_read_bytes, static_cast<uint64_t>(bytes));
  }
  // True when MT storage accesses take the process I/O token and a coordinator slot
  // (intra, ppios); elsewhere both are free, and telling storage from pipes is not needed.
  bool scheduling() const {
    return config_.mode == Mode::Intra || config_.mode == Mode::PPIOS ||
           config_.mode == Mode::PPIOSStrict;
  }
  // PPIOS_MODE=ppios: an MT storage access does not hold the process I/O token, so the
  // process's prefetches may use the slots the coordinator grants them meanwhile.
  bool work_conserving() const { return config_.mode == Mode::PPIOS; }
  Stats &stats() { return stats_; }
  Trace &trace() { return trace_; }

  // ---- main thread
  // One MT read of [offset, offset+length) into `buffer`. `file` is null when the bytes
  // may not come from the cache. complete(h, storage) gets the number h of leading bytes
  // already served from the cache, does whatever the original call still has to do
  // (read the rest through `storage`, move the file position) and returns the bytes the
  // call delivered, or -1 on error.
  ssize_t mt_read(const CachedFile *file, off_t offset, size_t length, char *buffer,
                  FunctionRef<ssize_t(size_t, MtStorageAccess &)> complete);
  // One MT write of `file` (null: not a regular file), an own change of it
  // (Coherence::begin_change/end_change), at `offset` (-1: unknown; for the trace).
  // do_write performs it and returns the bytes written or -1; `reaches` as in
  // MtStorageAccess::reaches.
  ssize_t mt_write(const FileKey *file, off_t offset, FunctionRef<ssize_t()> do_write,
                   Reaches reaches = Reaches::Storage);
  PrefetchCache &cache() { return cache_; }
  // The coherence rule's events (docs/design/coherence.md): own changes, holds, release
  // and acquire points.
  Coherence &coherence() { return coherence_; }

  // ---- prefetch thread
  void start_pt(void (*entry)(void *), const void *ctx, size_t ctx_size);
  // Prefetches [offset, offset+length) of the PT's descriptor `fd` (fstat'ed as `st`)
  // for the MT's transfer `seq`. `requested` is what the program asked for (a waiting
  // thread recomputes the length from it once the writes before it are done).
  void prefetch(int fd, const struct stat &st, off_t offset, size_t length, size_t requested,
                uint64_t seq, unsigned flags);
  // Like prefetch(), for a PT that needs the bytes itself (an index whose values are
  // later offsets): reads `count` bytes at `offset` into the PT's own `buffer`, returns
  // what pread would (bytes, or -1 with errno), and leaves a copy for the MT. A read
  // after a write first waits until the MT has done every transfer before `seq`; a read
  // after a synchronization until the MT has started transfer `seq`. Sets *stopped
  // (and reads nothing) if the runtime stopped while it waited.
  ssize_t prefetch_copy(int fd, off_t offset, size_t count, uint64_t seq, unsigned flags,
                        char *buffer, bool *stopped);
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  // True once the CPU rule of the back-off stopped the PT: it escapes at its next
  // runtime call or poll (pt_stop "backoff").
  bool pt_backed_off() const { return pt_backed_off_.load(std::memory_order_acquire); }
  // The back-off's CPU rule (PT thread only; cheap between its 50 ms windows): called at
  // every prefetch and every poll of the PT.
  void check_pt_cpu();

  // ---- handles the MT hands to the PT after it started (ppios_mt_handoff_*): a helper
  // opened a file the PT reads later. Slots are numbered by ppios-cc, one per statement.
  // Whether a PT runs that could take a handle (else the MT does not reopen anything).
  bool pt_running();
  void handoff_post(unsigned slot, intptr_t handle);
  // Waits until the MT posted `slot`; false if the runtime stops first.
  bool handoff_take(unsigned slot, intptr_t *handle);
  uint64_t mt_transfers_started() const { return mt_started_.load(std::memory_order_acquire); }
  // ppios_pt_speculate: the PT, in a loop it runs past an exit it cannot evaluate, waits
  // once it is more than kSpeculationWindow transfers ahead of the MT, until it is half
  // that ahead (one wake-up per half window).
  static constexpr uint64_t kSpeculationWindow = 16;
  void hold_speculation(uint64_t seq);
  // How far the MT's stdio streams have read each file (the file offset just past their
  // buffers, noted with the MT's transfer count at each top-up of a line or formatted
  // read): the PT's speculative formatted reads stay a bounded lead ahead of it
  // (mt_stream_end, -1 if unknown), and number each piece they prefetch with the MT
  // transfer that will want it, estimated from the bytes per transfer so far
  // (mt_stream_transfer_at): a piece is late only once the MT gets there.
  void note_mt_stream_end(const FileKey &key, off_t end);
  off_t mt_stream_end(const FileKey &key);
  uint64_t mt_stream_transfer_at(const FileKey &key, off_t offset);

  // Stops the PT and WTs, writes stats and trace. Idempotent.
  void shutdown();

 private:
  friend class MtStorageAccess;
  struct WaitingJob {
    int fd;
    off_t offset;
    size_t requested;
    uint64_t seq;
    const char *site;  // ThreadState::pt_site of the PT's call
  };

  explicit Runtime(const Config &config);
  // Fetches into the cache; with `copy_to`, also copies what it fetched there and
  // returns how many leading bytes that is. A fetch is begin_fetch (back-off, lateness,
  // the cache reservation), then fill_whole (pp) or fill_in_subreads, which end_fetch.
  size_t fetch(int fd, const FileKey &key, const FileStamp &stamp, off_t offset, size_t length,
               uint64_t seq, int trace_tid, char *copy_to = nullptr);
  CacheEntry *begin_fetch(const FileKey &key, const FileStamp &stamp, off_t offset,
                          size_t length, uint64_t seq, int trace_tid);
  size_t fill_whole(CacheEntry *entry, int fd, const FileKey &key, off_t offset, size_t length,
                    uint64_t seq, int trace_tid, char *copy_to);
  size_t fill_in_subreads(CacheEntry *entry, int fd, const FileKey &key, off_t offset,
                          size_t length, uint64_t seq, int trace_tid, char *copy_to);
  size_t end_fetch(CacheEntry *entry, const FileKey &key, bool ok, uint64_t fetched, bool late,
                   char *copy_to);

  // ---- PT readers (PPIOS_PT_READERS > 1, PPIOS_MODE=ppios). One thread reading one
  // stream cannot use more than a stream's share of a device whose optimum is several
  // streams, nor the slots its MT leaves free while it computes. The PT reserves each
  // prefetch's entry (in program order) and hands its fill to a reader, and runs on while
  // fewer than PPIOS_PT_READERS fills are handed out, or one once it is ahead of the MT
  // (reader_fills_allowed). Each reader fills one entry in sub-reads under a system slot of
  // its own, like a PT: the coordinator's cap and yield requests keep the MTs first, and
  // the MT's claim of a prefetch waits for that prefetch's sub-read in progress only.
  // prefetch_copy (the PT needs the bytes itself) still fills on the PT.
  struct ReaderJob {
    int fd;  // the reader's own copy, closed when the fill is done
    FileKey key;
    off_t offset;
    size_t length;
    uint64_t seq;
    CacheEntry *entry;
    const char *site;  // ThreadState::pt_site of the PT's call
  };
  bool pt_uses_readers() const;
  // How many fills may be in flight when the PT hands out the prefetch for transfer `seq`.
  size_t reader_fills_allowed(uint64_t seq) const;
  void hand_to_reader(int fd, const FileKey &key, const FileStamp &stamp, off_t offset,
                      size_t length, uint64_t seq);
  void reader_main(int index);
  std::mutex readers_mu_;
  std::condition_variable readers_cv_;       // a job or the end, for the readers
  std::condition_variable readers_room_cv_;  // a reader free, for the PT
  std::deque<ReaderJob> reader_jobs_;        // guarded by readers_mu_, as are the counts
  int reader_threads_ = 0;
  int readers_idle_ = 0;
  size_t readers_busy_ = 0;

  // Wait until the MT has completed every transfer before `seq` / started `seq`, or
  // the runtime stops.
  static void limit_thread_arenas();
  void wait_for_mt(uint64_t seq);
  void wait_for_mt_start(uint64_t seq);
  // The PT's slice ended (on the PT thread, after it released its resources).
  void pt_ended(PtStop why);
  // Back-off: counts a decision.
  void count_backoff(BackoffReason why);
  void count_site(uint64_t bytes, bool late);
  void mt_done(uint64_t seq);
  void notify_progress();
  void waiting_thread_main(int index);
  void run_waiting_job(const WaitingJob &job, int trace_tid);
  int rank() const;
  void write_outputs();
  uint64_t lead_of(uint64_t seq) const;
  // True once the MT has started its transfer number `seq`: prefetching it is too late.
  bool mt_has_started(uint64_t seq) const;

  const Config config_;
  const uint64_t start_ns_;
  PrefetchCache cache_;
  Coherence coherence_{cache_, ChangeGenerations::node(), config_.job_on_one_node};
  PrefetchBackoff backoff_;
  IoScheduler scheduler_;
  std::unique_ptr<Coordinator> coordinator_;
  Trace trace_;
  Stats stats_;
  CallSiteStats sites_;  // PPIOS_STATS "sites"

  // MT progress: transfers started and completed. The threads that wait for it (WTs,
  // the PT after a synchronization or in its speculation window) register the count they
  // wait for, and the MT wakes them when it gets there, not at every transfer: a PT held
  // in the window of a loop over small records would otherwise be woken twice per read.
  std::atomic<uint64_t> mt_started_{0};
  std::atomic<uint64_t> mt_completed_{0};
  std::mutex progress_mu_;
  std::condition_variable progress_cv_;
  std::multiset<uint64_t> start_waits_, done_waits_;  // guarded by progress_mu_
  std::atomic<uint64_t> wake_at_start_{UINT64_MAX};   // their minimums
  std::atomic<uint64_t> wake_at_done_{UINT64_MAX};
  void wait_progress(const std::atomic<uint64_t> &progress, uint64_t target,
                     std::multiset<uint64_t> &waits, std::atomic<uint64_t> &wake_at);

  struct MtStreamProgress {
    off_t first_end = -1, end = -1;
    uint64_t first_transfer = 0, transfer = 0;
  };
  std::mutex mt_streams_mu_;
  std::map<FileKey, MtStreamProgress> mt_streams_;  // guarded by mt_streams_mu_

  // Waiting threads and their jobs, lowest sequence number first.
  std::mutex wt_mu_;
  std::condition_variable wt_cv_;       // a job or the end, for the waiting threads
  std::condition_variable wt_room_cv_;  // room in wt_jobs_, for the PT
  std::deque<WaitingJob> wt_jobs_;
  int wt_threads_ = 0;
  int wt_idle_ = 0;
  int wt_running_ = 0;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> pt_backed_off_{false};
  // PT thread only: check_pt_cpu's last look (wall, PT CPU, MT CPU and run-queue wait)
  // and how many bad windows in a row it saw.
  struct CpuWindow {
    uint64_t wall_ns = 0, pt_ns = 0, mt_cpu_ns = 0, mt_delay_ns = 0;
  };
  CpuWindow cpu_window_;
  int cpu_bad_windows_ = 0;
  pid_t mt_tid_ = 0;                // the thread that started the PT (set before it runs)
  std::mutex handoff_mu_;
  std::condition_variable handoff_cv_;
  std::map<unsigned, intptr_t> handoffs_;

  std::mutex lifecycle_mu_;
  std::condition_variable lifecycle_cv_;
  bool pt_started_ = false;
  bool pt_running_ = false;
  pthread_t pt_thread_{};
  std::atomic<int> pt_stop_{static_cast<int>(PtStop::Running)};
  bool shut_down_ = false;
  int rank_ = -1;
};
}  // namespace ppios
