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

}  // namespace ppios
