// MT-side stdio calls (ppios_fread, ...) and the PT-side stdio prefetch call.
//
// A stream's bytes are served from the cache only when the stream's position is exactly
// where the bytes come from and its end-of-file flag is clear (a set flag makes glibc's
// fread return at once). Writes through stdio are buffered: until the stream is closed
// nobody knows when they reach the file, so while a file has such a stream nothing of it
// is cached.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ErrnoGuard.h"
#include "ScanFormat.h"
#include "StreamHolds.h"
#include "FileProbe.h"
#include "GlibcStream.h"
#include "Immortal.h"
#include "PtBlocks.h"
#include "PtThread.h"
#include "ThreadState.h"
#include "Runtime.h"
#include "SyncPoints.h"
#include "ppios/ppios.h"

using ppios::CachedFile;
using ppios::FileKey;
using ppios::MtStorageAccess;
using ppios::PtResources;
using ppios::Runtime;
using ppios::RuntimeScope;

extern "C" char *__fgets_chk(char *s, size_t size, int n, FILE *stream);
extern "C" int __isoc99_vfscanf(FILE *stream, const char *format, va_list ap);

namespace {

// A formatted read cannot tell where it stops: its stream's next block is filled from
// the cache only when the call starts close to the end of the bytes it holds, within
// twice what the stream's last formatted read took (at most kFormattedReach); the rare
// conversion that starts earlier and runs past them makes glibc read the block itself,
// as the original does. A block the call then does not reach is given back, and filled
// again by a later call: the closer the reach, the fewer of those.
constexpr size_t kFormattedReach = 64;
struct FormattedTake {
  FILE *stream = nullptr;
  size_t bytes = kFormattedReach;
};
thread_local FormattedTake t_formatted_take;

size_t formatted_reach(FILE *stream) {
  if (t_formatted_take.stream != stream) return kFormattedReach;
  return std::clamp<size_t>(2 * t_formatted_take.bytes, 16, kFormattedReach);
}

// Where the PT's top-up found the end of the file, for one stream of its own: while that
// stream's buffered bytes end there, the calls that drain them prefetch nothing (each
// would be an fstat and a read of nothing, for every line of the file's last half buffer).
struct LineEnd {
  FILE *stream = nullptr;
  off_t at = -1;
};
thread_local LineEnd t_line_end;
void forget_line_end(FILE *stream) {
  if (t_line_end.stream == stream) t_line_end = LineEnd{};  // the address may be reused
}

bool at_line_end(FILE *stream, const ppios::StreamRoom &room) {
  return room.room > 0 && t_line_end.stream == stream && t_line_end.at == room.at;
}


// Whether the MT's read at `offset` of the stream's file (where its descriptor stands,
// after the bytes its buffer holds) may come from the cache; sets *file. The original
// reads those bytes from the file, so the file is asked (its stamp: rule 3) every time.
bool mt_stream_cacheable(int fd, off_t *offset, CachedFile *file, blksize_t *blksize) {
  *offset = lseek(fd, 0, SEEK_CUR);  // where the original's next read from the file starts
  return *offset >= 0 && ppios::probe_readable_file(fd, file, blksize);
}

// The PT's stdio reads are fetched by the block (PtBlocks.h): what the MT's stream itself
// would read from the file. Only the PT touches this table (and only for its own streams).
thread_local ppios::HeldBlocks<FILE *> t_pt_stream_blocks;

// The PT's speculative formatted reads (see speculative_scan), per stream of its own.
struct SpeculativeScan {
  struct stat st;
  off_t frontier;  // what is prefetched ends here
};
thread_local std::map<FILE *, SpeculativeScan> t_pt_scans;
void forget_pt_scan(FILE *stream) { t_pt_scans.erase(stream); }

bool truncating_mode(const char *mode) { return mode != nullptr && mode[0] == 'w'; }

// pread until `count` bytes, the end of the file or an error: the bytes read.
size_t read_fully(int fd, char *to, size_t count, off_t offset) {
  size_t got = 0;
  while (got < count) {
    ssize_t n = pread(fd, to + got, count - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

// One MT line read (fgets, getdelim) that may take `bound` bytes at most, or a formatted
// one (delim < 0). The MT's stream keeps the original's buffer (GlibcStream.h): when the
// call will make the original refill it (its line is not in the unread bytes), the next
// block is filled first, from the cache as far as it has it and from storage for the
// rest, exactly the bytes that refill would read; then `call` runs the original call.
// It is one transfer, whose bytes are the block's. A call that the unread bytes satisfy
// asks neither the cache nor the file, as without prefetching. `may_fill` false: the
// runtime could not tell afterwards whether the original refilled, so glibc does it.
void mt_line_read(FILE *stream, size_t bound, int delim, const std::function<void()> &call,
                  const std::function<bool()> &ended_with_lookahead = nullptr, bool may_fill = true) {
  Runtime &rt = Runtime::get();
  if (rt.plain_reads()) {  // as mt_read counts a line read without a block: no bytes
    call();
    ppios::ErrnoGuard errno_guard;
    rt.count_plain_read(0);
    return;
  }
  ppios::StreamLock lock(stream);
  ppios::StreamBlock block;
  CachedFile file;
  bool cacheable = false, refill_due = false;
  ppios::Reaches reaches = ppios::Reaches::Storage;
  size_t unread = 0;
  {
    ppios::ErrnoGuard errno_guard;
    int fd = fileno(stream);
    blksize_t blksize = 0;
    if (rt.caching() && ppios::stream_unbuffered(stream) && ppios::probe_readable_file(fd, &file, &blksize))
      cacheable = ppios::give_mirror_buffer(stream, static_cast<size_t>(ppios::stream_buffer_bytes(blksize)));
    unread = ppios::stream_unread(stream);
    refill_due = delim >= 0 ? unread < bound && !ppios::stream_holds_delimiter(stream, unread, delim)
                                       : unread < formatted_reach(stream);
    if (rt.caching() && refill_due && may_fill) block = ppios::next_block(stream);
    if (block.size == 0) cacheable = false;
    else if (!cacheable) cacheable = ppios::probe_readable_file(fd, &file);
    // What is behind the stream matters only if the call may read from it: a line read
    // only when its line is not in the buffer; a formatted read may read on further than
    // refill_due guesses (a message then arrives unseen).
    if (!cacheable && (refill_due || delim < 0) && fd >= 0) reaches = ppios::what_reaches(fd);
  }
  rt.mt_read(cacheable ? &file : nullptr, block.at, cacheable ? block.size : 0, block.to,
             [&](size_t h, MtStorageAccess &storage) -> ssize_t {
               storage.reaches(reaches);
               size_t got = h;
               if (cacheable && h < block.size) {
                 storage.acquire();  // the rest of the block, as the original's refill
                 ppios::ErrnoGuard errno_guard;  // a failure is the call's to meet
                 got += read_fully(fileno(stream), block.to + h, block.size - h, block.at + static_cast<off_t>(h));
               } else if (!cacheable && refill_due) {
                 storage.acquire();  // the stream reads the file itself
               }
               if (got > 0) {
                 ppios::ErrnoGuard errno_guard;
                 ppios::block_filled(stream, block, got);
               }
               call();
               if (delim < 0) {  // what it took, if glibc did not refill meanwhile
                 const size_t held = unread + got, left = ppios::stream_unread(stream);
                 t_formatted_take = FormattedTake{stream, left <= held ? held - left : kFormattedReach};
               }
               if (got > 0) {
                 ppios::ErrnoGuard errno_guard;
                 // A line read takes every byte it looks at; a formatted one may push
                 // its last back.
                 ppios::give_back_block(stream, block, got, ended_with_lookahead ? ended_with_lookahead() : true);
                 rt.note_mt_stream_end(file.key, block.at + static_cast<off_t>(got));
               }
               return static_cast<ssize_t>(got);
             });
}

// After an fread served from the cache that ended `kept` bytes into a block at `at`
// (those bytes at `taken`): the stream's buffer gets the block as the original's last
// refill read it, its tail from the cache as far as it has it, else from the file.
// False if the stream cannot take it.
bool refill_last_block(FILE *stream, const CachedFile &file, off_t read_from, off_t at, const char *taken,
                       size_t kept, size_t block, MtStorageAccess &storage) {
  std::unique_ptr<char[]> bytes(new (std::nothrow) char[block]);
  if (bytes == nullptr || kept > block) return false;
  std::memcpy(bytes.get(), taken, kept);
  const off_t tail_at = at + static_cast<off_t>(kept);
  // Only what is cached and complete: an in-flight fetch is not worth a wait for a tail.
  size_t got = kept + Runtime::get().cache().serve(file.key, file.stamp, tail_at, block - kept,
                                                   bytes.get() + kept, ppios::InFlightPolicy::NeedToken).bytes;
  if (got < block) {
    storage.acquire();
    ppios::ErrnoGuard errno_guard;  // a failure here is the next read's to meet
    got += read_fully(fileno(stream), bytes.get() + got, block - got, at + static_cast<off_t>(got));
  }
  return ppios::refilled_stream(stream, read_from, at, bytes.get(), got, kept);
}

// A stream that may write a regular file holds the file out of every process's cache
// from its open to its close (docs/design/coherence.md, StreamHolds.h): whatever call
// writes through it (fwrite, fputs, fprintf, putc and its macro), its bytes reach the
// file at a time only glibc knows. The close is an own change.
FILE *opened(FILE *stream, const char *mode, bool may_truncate = true) {
  ppios::ErrnoGuard errno_guard;
  if (stream != nullptr && Runtime::get().trace().enabled()) {
    FileKey key;
    ppios::probe_regular_file(fileno(stream), &key);  // names the file in the trace
  }
  ppios::StreamHolds::get().opened(stream, mode, may_truncate && truncating_mode(mode), true);
  return stream;
}

}  // namespace

extern "C" {

FILE *ppios_fopen(const char *path, const char *mode) {
  return opened(fopen(path, mode), mode);
}

FILE *ppios_fdopen(int fd, const char *mode) { return opened(fdopen(fd, mode), mode, false); }

// The stream keeps its address (and mostly its descriptor number) for another file.
FILE *ppios_freopen(const char *path, const char *mode, FILE *stream) {
  auto line_buffer = ppios::take_line_buffer(stream);  // the old file's, freed after
  ppios::StreamHolds &holds = ppios::StreamHolds::get();
  const ppios::StreamHolds::Taken old = holds.take(stream);
  FILE *reopened = freopen(path, mode, stream);
  holds.give_back(old, true);  // freopen closed the old file
  return opened(reopened, mode);
}

int ppios_fclose(FILE *stream) {
  PtResources &resources = PtResources::get();
  FileKey key;
  bool locked = false;
  if (resources.program_may_hold_locks()) {
    ppios::ErrnoGuard errno_guard;
    locked = ppios::probe_regular_file(fileno(stream), &key);
    if (locked) ppios::release_point(nullptr);  // as ppios_close
  }
  auto line_buffer = ppios::take_line_buffer(stream);  // freed after the close
  ppios::StreamHolds &holds = ppios::StreamHolds::get();
  const ppios::StreamHolds::Taken written = holds.take(stream);
  int r = fclose(stream);
  holds.give_back(written, true);
  if (locked) resources.program_closed(key);  // the close released its record locks
  return r;
}

// The original's fread takes what its stream's buffer holds first, then reads the rest
// from the file: whole blocks straight into the caller's memory, and a last partial
// block through its buffer, which keeps that block (glibc's _IO_file_xsgetn). So does
// this one (the buffer holds the original's bytes, GlibcStream.h), with the file's bytes
// from the cache as far as it has them; then the stream's buffer gets that last block,
// the part the caller took and the rest of it (its tail) from the cache or the file, as
// the original's refill read it.
size_t ppios_fread(void *ptr, size_t size, size_t nmemb, FILE *stream) {
  Runtime &rt = Runtime::get();
  if (rt.plain_reads()) {
    const size_t items = fread(ptr, size, nmemb, stream);
    ppios::ErrnoGuard errno_guard;
    rt.count_plain_read(static_cast<ssize_t>(items * size));
    return items;
  }
  size_t total = 0;
  bool sized = size > 0 && nmemb > 0 && nmemb <= SIZE_MAX / size;
  if (sized) total = size * nmemb;
  ppios::StreamLock lock(stream);
  CachedFile file;
  off_t offset = -1;     // where the original's buffer ends: its next read from the file
  size_t buffered = 0;   // taken from the stream's buffer first
  size_t block = 0;      // the stream's buffer size
  bool cacheable = false;
  ppios::Reaches reaches = ppios::Reaches::Storage;
  {
    ppios::ErrnoGuard errno_guard;
    int fd = fileno(stream);
    blksize_t blksize = 0;
    if (rt.caching() && sized && !feof(stream) && fd >= 0 && ppios::stream_mirrorable(stream) &&
        !ppios::stream_has_pushback(stream)) {
      buffered = std::min(ppios::stream_unread(stream), total);
      if (buffered < total)
        cacheable = mt_stream_cacheable(fd, &offset, &file, &blksize);
      block = ppios::stream_buffer_size(stream);
      if (block == 0) block = static_cast<size_t>(ppios::stream_buffer_bytes(blksize));
      if (!cacheable) offset = -1;
    }
    if (!cacheable && fd >= 0 && buffered < total)
      reaches = ppios::what_reaches(fd);  // stdin from a pipe may block for a long time
  }
  char *out = static_cast<char *>(ptr);
  const size_t asked = total - buffered;
  ssize_t bytes = rt.mt_read(
      cacheable ? &file : nullptr, offset, cacheable ? asked : total, cacheable ? out + buffered : out,
      [&](size_t h, MtStorageAccess &storage) -> ssize_t {
        storage.reaches(reaches);
        if (!cacheable) {  // whatever fread itself does
          if (!sized || buffered < total) storage.acquire();  // else its buffer holds it all
          return static_cast<ssize_t>(fread(ptr, size, nmemb, stream) * size);
        }
        if (buffered > 0 && fread(out, 1, buffered, stream) != buffered) return 0;
        if (h < asked) {  // the rest from the file, as the original reads it
          storage.acquire();
          size_t got = h;
          {
            ppios::ErrnoGuard errno_guard;  // a failure is glibc's to meet below
            got += read_fully(fileno(stream), out + buffered + h, asked - h, offset + static_cast<off_t>(h));
          }
          if (got < asked) {  // the end of the file (or an error): glibc's own fread from there
            ppios::reposition_stream(stream, offset + static_cast<off_t>(got));
            return static_cast<ssize_t>(buffered + got + fread(out + buffered + got, 1, asked - got, stream));
          }
        }
        const off_t end = offset + static_cast<off_t>(asked);
        // Of the last block, the part the caller took: glibc reads a request of a buffer or
        // more straight into the caller's memory, a whole number of buffers when the buffer
        // has 128 bytes or more (all of it when less), and the rest through its buffer.
        const size_t kept = asked >= block && block < 128 ? 0 : asked % block;
        if (kept == 0 || !refill_last_block(stream, file, offset, end - static_cast<off_t>(kept),
                                            out + buffered + asked - kept, kept, block, storage))
          ppios::reposition_stream(stream, end);  // the original keeps no block either
        return static_cast<ssize_t>(total);
      });
  return bytes <= 0 || size == 0 ? 0 : static_cast<size_t>(bytes) / size;
}

char *ppios_fgets(char *s, int n, FILE *stream) {
  char *line = nullptr;
  mt_line_read(stream, n > 1 ? static_cast<size_t>(n) - 1 : 0, '\n', [&] { line = fgets(s, n, stream); });
  return line;
}

// glibc's __fgets_chk reads at most min(n - 1, size) bytes and fails only when a line
// filled all `size`: the original runs, after the same top-up as fgets.
char *ppios_fgets_chk(char *s, size_t size, int n, FILE *stream) {
  char *line = nullptr;
  const size_t bound = n > 1 ? std::min(static_cast<size_t>(n) - 1, size) : 0;
  mt_line_read(stream, bound, '\n', [&] { line = __fgets_chk(s, size, n, stream); });
  return line;
}

ssize_t ppios_getdelim(char **lineptr, size_t *n, int delim, FILE *stream) {
  ssize_t got = -1;
  mt_line_read(stream, SIZE_MAX, delim, [&] { got = getdelim(lineptr, n, delim, stream); });
  return got;
}

// fscanf (c99: glibc's ISO C99 one, __isoc99_fscanf, what <stdio.h> names fscanf unless
// _GNU_SOURCE is defined; else the GNU one): it may read any amount, so the buffer is
// topped up as for a line of unknown length.
int ppios_vfscanf(FILE *stream, const char *format, va_list ap, int c99) {
  int result = EOF;
  mt_line_read(
      stream, SIZE_MAX, -1,
      [&] { result = c99 ? __isoc99_vfscanf(stream, format, ap) : vfscanf(stream, format, ap); },
      [&] { return ppios::scan_ends_with_lookahead(format, result); },
      ppios::scan_end(format) != ppios::ScanEnd::DependsOnInput);
  return result;
}

ssize_t ppios_getline(char **lineptr, size_t *n, FILE *stream) {
  return ppios_getdelim(lineptr, n, '\n', stream);
}

size_t ppios_fwrite(const void *ptr, size_t size, size_t nmemb, FILE *stream) {
  Runtime &rt = Runtime::get();
  FileKey key;
  bool regular = false;
  ppios::Reaches reaches = ppios::Reaches::Storage;
  {
    ppios::ErrnoGuard errno_guard;
    int fd = fileno(stream);
    regular = fd >= 0 && ppios::probe_regular_file(fd, &key);
    // A stream the runtime did not see opened (none of glibc's ways is left out, but a
    // library may hand one over): it holds its file from its first fwrite on.
    if (regular) ppios::StreamHolds::get().hold_unless_held(stream, key, true);
    if (!regular && fd >= 0) reaches = ppios::what_reaches(fd);  // stdout to a pipe or tty
  }
  size_t items = 0;
  rt.mt_write(regular ? &key : nullptr, -1,
              [&] {
                items = fwrite(ptr, size, nmemb, stream);
                return static_cast<ssize_t>(items * size);
              },
              reaches);
  return items;
}

// A seek of the MT's stream is glibc's, whose read of the block around its target comes
// from the cache when the cache has all of it (GlibcStream.h: mt_seek_stream). A stream
// without a buffer gets the runtime's first, as glibc gives it one at its first seek.
int ppios_fseek(FILE *stream, long offset, int whence) {
  return ppios_fseeko(stream, static_cast<off_t>(offset), whence);
}
int ppios_fseeko(FILE *stream, off_t offset, int whence) {
  Runtime &rt = Runtime::get();
  if (!rt.caching()) return fseeko(stream, offset, whence);
  ppios::StreamLock lock(stream);
  CachedFile file;
  blksize_t blksize = 0;
  bool probed = false;
  {
    ppios::ErrnoGuard errno_guard;
    probed = ppios::probe_readable_file(fileno(stream), &file, &blksize);
    if (probed && ppios::stream_unbuffered(stream))
      ppios::give_mirror_buffer(stream, static_cast<size_t>(ppios::stream_buffer_bytes(blksize)));
  }
  if (!probed) return fseeko(stream, offset, whence);
  return ppios::mt_seek_stream(stream, offset, whence, file.stamp.size,
                               [&](char *to, off_t at, size_t n) -> ssize_t {
                                 const ppios::ServeResult served = rt.cache().serve(
                                     file.key, file.stamp, at, n, to, ppios::InFlightPolicy::NeedToken);
                                 return static_cast<ssize_t>(served.bytes);
                               });
}
long ppios_ftell(FILE *stream) { return ftell(stream); }
off_t ppios_ftello(FILE *stream) { return ftello(stream); }
// rewind is fseek(stream, 0, SEEK_SET) that also clears the error flag.
void ppios_rewind(FILE *stream) {
  if (!Runtime::get().caching()) return rewind(stream);
  ppios::ErrnoGuard errno_guard;  // rewind leaves errno alone when it succeeds
  if (ppios_fseeko(stream, 0, SEEK_SET) == 0) clearerr(stream);
  else rewind(stream);
}

// ------------------------------------------------------------------ PT side

FILE *ppios_pt_fopen(const char *path, const char * /*mode*/) {
  ppios::pt_checkpoint();
  RuntimeScope scope;
  PtResources &resources = PtResources::get();
  int fd = resources.open_regular(path);
  if (fd < 0) return nullptr;
  FILE *stream = fdopen(fd, "r");
  if (stream == nullptr) {
    ppios::pt_disown_fd(fd);
    resources.close_runtime_fd(fd);
    return nullptr;
  }
  resources.own_stream(stream);
  return stream;
}

// The PT's fopen fails when the MT has not created the file yet: its calls on the NULL
// stream do nothing.
int ppios_pt_fclose(FILE *stream) {
  ppios::pt_checkpoint();
  if (stream == nullptr || !ppios::pt_owns(stream)) return EOF;
  PtResources &resources = PtResources::get();
  resources.disown_stream(stream);
  ppios::pt_disown_fd(fileno(stream));
  t_pt_stream_blocks.forget(stream);  // the address may name another stream next
  forget_pt_scan(stream);
  forget_line_end(stream);
  auto line_buffer = ppios::take_line_buffer(stream);  // freed after the close
  resources.close_runtime_stream(stream);
  return 0;
}

// The MT's logical position counts bytes its buffer holds but the program has not
// consumed yet; ftello gives exactly that.
FILE *ppios_pt_reopen_stream(FILE *mt_stream) {
  if (!Runtime::get().caching()) return nullptr;  // mode off: no PT will take it
  if (mt_stream == nullptr) return nullptr;
  int mt_fd = fileno(mt_stream);
  off_t position = ftello(mt_stream);
  if (mt_fd < 0 || position < 0) return nullptr;
  int fd = ppios_pt_reopen_fd(mt_fd);
  if (fd < 0) return nullptr;
  PtResources &resources = PtResources::get();
  FILE *stream = fdopen(fd, "r");
  if (stream == nullptr) {
    ppios::pt_disown_fd(fd);
    resources.close_runtime_fd(fd);
    return nullptr;
  }
  if (ppios::seek_stream(stream, position, SEEK_SET) != 0) {
    ppios::pt_disown_fd(fd);
    resources.close_runtime_stream(stream);
    return nullptr;
  }
  resources.own_stream(stream);
  return stream;
}

void ppios_mt_handoff_stream(unsigned slot, FILE *mt_stream) {
  Runtime &runtime = Runtime::get();
  if (runtime.pt_running())
    runtime.handoff_post(slot, reinterpret_cast<intptr_t>(ppios_pt_reopen_stream(mt_stream)));
}

FILE *ppios_pt_take_stream(unsigned slot) {
  ppios::pt_checkpoint();
  intptr_t handle = 0;
  if (!Runtime::get().handoff_take(slot, &handle)) ppios::pt_checkpoint();  // stopping
  return reinterpret_cast<FILE *>(handle);
}

size_t ppios_prefetch_fread(size_t size, size_t nmemb, FILE *stream, ppios_seq_t seq,
                            unsigned flags, const char *site) {
  ppios::pt_checkpoint();
  if (stream == nullptr || !ppios::pt_owns(stream)) return 0;
  if (size == 0 || nmemb == 0 || nmemb > SIZE_MAX / size) return 0;
  off_t offset = ftello(stream);
  int fd = fileno(stream);
  if (offset < 0 || fd < 0) return 0;
  ssize_t predicted;
  {
    RuntimeScope scope;
    ppios::t_thread.pt_site = site;
    predicted = ppios::prefetch_by_block(t_pt_stream_blocks, stream, fd, offset, size * nmemb, seq, flags);
  }
  if (predicted < 0) return 0;
  ppios::seek_stream(stream, offset + predicted, SEEK_SET);
  // Short at the end of the file: the stream's end-of-file flag is set, as the program's
  // fread sets it, so the PT's feof() answers like the program's.
  if (static_cast<size_t>(predicted) < size * nmemb) {
    int c = getc(stream);
    if (c != EOF) ungetc(c, stream);  // the file grew meanwhile
  }
  return static_cast<size_t>(predicted) / size;
}

size_t ppios_prefetch_fread_copy(void *buf, size_t size, size_t nmemb, FILE *stream,
                                 ppios_seq_t seq, unsigned flags, const char *site) {
  ppios::pt_checkpoint();
  if (stream == nullptr || !ppios::pt_owns(stream)) return 0;
  off_t offset = ftello(stream);
  int fd = fileno(stream);
  if (size == 0 || nmemb == 0 || nmemb > SIZE_MAX / size || offset < 0 || fd < 0) {
    if (size != 0 && nmemb > SIZE_MAX / size) ppios::pt_check_room(buf, SIZE_MAX);
    else ppios::pt_check_room(buf, size * nmemb);
    return fread(buf, size, nmemb, stream);  // whatever fread itself does
  }
  ssize_t n = ppios_prefetch_pread_copy(fd, buf, size * nmemb, offset, seq, flags, site);
  if (n < 0) return 0;
  ppios::seek_stream(stream, offset + n, SEEK_SET);
  return static_cast<size_t>(n) / size;
}

}  // extern "C"

// ------------------------------------------------------------------ PT line reads
// The PT's stream is topped up by a prefetch of exactly what the MT's top-up will ask
// the cache for (GlibcStream.h); then the original call runs on it, into memory of the
// PT's own: the caller's buffer for the _copy variant, else a line buffer of the
// runtime's (ppios_pt_realloc: within the PT's budget, freed when the PT ends).

namespace {

struct PtLineBuffer {
  char *bytes = nullptr;
  size_t size = 0;
};
thread_local PtLineBuffer t_pt_line;

// getdelim's own line buffer (it grows it with realloc, so it is malloc'd, not the PT
// allocator's), freed when the PT thread ends.
struct PtDelimLine {
  char *bytes = nullptr;
  size_t size = 0;
  ~PtDelimLine() { free(bytes); }
};
thread_local PtDelimLine t_pt_delim_line;

char *pt_line_buffer(int n) {
  const size_t size = n > 0 ? static_cast<size_t>(n) : 1;
  if (t_pt_line.size < size) {
    t_pt_line.bytes = static_cast<char *>(ppios_pt_realloc(t_pt_line.bytes, size));
    t_pt_line.size = size;
  }
  return t_pt_line.bytes;
}

// False if the PT may not read `stream`; escapes if the runtime stopped meanwhile.
bool pt_top_up(FILE *stream, size_t bound, ppios_seq_t seq, unsigned flags, const char *site) {
  ppios::pt_checkpoint();
  if (stream == nullptr || !ppios::pt_owns(stream)) return false;
  bool stopped = false;
  if (ppios::stream_unbuffered(stream)) ppios::give_line_buffer(stream);
  {
    ppios::StreamLock lock(stream);
    const ppios::StreamRoom room = ppios::stream_room(stream, bound);
    if (room.room > 0 && !at_line_end(stream, room)) {
      RuntimeScope scope;
      ppios::t_thread.pt_site = site;
      ssize_t got = Runtime::get().prefetch_copy(fileno(stream), room.at, room.room, seq, flags,
                                                 room.to, &stopped);
      if (got > 0) ppios::stream_filled(stream, room, static_cast<size_t>(got));
      if (got >= 0 && static_cast<size_t>(got) < room.room)
        t_line_end = LineEnd{stream, room.at + static_cast<off_t>(got)};
    }
  }
  if (stopped) ppios::pt_checkpoint();
  return true;
}

// A formatted read none of whose results the PT needs (ppios-cc passed a null pointer for
// every destination) is not scanned: parsing is most of what such a loop costs the
// program, and the PT would do it twice. The PT speculates instead, as in a loop that
// stops on the data: the scan matches, and the stream is prefetched in kScanChunk pieces
// while what is prefetched ends less than kScanLead beyond what the MT's stream has read;
// at the end of the file the scan fails (EOF). The PT's loop is held within the
// speculation window of the MT's transfers. Afterwards the PT's stream stands where the
// prefetching stopped: what the PT reads through it later is a guess.
constexpr off_t kScanChunk = 64 * 1024;
constexpr off_t kScanLead = 4 * kScanChunk;

int speculative_scan(FILE *stream, int conversions, ppios_seq_t seq, unsigned flags,
                     const char *site) {
  ppios_pt_speculate(seq);
  RuntimeScope scope;
  ppios::t_thread.pt_site = site;
  auto it = t_pt_scans.find(stream);
  if (it == t_pt_scans.end()) {
    SpeculativeScan scan;
    scan.frontier = ftello(stream);
    if (fstat(fileno(stream), &scan.st) != 0 || !S_ISREG(scan.st.st_mode) || scan.frontier < 0)
      return EOF;
    it = t_pt_scans.emplace(stream, scan).first;
  }
  SpeculativeScan &scan = it->second;
  if (scan.frontier >= scan.st.st_size) return EOF;
  Runtime &rt = Runtime::get();
  const off_t mt_end = std::max<off_t>(rt.mt_stream_end(ppios::key_of(scan.st)), 0);
  const off_t before = scan.frontier;
  scan.frontier = std::max(scan.frontier, mt_end);  // never what the MT has read already
  while (scan.frontier < scan.st.st_size && scan.frontier < mt_end + kScanLead) {
    const size_t length = static_cast<size_t>(std::min(kScanChunk, scan.st.st_size - scan.frontier));
    // A piece is for whichever top-up of the MT reaches it, not for this call.
    const uint64_t wanted_at = rt.mt_stream_transfer_at(ppios::key_of(scan.st), scan.frontier);
    rt.prefetch(fileno(stream), scan.st, scan.frontier, length, length, wanted_at, flags);
    scan.frontier += static_cast<off_t>(length);
  }
  if (scan.frontier != before) ppios::seek_stream(stream, scan.frontier, SEEK_SET);
  return conversions;
}

// The last format the PT rewrote whose call assigned nothing: a loop calls the same
// format with the same null destinations, and its speculative calls then skip the rewrite.
struct LastSpeculativeFormat {
  const char *format = nullptr;
  int conversions = 0;
};
thread_local LastSpeculativeFormat t_last_speculative;

bool all_null(int count, va_list destinations) {
  for (int i = 0; i < count; ++i)
    if (va_arg(destinations, void *) != nullptr) return false;
  return true;
}

}  // namespace

extern "C" {

char *ppios_prefetch_fgets_copy(char *s, int n, FILE *stream, ppios_seq_t seq, unsigned flags,
                                const char *site) {
  if (!pt_top_up(stream, n > 1 ? static_cast<size_t>(n) - 1 : 0, seq, flags, site)) return nullptr;
  ppios::pt_check_room(s, n > 0 ? static_cast<size_t>(n) : 0);
  return fgets(s, n, stream);
}

char *ppios_prefetch_fgets(int n, FILE *stream, ppios_seq_t seq, unsigned flags, const char *site) {
  if (stream == nullptr || !ppios::pt_owns(stream)) return nullptr;
  return ppios_prefetch_fgets_copy(pt_line_buffer(n), n, stream, seq, flags, site);
}

ssize_t ppios_prefetch_getdelim(int delim, FILE *stream, ppios_seq_t seq, unsigned flags,
                                const char *site) {
  if (!pt_top_up(stream, SIZE_MAX, seq, flags, site)) return -1;
  return getdelim(&t_pt_delim_line.bytes, &t_pt_delim_line.size, delim, stream);
}

int ppios_prefetch_fscanf(FILE *stream, ppios_seq_t seq, unsigned flags, const char *site,
                          const char *format, ...) {
  ppios::pt_checkpoint();
  va_list destinations;
  va_start(destinations, format);
  const LastSpeculativeFormat last = t_last_speculative;
  if (format != nullptr && format == last.format && all_null(last.conversions, destinations)) {
    va_end(destinations);
    if (stream == nullptr || !ppios::pt_owns(stream)) return EOF;
    return speculative_scan(stream, last.conversions, seq, flags, site);
  }
  va_end(destinations);
  ppios::ScanCall call;
  va_start(destinations, format);
  const bool followed = format != nullptr && ppios::prepare_scan(format, destinations, &call);
  va_end(destinations);
  if (!followed) ppios_pt_exit();
  if (stream == nullptr || !ppios::pt_owns(stream)) return EOF;
  if (call.assigned == 0) {
    t_last_speculative = LastSpeculativeFormat{format, call.conversions};
    return speculative_scan(stream, call.conversions, seq, flags, site);
  }
  if (!pt_top_up(stream, SIZE_MAX, seq, flags, site)) return EOF;
  return ppios::run_scan(stream, &call);
}

ssize_t ppios_prefetch_getline(FILE *stream, ppios_seq_t seq, unsigned flags, const char *site) {
  return ppios_prefetch_getdelim('\n', stream, seq, flags, site);
}

}  // extern "C"
