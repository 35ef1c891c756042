// What the runtime relies on about glibc's stdio streams: how large a stream's buffer is,
// and moving a stream without reading its file.
//
// glibc's fseek on a read-only stream reads ahead: a target outside the stream's buffer
// makes it read the block around the target (or just the part before it, when the buffer
// is empty), so that the small reads expected next come from memory. With prefetching that
// read is wasted: the MT's reads are served from the prefetch cache, and the PT never reads
// through its own stream (it only moves it and prefetches), yet every seek would still ask
// the device. A 512-byte record reader (fseek, fread, ...) paid about two device requests
// per record that way, on top of the prefetched blocks.
//
// seek_stream() positions the stream as glibc's own seek does when it need not read: the
// buffer is left empty at the new position and the descriptor's offset is set there, so
// the next read that does go to the file (a cache miss, an fgets) reads from there, and
// ftell is exact. A target the buffer already holds is an ordinary fseeko (no system call).
//
// It writes glibc's FILE fields, whose layout is ABI (<bits/types/struct_FILE.h>; gnulib's
// fseeko and fpurge write the same fields), and only for streams it understands: plain
// file streams (the operations table of stderr's: not "m"-mode mappings, memory or cookie
// streams), read-only, byte-oriented, without pushed-back characters or markers. For any
// other stream, any SEEK_END and any other libc it is plain fseeko. The stream's lock is
// held throughout.
#pragma once

#include <stdio.h>
#include <sys/types.h>
#include <sys/stat.h>

#include <memory>

namespace ppios {

// The buffer glibc gives a stream on a file of this st_blksize: the block size when it is
// smaller than BUFSIZ, else BUFSIZ (larger blocks would make every small read of a file
// system with huge blocks fetch megabytes). A record smaller than that is read with the
// whole buffer-sized block around it.
inline off_t stream_buffer_bytes(blksize_t blksize) {
  return blksize > 0 && blksize < BUFSIZ ? blksize : BUFSIZ;
}

// fseeko(stream, offset, whence), except that it never reads the stream's file (above).
// Returns 0, or -1 with errno set as fseeko would.
int seek_stream(FILE *stream, off_t offset, int whence);

// Topping up a stream's buffer from the cache, for the line-oriented reads (fgets,
// getline) whose length only the data decides. glibc refills a stream's buffer only when
// it is empty, in the middle of a call: a line that straddles the buffer's end makes the
// stream read the next block itself, from the file. So before such a call the buffer is
// topped up: its unread bytes move to its start and the bytes after them are appended
// (from the cache for the MT, from a prefetch for the PT) as glibc's own refill would,
// with the descriptor's offset moved past them, so that ftell, a later refill and a seek
// are exactly as if glibc had read them. Both threads top up at the same points (when
// fewer than `want` bytes are unread, at most half a buffer), so the PT prefetches the
// ranges the MT asks the cache for.
//
// Only for the streams seek_stream() understands, without the end-of-file flag (glibc
// reads nothing more then), with the stream's lock held by the caller (StreamLock)
// from stream_room() to stream_filled().
struct StreamRoom {
  char *to = nullptr;  // where the next bytes of the file go
  size_t room = 0;     // how many fit: 0 when no top-up is due (or the stream is not one)
  size_t needed = 0;   // how many of them the call is sure to want
  off_t at = -1;       // their file offset
  bool enough = false; // no top-up is due: `want` bytes are buffered already
};
StreamRoom stream_room(FILE *stream, size_t want);

// A regular file's stream whose first read is a line read gets a buffer of this size
// instead of glibc's (st_blksize, at most BUFSIZ): with 4 KiB blocks, the top-up, the
// PT's prefetch and the check of the file (an fstat: a round trip on a network file
// system) would come once per 4 KiB and cost more than the bytes. Both threads give it
// to their streams, so their top-ups stay the same ranges. The buffer is the runtime's
// (setvbuf) until the stream's fclose or freopen: take_line_buffer() before it, and the
// buffer is freed when the result goes out of scope, after the close.
constexpr size_t kLineBufferBytes = 64 * 1024;
// True for a stream stream_room() understands that has not read anything yet.
bool stream_unbuffered(FILE *stream);
void give_line_buffer(FILE *stream);
std::unique_ptr<char[]> take_line_buffer(FILE *stream);
// Appends the `got` bytes now at room.to (got <= room.room).
void stream_filled(FILE *stream, const StreamRoom &room, size_t got);
// The file offset just past what the stream has buffered (glibc's _offset), or -1.
off_t stream_file_offset(FILE *stream);

// Gives back the bytes the stream holds past file offset `keep_end` (at least its
// position): the next read reads them from the file again. The caller holds the stream's
// lock. Nothing for a stream stream_room() does not understand.
void trim_stream_buffer(FILE *stream, off_t keep_end);
// Whether the next `within` buffered bytes of the stream hold `delim` (a line read that
// stops there takes no byte past them).
bool stream_holds_delimiter(FILE *stream, off_t within, int delim);
// Whether characters pushed back with ungetc (other than the one just read) wait in the
// stream: the next read returns them, not the file's bytes.
bool stream_has_pushback(FILE *stream);
// The stream's position (ftello) without a system call, or -1.
off_t stream_position(FILE *stream);

// Leaves the stream without a descriptor, so that its fclose frees it and closes nothing
// (the descriptor is kept open elsewhere: PtResources::close_runtime_stream).
void detach_stream_descriptor(FILE *stream);

// The stream's lock for the scope (recursive: stdio calls inside take it again).
class StreamLock {
 public:
  explicit StreamLock(FILE *s) : s_(s) { flockfile(s_); }
  ~StreamLock() { funlockfile(s_); }
  StreamLock(const StreamLock &) = delete;
  StreamLock &operator=(const StreamLock &) = delete;

 private:
  FILE *s_;
};

}  // namespace ppios
