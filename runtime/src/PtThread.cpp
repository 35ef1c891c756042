#include "PtThread.h"

#include "GlibcStream.h"

#include <fcntl.h>
#include <setjmp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ErrnoGuard.h"
#include "PrefetchCache.h"
#include "Runtime.h"
#include "Signals.h"
#include "ThreadState.h"
#include "ppios/ppios.h"

namespace ppios {

thread_local ThreadState t_thread __attribute__((tls_model("initial-exec")));
std::atomic<bool> g_forked_child{false};

namespace {

// There is one PT per process, so one escape point; t_armed says whether this thread is
// the PT and inside run_pt_slice.
sigjmp_buf g_escape;
thread_local bool t_armed __attribute__((tls_model("initial-exec"))) = false;

// The signal that stopped the slice, written by the fault handler (lock-free) and read at
// exit for the statistics: the address first, the signal last (0: none).
std::atomic<uintptr_t> g_fault_address{0};
std::atomic<bool> g_fault_has_address{false};
std::atomic<int> g_fault_signal{0};

constexpr size_t kAltStackBytes = 64 << 10;

// Async-signal-safe formatting for the fault line of PPIOS_VERBOSE=1.
size_t append(char *out, size_t at, size_t cap, const char *text) {
  while (*text && at + 1 < cap) out[at++] = *text++;
  return at;
}

size_t append_unsigned(char *out, size_t at, size_t cap, uintptr_t value, int base) {
  char digits[32];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % static_cast<uintptr_t>(base)];
    value /= static_cast<uintptr_t>(base);
  } while (value != 0);
  while (n > 0 && at + 1 < cap) out[at++] = digits[--n];
  return at;
}

const char *fault_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
  }
  return "?";
}

}  // namespace

const char *pt_stop_name(PtStop why) {
  switch (why) {
    case PtStop::Running: return "running";
    case PtStop::Done: return "done";
    case PtStop::Exit: return "exit";
    case PtStop::Fault: return "fault";
    case PtStop::Budget: return "budget";
    case PtStop::Stopped: return "stopped";
    case PtStop::Bounds: return "bounds";
    case PtStop::Backoff: return "backoff";
    case PtStop::NoThread: return "no_thread";
  }
  return "?";
}

namespace {
// Kept apart from run_pt_slice so that no local of the latter lives across the escape.
int run_with_escape(void (*entry)(void *), void *ctx) {
  int why = sigsetjmp(g_escape, 1);
  if (why == 0) {
    t_armed = true;
    entry(ctx);
    why = static_cast<int>(PtStop::Done);
  }
  t_armed = false;
  t_thread.runtime_depth = 0;  // an escape may have left runtime entry points mid-way
  return why;
}
}  // namespace

PtStop run_pt_slice(void (*entry)(void *), void *ctx) {
  // The fault handler must run even when the fault is a stack overflow of the slice.
  void *alt = std::malloc(kAltStackBytes);
  if (alt != nullptr) {
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = kAltStackBytes;
    if (sigaltstack(&ss, nullptr) != 0) {
      std::free(alt);
      alt = nullptr;
    }
  }
  SignalTable::get().install_fault_net();
  int why = run_with_escape(entry, ctx);
  if (alt != nullptr) {
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
    std::free(alt);
  }
  return static_cast<PtStop>(why);
}

void pt_escape(PtStop why) {
  if (!t_armed) {
    static const char kMisuse[] = "ppios: ppios_pt_exit called outside the prefetch thread\n";
    ssize_t ignored = write(STDERR_FILENO, kMisuse, sizeof kMisuse - 1);
    (void)ignored;
    std::abort();
  }
  siglongjmp(g_escape, static_cast<int>(why));
}

void pt_checkpoint() {
  if (t_thread.role != ThreadRole::PT || !t_armed) return;
  Runtime &rt = Runtime::get();
  if (rt.stopping()) pt_escape(PtStop::Stopped);
  rt.check_pt_cpu();
  if (rt.pt_backed_off()) pt_escape(PtStop::Backoff);
}

void pt_fault_escape(int sig, const siginfo_t *info) {
  if (t_thread.role != ThreadRole::PT || !t_armed || t_thread.runtime_depth > 0) return;
  // Only a fault the kernel reports (si_code > 0) has an address; in a raised signal's
  // siginfo that place holds its sender.
  const bool has_address = info != nullptr && info->si_code > 0;
  const uintptr_t address = has_address ? reinterpret_cast<uintptr_t>(info->si_addr) : 0;
  g_fault_address.store(address, std::memory_order_relaxed);
  g_fault_has_address.store(has_address, std::memory_order_relaxed);
  g_fault_signal.store(sig, std::memory_order_release);
  if (Runtime::get().config().verbose) {  // it exists: it started this PT
    ErrnoGuard errno_guard;
    char line[200];
    size_t n = append(line, 0, sizeof line, "ppios: warning: the prefetch thread stopped after signal ");
    n = append_unsigned(line, n, sizeof line, static_cast<uintptr_t>(sig), 10);
    n = append(line, n, sizeof line, " (");
    n = append(line, n, sizeof line, fault_name(sig));
    n = append(line, n, sizeof line, ")");
    if (has_address) {
      n = append(line, n, sizeof line, " at 0x");
      n = append_unsigned(line, n, sizeof line, address, 16);
    }
    n = append(line, n, sizeof line, "; the program goes on without prefetching\n");
    ssize_t ignored = write(STDERR_FILENO, line, n);
    (void)ignored;
  }
  siglongjmp(g_escape, static_cast<int>(PtStop::Fault));
}

bool pt_fault_seen(int *sig, uintptr_t *address, bool *has_address) {
  *sig = g_fault_signal.load(std::memory_order_acquire);
  *address = g_fault_address.load(std::memory_order_relaxed);
  *has_address = g_fault_has_address.load(std::memory_order_relaxed);
  return *sig != 0;
}

void pt_probe_buffer(void *buf, size_t count) {
  if (count == 0) return;
  volatile char *p = static_cast<volatile char *>(buf);
  const size_t page = 4096;
  for (size_t at = 0; at < count; at += page) p[at] = p[at];
  p[count - 1] = p[count - 1];
}

void pt_check_room(const void *buf, size_t count) {
  if (count > PtResources::get().block_room(buf)) pt_escape(PtStop::Bounds);
}

// ------------------------------------------------------------------ PtResources

// The header generated code reads (ppios.h) is the end of PtResources::Block.
static_assert(sizeof(ppios_pt_block_header) == 16, "two words");

namespace {
std::vector<std::string> *g_environment = nullptr;  // written once, before the PT starts
}  // namespace

void snapshot_environment() {
  if (g_environment != nullptr) return;
  auto *copy = new std::vector<std::string>;
  for (char **entry = environ; entry != nullptr && *entry != nullptr; ++entry) copy->emplace_back(*entry);
  g_environment = copy;
}

const char *pt_getenv(const char *name) {
  if (g_environment == nullptr || name == nullptr || *name == '\0' || std::strchr(name, '=') != nullptr)
    return nullptr;
  const size_t length = std::strlen(name);
  for (const std::string &entry : *g_environment)
    if (entry.size() > length && entry[length] == '=' && entry.compare(0, length, name) == 0)
      return entry.c_str() + length + 1;
  return nullptr;
}

PtResources &PtResources::get() {
  static PtResources *resources = new PtResources;  // never destroyed: the PT may outlive main()
  return *resources;
}

void PtResources::set_fd_bit(std::atomic<uint64_t> *bits, int fd, bool on) {
  if (fd < 0 || fd >= kMaxFds) return;
  const uint64_t bit = uint64_t{1} << (fd % 64);
  if (on) bits[fd / 64].fetch_or(bit, std::memory_order_acq_rel);
  else bits[fd / 64].fetch_and(~bit, std::memory_order_acq_rel);
}

bool PtResources::fd_bit(const std::atomic<uint64_t> *bits, int fd) {
  return fd >= 0 && fd < kMaxFds && (bits[fd / 64].load(std::memory_order_acquire) >> (fd % 64) & 1) != 0;
}

void PtResources::own_fd(int fd) { set_fd_bit(fd_bits_, fd, true); }
void PtResources::disown_fd(int fd) { set_fd_bit(fd_bits_, fd, false); }
bool PtResources::owns_fd(int fd) const { return fd_bit(fd_bits_, fd); }

bool PtResources::runtime_owns_fd(int fd) const {
  return fd_bit(fd_bits_, fd) || fd_bit(helper_fd_bits_, fd);
}

int PtResources::dup_high(int fd) {
  static const int base = high_fd_base();
  ErrnoGuard errno_guard;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
  if (high >= kMaxFds) {  // no bit for it: the program's calls could reach it
    get().close_runtime_fd(high);
    high = -1;
  }
  return high;
}

int PtResources::dup_for_helper(int fd) {
  const int copy = dup_high(fd);
  set_fd_bit(helper_fd_bits_, copy, true);
  return copy;
}

void PtResources::close_helper_fd(int fd) {
  ErrnoGuard errno_guard;
  // Given back before it is closed, as the PT's own (ppios_pt_close): once closed, the
  // number may be the program's next open()'s, which must not fail.
  set_fd_bit(helper_fd_bits_, fd, false);
  close_runtime_fd(fd);
}

void PtResources::own_stream(FILE *stream) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.push_back(stream);
}

void PtResources::disown_stream(FILE *stream) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream), streams_.end());
}

bool PtResources::owns_stream(FILE *stream) {
  if (stream == nullptr) return false;
  std::lock_guard<std::mutex> lock(streams_mu_);
  return std::find(streams_.begin(), streams_.end(), stream) != streams_.end();
}

bool PtResources::backs_stream(int fd) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  for (FILE *stream : streams_)
    if (fileno(stream) == fd) return true;
  return false;
}

int PtResources::open_regular(const char *path) {
  // Not even opened unless it is a regular file: opening a FIFO's read end would let a
  // writer waiting in open() go on, and then die of SIGPIPE when the PT closes it.
  struct stat before;
  if (stat(path, &before) != 0) return -1;
  if (!S_ISREG(before.st_mode)) {
    errno = ENXIO;
    return -1;
  }
  // O_NONBLOCK: opening a FIFO without a writer must not block; it is cleared again once
  // the file is known to be regular (where it changes nothing anyway).
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close_runtime_fd(fd);
    errno = ENXIO;
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return adopt_fd(fd);
}

// Half the descriptor limit: far above what programs normally reach, below the limit.
int PtResources::high_fd_base() {
  struct rlimit limit;
  rlim_t cur = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
  if (cur == RLIM_INFINITY || cur > (1 << 16)) cur = 1 << 16;
  return static_cast<int>(std::max<rlim_t>(cur / 2, 3));
}

int PtResources::adopt_fd(int fd) {
  static const int base = high_fd_base();
  if (fd < base) {
    const int high = dup_high(fd);
    if (high >= 0) {
      ErrnoGuard errno_guard;
      close_runtime_fd(fd);
      fd = high;
    }
  }
  own_fd(fd);
  return fd;
}

void PtResources::note_program_lock(int fd) {
  ErrnoGuard errno_guard;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  std::lock_guard<std::mutex> lock(locks_mu_);
  locked_files_.insert(key_of(st));
  any_locks_.store(true, std::memory_order_release);
}

void PtResources::program_closed(const FileKey &key) {
  ErrnoGuard errno_guard;
  std::lock_guard<std::mutex> lock(locks_mu_);
  locked_files_.erase(key);
  auto [first, last] = deferred_closes_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    set_fd_bit(helper_fd_bits_, it->second, false);
    close(it->second);
  }
  deferred_closes_.erase(first, last);
}

bool PtResources::defer_close_locked(int fd) {
  if (locked_files_.empty()) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || locked_files_.count(key_of(st)) == 0) return false;
  deferred_closes_.emplace(key_of(st), fd);
  set_fd_bit(helper_fd_bits_, fd, true);  // still open: not the program's to use
  return true;
}

void PtResources::close_runtime_fd(int fd) {
  ErrnoGuard errno_guard;
  if (!program_may_hold_locks()) {
    close(fd);
    return;
  }
  std::lock_guard<std::mutex> lock(locks_mu_);
  if (!defer_close_locked(fd)) close(fd);
}

void PtResources::close_runtime_stream(FILE *stream) {
  ErrnoGuard errno_guard;
  if (!program_may_hold_locks()) {
    fclose(stream);
    return;
  }
  std::lock_guard<std::mutex> lock(locks_mu_);
  // Kept open: the stream is freed without its descriptor.
  if (defer_close_locked(fileno(stream))) detach_stream_descriptor(stream);
  fclose(stream);
}

void *PtResources::allocate(size_t bytes, PrefetchCache &cache) {
  if (bytes > SIZE_MAX - sizeof(Block)) return nullptr;
  if (!cache.take_external(bytes)) return nullptr;
  auto *block = static_cast<Block *>(std::malloc(sizeof(Block) + bytes));
  if (block == nullptr) {
    cache.give_external(bytes);
    return nullptr;
  }
  static_assert(sizeof(Block) == 32 && offsetof(Block, key) == sizeof(Block) - sizeof(ppios_pt_block_header),
                "the public header ends the block's");
  block->key = reinterpret_cast<uintptr_t>(block + 1) ^ PPIOS_PT_BLOCK_KEY;
  block->bytes = bytes;
  block->prev = nullptr;
  block->next = blocks_;
  if (blocks_ != nullptr) blocks_->prev = block;
  blocks_ = block;
  return block + 1;
}

void PtResources::release(void *p, PrefetchCache &cache) {
  if (p == nullptr || !owns_block(p)) return;  // not the PT's: never the PT's to free
  Block *block = static_cast<Block *>(p) - 1;
  block->key = 0;  // a store through a stale pointer to it escapes
  if (block->prev != nullptr) block->prev->next = block->next;
  else blocks_ = block->next;
  if (block->next != nullptr) block->next->prev = block->prev;
  cache.give_external(block->bytes);
  std::free(block);
}

// Whether p came from allocate(): the PT frees and reallocates only its own blocks (a
// generated free() of memory the PT did not allocate must not reach the allocator). The
// list is short: PT code allocates little and frees what it allocates.
bool PtResources::owns_block(const void *p) const {
  for (const Block *b = blocks_; b != nullptr; b = b->next)
    if (b + 1 == p) return true;
  return false;
}

size_t PtResources::block_room(const void *p) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (const Block *b = blocks_; b != nullptr; b = b->next) {
    const auto begin = reinterpret_cast<uintptr_t>(b + 1);
    if (at >= begin && at - begin <= b->bytes) return b->bytes - (at - begin);
  }
  return SIZE_MAX;
}

void *PtResources::reallocate(void *p, size_t bytes, PrefetchCache &cache) {
  if (p == nullptr) return allocate(bytes, cache);
  if (!owns_block(p)) return nullptr;
  Block *old = static_cast<Block *>(p) - 1;
  void *fresh = allocate(bytes, cache);
  if (fresh == nullptr) return nullptr;  // the old block stays, as with realloc
  std::memcpy(fresh, p, std::min(bytes, old->bytes));
  release(p, cache);
  return fresh;
}

void PtResources::release_all(PrefetchCache &cache) {
  std::vector<FILE *> streams;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams.swap(streams_);
  }
  for (FILE *stream : streams) {
    disown_fd(fileno(stream));
    auto line_buffer = take_line_buffer(stream);  // freed after the close
    close_runtime_stream(stream);
  }
  for (int word = 0; word < kMaxFds / 64; ++word) {
    uint64_t bits = fd_bits_[word].exchange(0, std::memory_order_acq_rel);
    for (int bit = 0; bits != 0; ++bit, bits >>= 1)
      if (bits & 1) close_runtime_fd(word * 64 + bit);
  }
  while (blocks_ != nullptr) release(blocks_ + 1, cache);
}

}  // namespace ppios
