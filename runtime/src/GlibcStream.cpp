#include "GlibcStream.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "Immortal.h"

#ifdef __GLIBC__
// Gives a stream its buffer as its first read would (libio's allocation, exported since
// glibc 2.2.5): a top-up before the first read needs somewhere to put the bytes.
extern "C" int _IO_doallocbuf(FILE *);
#endif

namespace ppios {
namespace {

#ifdef __GLIBC__
// glibc's stream flags (libio/libio.h, unchanged since glibc 2.1; not installed except
// _IO_EOF_SEEN and _IO_ERR_SEEN, but gnulib's freading/fpurge/fseterr test the same bits).
constexpr unsigned kMagicMask = 0xFFFF0000u;
constexpr unsigned kMagic = 0xFBAD0000u;
constexpr unsigned kNoReads = 0x0004;
constexpr unsigned kNoWrites = 0x0008;
constexpr unsigned kEofSeen = 0x0010;
constexpr unsigned kUnbuffered = 0x0002;
constexpr unsigned kLineBuf = 0x0200;
constexpr unsigned kLinked = 0x0080;
constexpr unsigned kInBackup = 0x0100;
constexpr unsigned kIsFilebuf = 0x2000;

// The operations table glibc keeps right after a FILE (struct _IO_FILE_plus): plain file
// streams share one; mapped ("m" mode), memory and cookie streams each have their own.
const void *operations_of(const FILE *s) {
  return *reinterpret_cast<const void *const *>(reinterpret_cast<const char *>(s) + sizeof(FILE));
}

// Whether seek_stream() may move this stream itself (see the header): a plain file stream
// like stderr. The caller holds the stream's lock.
bool understood(const FILE *s) {
  static const void *const plain_file = operations_of(stderr);
  if (operations_of(s) != plain_file) return false;
  const unsigned flags = static_cast<unsigned>(s->_flags);
  if ((flags & kMagicMask) != kMagic || !(flags & kIsFilebuf)) return false;
  if ((flags & kNoReads) || !(flags & kNoWrites)) return false;  // read-only streams only
  if ((flags & kInBackup) || s->_markers != nullptr || s->_mode > 0) return false;
  return s->_fileno >= 0;
}

// Whether `target` lies in what the buffer holds: glibc's fseek then only moves its read
// pointer (its own test, with the buffer's start in the file derived from _offset, the
// file offset just past the buffered bytes).
bool buffer_holds(const FILE *s, off_t target) {
  if (s->_offset < 0 || s->_IO_read_base == nullptr) return false;
  const off_t start = s->_offset - (s->_IO_read_end - s->_IO_buf_base);
  return target >= start && target < s->_offset;
}

// What glibc's refill does besides reading (libio's __underflow and
// _IO_new_file_underflow), for a refill the runtime stood in for: the stream becomes
// byte-oriented (exit later moves the descriptor back to the stream's position only for
// an oriented stream), and a line-buffered or unbuffered input stream first flushes a
// line-buffered stdout (the prompt before the answer is read).
void as_glibc_refill(FILE *s) {
  if (s->_mode == 0) s->_mode = -1;
  if ((static_cast<unsigned>(s->_flags) & (kLineBuf | kUnbuffered)) && s != stdout) {
    const unsigned out = static_cast<unsigned>(stdout->_flags);
    if ((out & (kLinked | kNoWrites | kLineBuf)) == (kLinked | kLineBuf)) fflush(stdout);
  }
}

// glibc's state after a seek that read nothing: an empty buffer at `target`, the
// descriptor there. _offset, if glibc knew it, follows.
int move_without_reading(FILE *stream, off_t target) {
  // glibc adds what it reads to the offset it knows: a move of the runtime's (the reads
  // an fread served from elsewhere stands for) does the same.
  const off_t from = stream->_offset >= 0 ? lseek(stream->_fileno, 0, SEEK_CUR) : -1;
  if (lseek(stream->_fileno, target, SEEK_SET) < 0) return -1;
  char *base = stream->_IO_buf_base;
  stream->_IO_read_base = stream->_IO_read_ptr = stream->_IO_read_end = base;
  stream->_IO_write_base = stream->_IO_write_ptr = stream->_IO_write_end = base;
  if (stream->_offset >= 0 && from >= 0) stream->_offset += target - from;
  stream->_flags &= ~static_cast<int>(kEofSeen);
  return 0;
}

#endif

}  // namespace

int seek_stream(FILE *stream, off_t offset, int whence) {
#ifdef __GLIBC__
  if (stream == nullptr || whence == SEEK_END) return fseeko(stream, offset, whence);
  StreamLock lock(stream);
  if (!understood(stream)) return fseeko(stream, offset, whence);
  off_t target = offset;
  if (whence == SEEK_CUR) {
    const off_t here = ftello(stream);
    if (here < 0 || __builtin_add_overflow(here, offset, &target))
      return fseeko(stream, offset, whence);  // its own error
  } else if (whence != SEEK_SET) {
    return fseeko(stream, offset, whence);
  }
  if (target < 0 || buffer_holds(stream, target)) return fseeko(stream, target, SEEK_SET);
  if (move_without_reading(stream, target) != 0) return -1;
  stream->_offset = target;  // as glibc's seek: it knows the offset from now on
  return 0;
#else
  return fseeko(stream, offset, whence);
#endif
}

int mt_seek_stream(FILE *stream, off_t offset, int whence, off_t file_size,
                   const std::function<ssize_t(char *to, off_t at, size_t n)> &fill) {
#ifdef __GLIBC__
  if (stream == nullptr) return fseeko(stream, offset, whence);
  StreamLock lock(stream);
  // Every path of libio's _IO_new_file_seekoff but one reads nothing or is rare; that one
  // (a target outside the buffer, not on a block boundary) is done here with fill's bytes.
  if (!understood(stream) || stream->_IO_buf_base == nullptr || file_size < 0)
    return fseeko(stream, offset, whence);
  off_t target = offset;
  if (whence == SEEK_CUR) {
    if (stream->_offset < 0) return fseeko(stream, offset, whence);  // glibc's "dumb" seek
    const off_t ahead = stream->_IO_read_end - stream->_IO_read_ptr;
    if (__builtin_add_overflow(stream->_offset - ahead, offset, &target)) return fseeko(stream, offset, whence);
  } else if (whence == SEEK_END) {
    if (__builtin_add_overflow(file_size, offset, &target)) return fseeko(stream, offset, whence);
  } else if (whence != SEEK_SET) {
    return fseeko(stream, offset, whence);
  }
  if (target < 0 || buffer_holds(stream, target)) return fseeko(stream, offset, whence);
  char *base = stream->_IO_buf_base;
  const off_t size = stream->_IO_buf_end - base;
  if (size <= 0) return fseeko(stream, offset, whence);
  off_t aligned = target & ~(size - 1);
  off_t delta = target - aligned;
  if (delta > size) return fseeko(stream, offset, whence);  // glibc seeks without reading
  if (delta == 0) return fseeko(stream, offset, whence);    // nor does it on a boundary
  // POSIX asks an empty buffer's descriptor offset to be exact: glibc reads only up to
  // the target then.
  const bool exact = stream->_IO_read_base == stream->_IO_read_end;
  const size_t want = static_cast<size_t>(exact ? delta : size);
  const size_t there = static_cast<size_t>(std::clamp<off_t>(file_size - aligned, 0, static_cast<off_t>(want)));
  if (there < static_cast<size_t>(delta)) return fseeko(stream, offset, whence);  // past the end
  const ssize_t got = fill(base, aligned, want);
  if (got < 0 || static_cast<size_t>(got) != there) return fseeko(stream, offset, whence);
  if (lseek(stream->_fileno, aligned + got, SEEK_SET) < 0) return -1;
  stream->_IO_read_base = base;
  stream->_IO_read_ptr = base + delta;
  stream->_IO_read_end = base + got;
  stream->_IO_write_base = stream->_IO_write_ptr = stream->_IO_write_end = base;
  stream->_offset = aligned + got;
  stream->_flags &= ~static_cast<int>(kEofSeen);
  return 0;
#else
  (void)file_size;
  (void)fill;
  return fseeko(stream, offset, whence);
#endif
}

int reposition_stream(FILE *stream, off_t offset) {
#ifdef __GLIBC__
  if (stream == nullptr || offset < 0) return fseeko(stream, offset, SEEK_SET);
  StreamLock lock(stream);
  if (!understood(stream)) return fseeko(stream, offset, SEEK_SET);
  return move_without_reading(stream, offset);
#else
  return fseeko(stream, offset, SEEK_SET);
#endif
}

StreamRoom stream_room(FILE *stream, size_t want) {
  StreamRoom room;
#ifdef __GLIBC__
  if (stream == nullptr || !understood(stream) || (stream->_flags & kEofSeen)) return room;
  if (stream->_IO_buf_base == nullptr) _IO_doallocbuf(stream);
  char *base = stream->_IO_buf_base;
  if (base == nullptr || stream->_IO_buf_end <= base) return room;
  const size_t size = static_cast<size_t>(stream->_IO_buf_end - base);
  const size_t unread = stream->_IO_read_ptr < stream->_IO_read_end
                            ? static_cast<size_t>(stream->_IO_read_end - stream->_IO_read_ptr)
                            : 0;
  want = std::min(want, size / 2);
  room.enough = unread >= want;
  if (room.enough) return room;
  off_t at = stream->_offset;
  if (at < 0) at = lseek(stream->_fileno, 0, SEEK_CUR);  // glibc has not needed it yet
  if (at < 0) return room;
  if (unread > 0 && stream->_IO_read_ptr != base) std::memmove(base, stream->_IO_read_ptr, unread);
  // glibc's state after a refill that read nothing yet (libio's _IO_new_file_underflow).
  stream->_IO_read_base = stream->_IO_read_ptr = base;
  stream->_IO_read_end = base + unread;
  stream->_IO_write_base = stream->_IO_write_ptr = stream->_IO_write_end = base;
  stream->_offset = at;
  room.to = base + unread;
  room.room = size - unread;
  room.needed = want - unread;
  room.at = at;
#else
  (void)stream;
  (void)want;
#endif
  return room;
}

void stream_filled(FILE *stream, const StreamRoom &room, size_t got) {
#ifdef __GLIBC__
  if (got == 0 || room.room == 0) return;
  got = std::min(got, room.room);
  // The descriptor's offset is where glibc's next refill reads from.
  if (lseek(stream->_fileno, room.at + static_cast<off_t>(got), SEEK_SET) < 0) return;
  stream->_IO_read_end = room.to + got;
  stream->_offset = room.at + static_cast<off_t>(got);
#else
  (void)stream;
  (void)room;
  (void)got;
#endif
}

namespace {
// The buffers the runtime lent to streams: the PT's line buffers (block 0) and the MT's
// mirror buffers (two blocks of `block` bytes).
struct LentBuffer {
  std::unique_ptr<char[]> bytes;
  size_t block = 0;
};
std::mutex g_line_buffers_mu;
ppios::Immortal<std::map<FILE *, LentBuffer>> g_line_buffers;
}  // namespace

bool stream_unbuffered(FILE *stream) {
#ifdef __GLIBC__
  if (stream == nullptr) return false;
  StreamLock lock(stream);
  return understood(stream) && stream->_IO_buf_base == nullptr;
#else
  (void)stream;
  return false;
#endif
}

void give_line_buffer(FILE *stream) {
  std::unique_ptr<char[]> bytes(new (std::nothrow) char[kLineBufferBytes]);
  if (bytes == nullptr) return;
  std::lock_guard<std::mutex> lock(g_line_buffers_mu);
  if (setvbuf(stream, bytes.get(), _IOFBF, kLineBufferBytes) == 0)
    (*g_line_buffers)[stream] = LentBuffer{std::move(bytes), 0};
}

bool give_mirror_buffer(FILE *stream, size_t block) {
  if (block == 0 || block > SIZE_MAX / 2) return false;
  std::unique_ptr<char[]> bytes(new (std::nothrow) char[2 * block]);
  if (bytes == nullptr) return false;
  std::lock_guard<std::mutex> lock(g_line_buffers_mu);
#ifdef __GLIBC__
  // setvbuf syncs the stream, which makes glibc forget its offset; the original's stream
  // (whose buffer glibc allocates at its first read, without a sync) knows it if a seek
  // told it, and an fseek inside its buffer depends on that.
  const off_t known = stream->_offset;
#endif
  // glibc's buffer is the first block; the second is where a block goes after unread bytes.
  // A line-buffered input stream stays one: its refills flush stdout (as_glibc_refill).
  const int mode = (static_cast<unsigned>(stream->_flags) & kLineBuf) ? _IOLBF : _IOFBF;
  if (setvbuf(stream, bytes.get(), mode, block) != 0) return false;
#ifdef __GLIBC__
  stream->_offset = known;
#endif
  (*g_line_buffers)[stream] = LentBuffer{std::move(bytes), block};
  return true;
}

std::unique_ptr<char[]> take_line_buffer(FILE *stream) {
  std::lock_guard<std::mutex> lock(g_line_buffers_mu);
  auto it = g_line_buffers->find(stream);
  if (it == g_line_buffers->end()) return nullptr;
  std::unique_ptr<char[]> bytes = std::move(it->second.bytes);
  g_line_buffers->erase(it);
  return bytes;
}

off_t stream_file_offset(FILE *stream) {
#ifdef __GLIBC__
  return stream != nullptr && understood(stream) ? stream->_offset : -1;
#else
  (void)stream;
  return -1;
#endif
}

}  // namespace ppios

namespace ppios {

bool stream_mirrorable(FILE *stream) {
#ifdef __GLIBC__
  return stream != nullptr && understood(stream);
#else
  (void)stream;
  return false;
#endif
}

bool stream_has_pushback(FILE *stream) {
#ifdef __GLIBC__
  return (static_cast<unsigned>(stream->_flags) & kInBackup) != 0;
#else
  (void)stream;
  return true;
#endif
}

size_t stream_unread(FILE *stream) {
#ifdef __GLIBC__
  if (!understood(stream) || stream->_IO_read_ptr >= stream->_IO_read_end) return 0;
  return static_cast<size_t>(stream->_IO_read_end - stream->_IO_read_ptr);
#else
  (void)stream;
  return 0;
#endif
}

bool stream_holds_delimiter(FILE *stream, size_t within, int delim) {
  const size_t n = std::min(within, stream_unread(stream));
  return n > 0 && std::memchr(stream->_IO_read_ptr, static_cast<unsigned char>(delim), n) != nullptr;
}

size_t stream_buffer_size(FILE *stream) {
#ifdef __GLIBC__
  if (!understood(stream) || stream->_IO_buf_base == nullptr) return 0;
  return static_cast<size_t>(stream->_IO_buf_end - stream->_IO_buf_base);
#else
  (void)stream;
  return 0;
#endif
}

bool refilled_stream(FILE *stream, off_t read_from, off_t at, const char *bytes, size_t n, size_t taken) {
#ifdef __GLIBC__
  if (!understood(stream) || (stream->_flags & kEofSeen) || taken > n || at < 0) return false;
  if (stream->_IO_buf_base == nullptr) _IO_doallocbuf(stream);
  char *base = stream->_IO_buf_base;
  if (base == nullptr || n > static_cast<size_t>(stream->_IO_buf_end - base)) return false;
  if (lseek(stream->_fileno, at + static_cast<off_t>(n), SEEK_SET) < 0) return false;
  std::memcpy(base, bytes, n);
  // libio's _IO_new_file_underflow, then the program's reads of `taken` bytes.
  stream->_IO_read_base = base;
  stream->_IO_read_ptr = base + taken;
  stream->_IO_read_end = base + n;
  stream->_IO_write_base = stream->_IO_write_ptr = stream->_IO_write_end = base;
  // glibc adds what it read to the offset it knows (right or not: the program may have
  // moved the descriptor).
  if (stream->_offset >= 0) stream->_offset += at + static_cast<off_t>(n) - read_from;
  as_glibc_refill(stream);
  return true;
#else
  (void)stream;
  (void)read_from;
  (void)at;
  (void)bytes;
  (void)n;
  (void)taken;
  return false;
#endif
}

StreamBlock next_block(FILE *stream) {
  StreamBlock block;
#ifdef __GLIBC__
  if (!understood(stream) || (stream->_flags & kEofSeen)) return block;
  char *front = nullptr;
  size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(g_line_buffers_mu);
    auto it = g_line_buffers->find(stream);
    if (it == g_line_buffers->end() || it->second.block == 0) return block;
    front = it->second.bytes.get();
    size = it->second.block;
  }
  // Still the runtime's buffer (a program's setvbuf after reading would be its own).
  if (stream->_IO_buf_base < front || stream->_IO_buf_base > front + size) return block;
  // What moves to the front: the original's current block, the part the program took
  // too (a call that gives the new block back leaves the stream with all of it, for a
  // seek inside it), and unread bytes an ungetc stepped back over before it.
  char *keep = std::min(stream->_IO_read_ptr, stream->_IO_buf_base);
  if (stream->_IO_read_end < keep) return block;
  const size_t kept = static_cast<size_t>(stream->_IO_read_end - keep);
  if (kept > size) return block;  // no room for a block after them: glibc reads it itself
  // glibc's refill reads wherever the descriptor stands (the program may have moved it).
  const off_t at = lseek(stream->_fileno, 0, SEEK_CUR);
  if (at < 0) return block;
  const size_t base_at = static_cast<size_t>(stream->_IO_buf_base - keep);
  const size_t read_at = static_cast<size_t>(stream->_IO_read_ptr - keep);
  if (kept > 0 && keep != front) std::memmove(front, keep, kept);
  char *to = front + kept;
  // A refill that read nothing yet (libio's _IO_new_file_underflow), of a buffer that
  // starts after the kept bytes. _IO_read_base stays at the front: ungetc may step back
  // over them (and glibc's pushback, when it needs its backup area, resets it).
  stream->_IO_read_base = front;
  stream->_IO_read_ptr = front + read_at;
  stream->_IO_read_end = to;
  stream->_IO_buf_base = to;
  stream->_IO_buf_end = to + size;
  stream->_IO_write_base = stream->_IO_write_ptr = stream->_IO_write_end = to;
  block.to = to;
  block.size = size;
  block.at = at;
  block.previous = front + base_at;
#else
  (void)stream;
#endif
  return block;
}

void block_filled(FILE *stream, const StreamBlock &block, size_t got) {
#ifdef __GLIBC__
  if (got == 0 || block.size == 0) return;
  got = std::min(got, block.size);
  // Where glibc's next refill reads from (if this fails, glibc reads the bytes itself).
  if (lseek(stream->_fileno, block.at + static_cast<off_t>(got), SEEK_SET) < 0) return;
  stream->_IO_read_end = block.to + got;
  if (stream->_offset >= 0) stream->_offset += static_cast<off_t>(got);  // glibc adjusts it
#else
  (void)stream;
  (void)block;
  (void)got;
#endif
}

void give_back_block(FILE *stream, const StreamBlock &block, size_t got, bool looked_at_next) {
#ifdef __GLIBC__
  if (got == 0 || block.size == 0 || !understood(stream)) return;
  got = std::min(got, block.size);
  // Untouched since block_filled, and no byte of the block taken (or looked at).
  if (stream->_IO_buf_base != block.to || stream->_IO_read_end != block.to + got ||
      stream->_IO_read_ptr > block.to || (stream->_IO_read_ptr == block.to && looked_at_next)) {
    // Kept: the original's buffer starts where glibc's refill put it (an fflush, then
    // a seek, asks whether it is empty through _IO_read_base).
    if (stream->_IO_read_ptr >= stream->_IO_buf_base && stream->_IO_read_base < stream->_IO_buf_base)
      stream->_IO_read_base = stream->_IO_buf_base;
    as_glibc_refill(stream);  // the original's refill: its side effects too
    return;
  }
  if (lseek(stream->_fileno, block.at, SEEK_SET) < 0) {
    as_glibc_refill(stream);  // kept after all
    return;
  }
  // The original's buffer is its previous block again, all of it.
  stream->_IO_read_base = std::min(stream->_IO_read_ptr, block.previous);
  stream->_IO_read_end = block.to;
  stream->_IO_buf_base = block.previous;
  stream->_IO_buf_end = block.previous + block.size;
  stream->_IO_write_base = stream->_IO_write_ptr = stream->_IO_write_end = block.previous;
  if (stream->_offset >= 0) stream->_offset -= static_cast<off_t>(got);
#else
  (void)stream;
  (void)block;
  (void)got;
#endif
}

// glibc's fclose closes the descriptor only while the stream has one (_IO_file_is_open:
// _fileno != -1); without it, it still flushes nothing (read-only) and frees the stream.
void detach_stream_descriptor(FILE *stream) { stream->_fileno = -1; }

}  // namespace ppios
