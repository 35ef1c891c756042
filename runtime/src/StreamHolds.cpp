#include "StreamHolds.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ChangeGenerations.h"
#include "Runtime.h"
#include "WrapSupport.h"

namespace ppios {

namespace {

// glibc's flag of a stream that cannot write (libio/libio.h, _IO_NO_WRITES: a stream
// opened "r", or closed).
constexpr int kNoWrites = 0x0008;

bool writing_mode(const char *mode) {
  return mode != nullptr && (mode[0] == 'w' || mode[0] == 'a' || std::strchr(mode, '+') != nullptr);
}

ChangeGenerations &table() { return ChangeGenerations::node(); }

}  // namespace

bool writable_regular_file(int fd, FileKey *key) {
  const int saved_errno = errno;
  struct stat st;
  bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (ok) {
    const int access = fcntl(fd, F_GETFL);
    ok = access != -1 && (access & O_ACCMODE) != O_RDONLY;
  }
  if (ok) *key = key_of(st);
  errno = saved_errno;
  return ok;
}

StreamHolds &StreamHolds::get() {
  static StreamHolds *holds = new StreamHolds;  // never destroyed: streams close at exit
  return *holds;
}

size_t StreamHolds::start_of(FILE *stream) const {
  return static_cast<size_t>((reinterpret_cast<uintptr_t>(stream) >> 4) * 0x9e3779b97f4a7c15ULL >> 56) % kSlots;
}

void StreamHolds::hold(FILE *stream, const FileKey &key, bool entered) {
  if (entered) Runtime::get().coherence().hold(key);
  else table().hold(key);
  const size_t start = start_of(stream);
  for (size_t i = 0; i < kSlots; ++i) {
    Slot &slot = slots_[(start + i) % kSlots];
    uintptr_t free = 0;
    if (slot.stream.load(std::memory_order_relaxed) != 0) continue;
    if (!slot.stream.compare_exchange_strong(free, kBusy, std::memory_order_acquire)) continue;
    slot.key = key;
    slot.pid = getpid();
    slot.entered = entered;
    slot.stream.store(reinterpret_cast<uintptr_t>(stream), std::memory_order_release);
    return;
  }
  // No slot left: the hold stays for the life of the process (and is given back when it is
  // found gone). It only drops more.
}

StreamHolds::Taken StreamHolds::take(FILE *stream) {
  Taken taken;
  const uintptr_t mine = reinterpret_cast<uintptr_t>(stream);
  if (stream == nullptr) return taken;
  const size_t start = start_of(stream);
  for (size_t i = 0; i < kSlots; ++i) {
    Slot &slot = slots_[(start + i) % kSlots];
    uintptr_t expected = mine;
    if (slot.stream.load(std::memory_order_acquire) != mine) continue;
    if (!slot.stream.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) continue;
    taken.any = true;
    taken.key = slot.key;
    taken.entered = slot.entered;
    taken.ours = slot.pid == getpid();
    slot.stream.store(0, std::memory_order_release);
    return taken;
  }
  return taken;
}

void StreamHolds::give_back(const Taken &taken, bool entered) {
  if (!taken.any) return;
  const int saved_errno = errno;
  if (!taken.ours) {
    // A forked parent's slot that the child did not adopt (it was made where no handler
    // ran): the hold is the parent's to give back; what the close flushed is a change.
    table().bump(taken.key);
    if (entered) Runtime::get().coherence().changed(taken.key);
  } else if (taken.entered && entered) {
    Runtime::get().coherence().unhold(taken.key);  // bumps first, then gives it back
  } else {
    // A hold taken or given back where the runtime may not be entered: the table's is
    // given back (bumping first); this process's cache keeps a hold taken through the
    // runtime (it only drops more), and drops what it has of the file.
    table().unhold(taken.key);
    if (entered) Runtime::get().coherence().changed(taken.key);
  }
  errno = saved_errno;
}

void StreamHolds::opened(FILE *stream, const char *mode, bool truncates, bool entered) {
  if (stream == nullptr || !writing_mode(mode)) return;
  FileKey key;
  if (!writable_regular_file(stream->_fileno, &key)) return;
  if (truncates) {
    if (entered) Runtime::get().coherence().changed(key);
    else table().bump(key);
  }
  hold(stream, key, entered);
}

void StreamHolds::hold_unless_held(FILE *stream, const FileKey &key, bool entered) {
  const uintptr_t mine = reinterpret_cast<uintptr_t>(stream);
  const size_t start = start_of(stream);  // where its slot mostly is: one look per fwrite
  for (size_t i = 0; i < kSlots; ++i)
    if (slots_[(start + i) % kSlots].stream.load(std::memory_order_acquire) == mine) return;
  hold(stream, key, entered);
}

void StreamHolds::standard_fd_changed(int fd, bool entered) {
  if (fd != STDOUT_FILENO && fd != STDERR_FILENO) return;
  FILE *stream = fd == STDOUT_FILENO ? stdout : stderr;
  if (stream == nullptr) return;
  FileKey now;
  const bool writes = stream->_fileno == fd && !(stream->_flags & kNoWrites) && writable_regular_file(fd, &now);
  const uintptr_t mine = reinterpret_cast<uintptr_t>(stream);
  const size_t start = start_of(stream);
  for (size_t i = 0; i < kSlots; ++i) {
    const Slot &slot = slots_[(start + i) % kSlots];
    if (slot.stream.load(std::memory_order_acquire) != mine) continue;
    if (writes && slot.key == now && slot.pid == getpid()) return;  // still that file
    break;
  }
  // Held before the old one is given back: bytes still in the buffer reach the new file.
  Taken old = take(stream);
  if (writes) hold(stream, now, entered);
  give_back(old, entered);
}

void StreamHolds::hold_standard_streams(bool entered) {
  standard_fd_changed(STDOUT_FILENO, entered);
  standard_fd_changed(STDERR_FILENO, entered);
}

void StreamHolds::adopt_after_fork() {
  const pid_t self = getpid();
  for (Slot &slot : slots_) {
    if (slot.stream.load(std::memory_order_relaxed) <= kBusy || slot.pid == self) continue;
    table().hold(slot.key);
    slot.pid = self;
    slot.entered = false;
  }
}

}  // namespace ppios

namespace ppios {
void fd_repointed(int fd, bool entered) { StreamHolds::get().standard_fd_changed(fd, entered); }
}  // namespace ppios
