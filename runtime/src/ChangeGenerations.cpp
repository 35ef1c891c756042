#include "ChangeGenerations.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace ppios {

// One hold, in one word (claimed and freed whole): the holder's pid in the high half,
// the counter it holds in the low half; 0 is a free record, a pid of kReclaiming one
// being given back. A record is claimed after its hold was counted and freed after the
// hold was given back, so a record always stands for a counted hold.
struct HoldRecord {
  std::atomic<uint64_t> word;
};

namespace {

constexpr uint32_t kReclaiming = UINT32_MAX;
uint64_t record_word(uint32_t pid, uint32_t index) { return (static_cast<uint64_t>(pid) << 32) | index; }

constexpr uint64_t kMagic = 0x7070696f7367656eULL;  // "ppiosgen"
constexpr uint64_t kVersion = 5;

struct Layout {
  std::atomic<uint64_t> magic;
  std::atomic<uint64_t> version;
  alignas(64) std::atomic<uint64_t> total;  // every bump, of any file
  std::atomic<uint64_t> everything;         // bump_everything()s
  alignas(64) std::atomic<uint64_t> counters[ChangeGenerations::kCounters];
  alignas(64) std::atomic<uint32_t> holders[ChangeGenerations::kCounters];
  alignas(64) HoldRecord records[ChangeGenerations::kHoldRecords];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "counters are shared between processes");

// A segment someone else could have planted or can write would let them hide a change:
// it must be a regular file of ours, with no access for anyone else, of the right size.
std::string untrusted_reason(const struct stat &st) {
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  if (st.st_uid != geteuid()) return "belongs to uid " + std::to_string(st.st_uid) + ", not to this user";
  if (st.st_mode & 077) return "is accessible to other users";
  if (static_cast<size_t>(st.st_size) != sizeof(Layout)) return "has an unexpected size";
  return "";
}

}  // namespace

// The layout's version is part of the name: processes of another ppios version on the
// node keep a segment of their own (a segment of another size would be refused, and
// every acquire point would then drop everything).
std::string ChangeGenerations::segment_name() {
  return "ppios-generations-v" + std::to_string(kVersion) + "." + std::to_string(geteuid());
}

ChangeGenerations *ChangeGenerations::open_segment(const std::string &path, std::string *why) {
  auto *table = new ChangeGenerations;
  auto fail = [&](const std::string &what) {
    table->why_ = path + " " + what;
    if (why) *why = table->why_;
    return table;
  };
  // O_NOFOLLOW: a symlink planted under the name is refused, not followed.
  const int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL, 0600);
  if (fd >= 0) {
    // posix_fallocate zero-fills: every counter starts at 0, and the magic is written
    // after. It allocates every page now: a size set with ftruncate alone leaves tmpfs
    // pages to their first write, a SIGBUS when /dev/shm is full.
    int e = fchmod(fd, 0600) != 0 ? errno : posix_fallocate(fd, 0, sizeof(Layout));
    if (e != 0) {
      close(fd);
      unlink(path.c_str());
      return fail(std::string("cannot be set up: ") + std::strerror(e));
    }
  } else if (errno == EEXIST) {
    fd = ::open(path.c_str(), flags);
    if (fd < 0) return fail(std::string("cannot be opened: ") + std::strerror(errno));
  } else {
    return fail(std::string("cannot be created: ") + std::strerror(errno));
  }
  struct stat st;
  // A creator may still be sizing it: a zero size for a moment is no reason to give up.
  for (int tries = 0; fstat(fd, &st) == 0 && st.st_size == 0 && tries < 1000; ++tries) usleep(1000);
  std::string reason = fstat(fd, &st) == 0 ? untrusted_reason(st) : std::strerror(errno);
  // A segment an older build sized with ftruncate may have pages never written yet.
  if (int e = reason.empty() ? posix_fallocate(fd, 0, sizeof(Layout)) : 0; e != 0)
    reason = std::string("cannot be allocated: ") + std::strerror(e);
  if (!reason.empty()) {
    close(fd);
    return fail(reason + "; prefetched bytes are dropped at every synchronization instead");
  }
  table->path_ = path;
  table->segment_dev_ = st.st_dev;
  table->segment_ino_ = st.st_ino;
  void *mem = mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return fail(std::string("cannot be mapped: ") + std::strerror(errno));
  auto *layout = static_cast<Layout *>(mem);
  // Counters only ever grow, from a zero-filled segment: the header is informative, and a
  // segment of another version is refused rather than read with another meaning.
  uint64_t expected = 0;
  layout->magic.compare_exchange_strong(expected, kMagic);
  expected = 0;
  layout->version.compare_exchange_strong(expected, kVersion);
  if (layout->magic.load() != kMagic || layout->version.load() != kVersion) {
    munmap(mem, sizeof(Layout));
    return fail("was made by another version of ppios");
  }
  table->counters_ = layout->counters;
  table->total_ = &layout->total;
  table->everything_ = &layout->everything;
  table->holders_ = layout->holders;
  table->records_ = layout->records;
  table->reclaim_dead_holders();
  return table;
}

ChangeGenerations &ChangeGenerations::node() {
  static ChangeGenerations *table = open_segment("/dev/shm/" + segment_name(), nullptr);
  return *table;
}

ChangeGenerations *ChangeGenerations::make_private() {
  auto *table = new ChangeGenerations;
  table->counters_ = new std::atomic<uint64_t>[kCounters]();
  table->total_ = new std::atomic<uint64_t>(0);
  table->everything_ = new std::atomic<uint64_t>(0);
  table->holders_ = new std::atomic<uint32_t>[kCounters]();
  table->records_ = new HoldRecord[kHoldRecords]();
  return table;
}

ChangeGenerations *ChangeGenerations::make_unavailable() {
  auto *table = new ChangeGenerations;
  table->why_ = "unavailable (test)";
  return table;
}

// A file's counter is picked by its inode number alone, not its device: one file can show
// two device numbers (a file of an overlay's layer, seen through the overlay and through
// the layer; one NFS export mounted twice), and its holds and bumps must meet under
// either. An overlay that spans file systems (xino) puts the layer's index in the inode
// number's top bits: the low 48 bits are the file's own. Files of other devices that share
// those bits share a counter, which only drops more.
size_t ChangeGenerations::index_of(const FileKey &key) const {
  uint64_t h = (static_cast<uint64_t>(key.ino) & ((uint64_t{1} << 48) - 1)) * 0x9e3779b97f4a7c15ULL;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return static_cast<size_t>(h & (kCounters - 1));
}

uint64_t ChangeGenerations::current(const FileKey &key) const {
  if (!counters_) return 0;
  const size_t i = index_of(key);
  // The holders first: unhold() bumps before it gives the hold back, so a look that
  // finds the hold given back finds the bump too.
  if (holders_[i].load(std::memory_order_seq_cst) != 0) return kHeld;
  return counters_[i].load(std::memory_order_seq_cst) + everything_->load(std::memory_order_seq_cst);
}

void ChangeGenerations::hold(const FileKey &key) {
  if (!counters_) return;
  const uint32_t i = static_cast<uint32_t>(index_of(key));
  holders_[i].fetch_add(1, std::memory_order_seq_cst);
  total_->fetch_add(1, std::memory_order_seq_cst);  // acquire points look again
  const uint64_t mine = record_word(static_cast<uint32_t>(getpid()), i);
  for (size_t r = 0; r < kHoldRecords; ++r) {
    uint64_t free = 0;
    if (records_[r].word.load(std::memory_order_relaxed) != 0) continue;
    if (records_[r].word.compare_exchange_strong(free, mine, std::memory_order_seq_cst)) return;
  }
  // No record left: the hold is kept until the segment is made anew (it only drops more).
}

void ChangeGenerations::unhold(const FileKey &key) {
  if (!counters_) return;
  const uint32_t i = static_cast<uint32_t>(index_of(key));
  bump(key);  // before the hold is given back: see current()
  const uint64_t mine = record_word(static_cast<uint32_t>(getpid()), i);
  for (size_t r = 0; r < kHoldRecords; ++r) {
    if (records_[r].word.load(std::memory_order_seq_cst) != mine) continue;
    holders_[i].fetch_sub(1, std::memory_order_seq_cst);
    records_[r].word.store(0, std::memory_order_seq_cst);
    return;
  }
  holders_[i].fetch_sub(1, std::memory_order_seq_cst);  // a hold that found no record
}

void ChangeGenerations::reclaim_dead_holders() {
  if (!counters_) return;
  const int saved_errno = errno;
  for (size_t r = 0; r < kHoldRecords; ++r) {
    uint64_t word = records_[r].word.load(std::memory_order_seq_cst);
    const uint32_t pid = static_cast<uint32_t>(word >> 32), i = static_cast<uint32_t>(word);
    if (word == 0 || pid == kReclaiming) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (!records_[r].word.compare_exchange_strong(word, record_word(kReclaiming, i), std::memory_order_seq_cst))
      continue;
    if (i < kCounters) {
      counters_[i].fetch_add(1, std::memory_order_seq_cst);  // what it stored is in
      total_->fetch_add(1, std::memory_order_seq_cst);
      holders_[i].fetch_sub(1, std::memory_order_seq_cst);
    }
    records_[r].word.store(0, std::memory_order_seq_cst);
  }
  errno = saved_errno;
}

void ChangeGenerations::bump(const FileKey &key) {
  if (!counters_) return;
  counters_[index_of(key)].fetch_add(1, std::memory_order_seq_cst);
  total_->fetch_add(1, std::memory_order_seq_cst);  // after the file's: see total()
}

void ChangeGenerations::bump_everything() {
  if (!counters_) return;
  everything_->fetch_add(1, std::memory_order_seq_cst);
  total_->fetch_add(1, std::memory_order_seq_cst);  // after: see total()
}

bool ChangeGenerations::replaced() const {
  if (!counters_ || path_.empty()) return false;
  const int saved_errno = errno;
  struct stat st;
  const bool same = stat(path_.c_str(), &st) == 0 && st.st_dev == segment_dev_ && st.st_ino == segment_ino_;
  errno = saved_errno;
  return !same;
}

uint64_t ChangeGenerations::everything() const {
  return everything_ ? everything_->load(std::memory_order_seq_cst) : 0;
}

uint64_t ChangeGenerations::total() const {
  return total_ ? total_->load(std::memory_order_seq_cst) : 0;
}

void ChangeGenerations::for_file_of(int fd, void (ChangeGenerations::*what)(const FileKey &)) {
  if (!counters_) return;
  const int saved_errno = errno;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) (this->*what)(key_of(st));
  errno = saved_errno;
}

}  // namespace ppios
