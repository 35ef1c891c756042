// What the runtime relies on about glibc's stdio streams: how large a stream's buffer is,
// moving a stream without reading its file, and keeping the MT's streams' buffers exactly
// what glibc's would be (below, "the MT's streams").
//
// glibc's fseek on a read-only stream reads ahead: a target outside the stream's buffer
// makes it read the block around the target (or just the part before it, when the buffer
// is empty), so that the small reads expected next come from memory. The PT never reads
// through its own stream (it only moves it and prefetches), so for it that read would be
// a device request wasted: seek_stream() positions a stream as glibc's own seek does when
// it need not read: the buffer is left empty at the new position and the descriptor's
// offset is set there, so the next read that does go to the file reads from there, and
// ftell is exact. A target the buffer already holds is an ordinary fseeko (no system
// call). The MT's seeks keep glibc's read-ahead instead (mt_seek_stream), from the cache.
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

#include <functional>
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
// (from a prefetch) as glibc's own refill would, with the descriptor's offset moved past
// them, so that ftell, a later refill and a seek are exactly as if glibc had read them.
// Only the PT's streams are topped up (when fewer than `want` bytes are unread, at most
// half a buffer): the MT's keep the original's buffer (below, "the MT's streams"), whose
// refills ask the cache for blocks inside the ranges the PT's top-ups prefetched.
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

// A regular file's stream of the PT's whose first read is a line read gets a buffer of
// this size instead of glibc's (st_blksize, at most BUFSIZ): with 4 KiB blocks, the
// top-up, the prefetch and the check of the file (an fstat: a round trip on a network file
// system) would come once per 4 KiB and cost more than the bytes. Only the PT gives it
// to its streams: the MT's keep the original's block size (give_mirror_buffer). The
// buffer is the runtime's (setvbuf) until the stream's fclose or freopen:
// take_line_buffer() before it, and the buffer is freed when the result goes out of
// scope, after the close.
constexpr size_t kLineBufferBytes = 64 * 1024;
// True for a stream stream_room() understands that has not read anything yet.
bool stream_unbuffered(FILE *stream);
void give_line_buffer(FILE *stream);
std::unique_ptr<char[]> take_line_buffer(FILE *stream);
// Appends the `got` bytes now at room.to (got <= room.room).
void stream_filled(FILE *stream, const StreamRoom &room, size_t got);
// The file offset just past what the stream has buffered (glibc's _offset), or -1.
off_t stream_file_offset(FILE *stream);

// ------------------------------------------------------------ the MT's streams
// The program built without prefetching reads a file through its stream one buffer at a
// time (a block: stream_buffer_bytes(st_blksize) bytes, read from where the last one
// ended), and takes bytes from that buffer without asking the file again: getc, fread,
// an fseek inside it. Whatever another process or the program itself changed in the
// file meanwhile, those calls return the buffer's bytes, and the next refill returns the
// file's. The MT's stream keeps exactly that buffer (same size, same file range, same
// known-or-not offset), so every call the program makes on it, wrapped or not, returns
// what the original's would. The runtime changes only where a refill's bytes come from
// (the cache, which serves only bytes the file holds: docs/design/coherence.md) and when
// (at the start of the call that would refill, not in its middle).
//
// Mechanics: the stream's buffer is the runtime's (give_mirror_buffer), two blocks long,
// and glibc sees one block of it (_IO_buf_base.._IO_buf_end): its own refills read one
// block. Before a call that will refill (its line is not in the unread bytes), the
// current block moves to the front and the next block goes right after it (next_block,
// block_filled): glibc's buffer is that next block, and its read pointer starts before
// it, on the current block's unread bytes (_IO_read_base stays at the front so that
// ungetc can step back over them). A call that then takes no byte of the next block (a
// formatted read that stopped before it) gives it back (give_back_block): the original
// would not have read it, and still holds all of its current block.
// Only for streams the runtime gave its buffer, before their first read.

// Gives an unbuffered stream (stream_unbuffered) the runtime's buffer for blocks of
// `block` bytes. False if it could not (the stream then reads as glibc alone would).
bool give_mirror_buffer(FILE *stream, size_t block);

// The original's next refill, to be filled from elsewhere: `size` bytes of the file at
// `at` go to `to`. size 0: the stream is not one with the runtime's buffer, is at the
// end of its file, or its offset is unknown.
struct StreamBlock {
  char *to = nullptr;
  size_t size = 0;
  off_t at = -1;
  char *previous = nullptr;  // where the stream's block before it now starts
};
// Makes room for it (the stream's lock is held until give_back_block).
StreamBlock next_block(FILE *stream);
// The block's first `got` bytes are at block.to: the stream holds them as the original's
// refill would, and its descriptor stands after them.
void block_filled(FILE *stream, const StreamBlock &block, size_t got);
// After the call: if it took no byte of the block, the block is given back. A call that
// ended right at the block's start either never read it or looked at its first byte and
// pushed it back (scanf's lookahead), which glibc's pointers do not tell apart: the
// caller says which (`looked_at_next`). A block kept was the original's refill, and the
// stream gets that refill's other effects too (orientation, a line-buffered stdout
// flushed), as refilled_stream does: every refill the runtime stands in for is glibc's.
void give_back_block(FILE *stream, const StreamBlock &block, size_t got, bool looked_at_next);

// How many bytes the stream holds that the program has not read yet (0 for a stream
// next_block does not understand).
size_t stream_unread(FILE *stream);
// Whether the runtime may stand in for the stream's refills: a plain read-only file
// stream (not "r+", "w+", "a+" or mapped "rm", no pushback area, not wide). Any other
// stream reads as glibc alone would.
bool stream_mirrorable(FILE *stream);
// Whether the next `within` unread bytes of the stream hold `delim`.
bool stream_holds_delimiter(FILE *stream, size_t within, int delim);
// Whether characters pushed back with ungetc (other than the one just read) wait in the
// stream: the next read returns them, not the file's bytes.
bool stream_has_pushback(FILE *stream);
// fseeko(stream, offset, whence) on an MT stream: exactly glibc's, whose seek outside its
// buffer reads the buffer-sized block around the target at once (from the block
// boundary; only the bytes before the target when the buffer was empty), except that
// those bytes come from `fill` when it has all of them: fill(to, at, n) copies the `n`
// bytes at file offset `at` (or fewer, at the end of the file) and returns how many, or
// -1 when it does not have them all, and glibc then reads them itself. `file_size` is
// the file's size when the call started.
int mt_seek_stream(FILE *stream, off_t offset, int whence, off_t file_size,
                   const std::function<ssize_t(char *to, off_t at, size_t n)> &fill);

// The size of the stream's buffer (0: none yet, or a stream next_block does not understand).
size_t stream_buffer_size(FILE *stream);
// The stream as after a refill that read the `n` bytes at `bytes` from file offset `at`
// into its buffer (glibc's own, allocated first if need be), of which the program took
// `taken`: for a read the runtime served from elsewhere whose original ends with such a
// refill (an fread whose length is not a whole number of blocks). False, and the stream
// unchanged, if it is not one next_block understands or the bytes do not fit.
// `read_from`: where the original's reads for the call began (what glibc adds to the
// offset it knows).
bool refilled_stream(FILE *stream, off_t read_from, off_t at, const char *bytes, size_t n, size_t taken);
// Moves the stream to `offset` without reading, as seek_stream does, but leaves glibc's
// knowledge of its offset as it was: for the runtime's own moves (an fread served from
// the cache), which the original's stream does not make.
int reposition_stream(FILE *stream, off_t offset);

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
