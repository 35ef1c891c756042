#include "GlibcStream.h"

#include <unistd.h>

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

// The stream's lock for the scope (recursive: fseeko/ftello inside take it again).
class StreamLock {
 public:
  explicit StreamLock(FILE *s) : s_(s) { flockfile(s_); }
  ~StreamLock() { funlockfile(s_); }
  StreamLock(const StreamLock &) = delete;
  StreamLock &operator=(const StreamLock &) = delete;

 private:
  FILE *s_;
};
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
  if (lseek(stream->_fileno, target, SEEK_SET) < 0) return -1;
  // glibc's state after a seek that read nothing: an empty buffer at `target`.
  char *base = stream->_IO_buf_base;
  stream->_IO_read_base = stream->_IO_read_ptr = stream->_IO_read_end = base;
  stream->_IO_write_base = stream->_IO_write_ptr = stream->_IO_write_end = base;
  stream->_offset = target;
  stream->_flags &= ~static_cast<int>(kEofSeen);
  return 0;
#else
  return fseeko(stream, offset, whence);
#endif
}

}  // namespace ppios
