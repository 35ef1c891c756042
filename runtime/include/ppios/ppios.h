/* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception */
/*
 * libppios: the C ABI that programs rewritten by ppios-cc call.
 *
 * A prefetching build has two kinds of calls:
 *
 *  - Main-thread (MT) calls, ppios_<name>, drop-in replacements for the program's own
 *    I/O calls with exactly the same semantics (return value, errno, short reads at EOF,
 *    file position afterwards). Reads are served from what the prefetch thread fetched
 *    when the cached bytes are exactly what the call would return, and go to storage
 *    otherwise. Writes invalidate overlapping prefetched data.
 *
 *  - Prefetch-thread (PT) calls, ppios_pt_<name> and ppios_prefetch_<name>, used only
 *    inside the function passed to ppios_pt_start. The PT works on descriptors and
 *    streams of its own (opened read-only by ppios_pt_open/ppios_pt_fopen), so plain
 *    lseek/fseek/ftell/fstat on them need no wrapper (in a wrapped build they reach the
 *    real call once the handle is known to be the PT's own). A prefetch call fetches the bytes
 *    the original read would return into the process's prefetch cache and returns the
 *    value that read is predicted to return, so the pre-executed slice can keep going
 *    (e.g. `while ((n = read(fd, buf, BS)) > 0)`). The PT never performs a side effect.
 *
 * Every prefetch carries the I/O sequence number `seq` of the read it pre-executes:
 * the number of data transfers (reads and writes through ppios_* MT calls) the original
 * program performs before it, plus one. The MT counts its transfers the same way, which
 * pairs the PT's k-th access with the MT's.
 *
 * Every prefetch also carries `site`: where the read it pre-executes is in the program's
 * source, "file:line:col" (the file as the compiler was given it, the user's line and
 * column, not the generated copy's). It must be a string literal (or any string that
 * lives as long as the process: the runtime keeps the pointer), or NULL when unknown.
 * PPIOS_TRACE and PPIOS_STATS ("pt_sites") record it, so that ppios-report names the line
 * of the PT's bytes without debug information.
 *
 * The MT's calls reach the runtime in one of two ways: the program calls ppios_<name>
 * itself (hand-written builds, tests), or it keeps its own calls and is linked with
 * -Wl,--wrap=<name> for every name in ppios/interpose.def, so that they reach __wrap_<name>
 * in libppios (what ppios-cc does). A wrapped call goes straight to the real call, outside
 * the runtime, when it is made on the PT or a waiting thread, inside a program signal
 * handler, from inside the runtime (a handler interrupting it), or in a forked child.
 *
 * The PT must never change what the program does: it can stop quietly at any point (an
 * "escape": its slice is left, everything it owns is released, the thread ends and the
 * MT's reads simply miss from then on). It escapes when the runtime stops, on
 * ppios_pt_exit, on an out-of-bounds ppios_pt_index (ppios_pt_block_index, or a copy read
 * bigger than the PT's block it reads into), when ppios_pt_malloc is over
 * budget, and on a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL) in its slice, which prints one
 * warning line. Every ppios_pt_* and ppios_prefetch_* call escapes at entry if the
 * runtime is stopping; ppios_pt_poll does only that. The PT reads only regular files it
 * opened itself: its calls (and wrapped read/pread/lseek/close/stdio calls made on the
 * PT) on any other descriptor or stream fail with EBADF and touch nothing.
 *
 * Configuration comes from PPIOS_* environment variables, read once when the library is
 * loaded (see README.md). All functions are thread-safe; ppios_pt_malloc and friends are
 * for the PT thread only.
 *
 * ppios-cc includes this header after the program's last #include, so the program's own
 * macros defined before that (`#define size 4096`) reach it: every identifier it declares,
 * parameters included, starts with ppios_ or PPIOS_ (`ppios_size`; the comments name the
 * parameters without the prefix).
 */
#ifndef PPIOS_PPIOS_H
#define PPIOS_PPIOS_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/types.h>

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sequence number of a data transfer of the original program, counted from 1. */
typedef uint64_t ppios_seq_t;

/* Prefetch flags. */
/* The read may depend on an earlier write of the program (read after write): the
 * runtime hands it to a waiting thread that issues it only once the MT has completed
 * every I/O before `seq`; the PT itself runs on. */
#define PPIOS_PF_AFTER_WRITE 0x1u
/* The read may see bytes another process wrote before an MPI synchronization point (a
 * barrier, a collective, a message) that the MT passes before this read: the PT itself
 * waits until the MT has started transfer `seq` (so has passed every such point before
 * it) and escapes if the runtime stops meanwhile. For the _copy calls only. */
#define PPIOS_PF_AFTER_SYNC 0x2u

/* In a file ppios-cc transformed (it defines PPIOS_CC_WEAK before including this header)
 * every function below is a weak reference. An object made by `ppios-cc -c` then also
 * links without libppios, as when a Makefile compiles with CC=ppios-cc but links with
 * plain mpicc: the program runs as the original, since the MT starts the prefetch thread
 * (and hands it anything) only if ppios_linked(). With libppios, as ppios-cc links, the
 * references are resolved as usual. */
#if defined(PPIOS_CC_WEAK) && (defined(__GNUC__) || defined(__clang__))
#define PPIOS_API __attribute__((__weak__))
#define ppios_linked() (ppios_pt_start != 0)
#else
#define PPIOS_API
#define ppios_linked() 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PPIOS_NORETURN __attribute__((__noreturn__))
#else
#define PPIOS_NORETURN
#endif

/* ---------------------------------------------------------------- lifecycle */

/* Starts the prefetch thread: it runs entry(copy of ctx). ctx (ctx_size bytes) is copied
 * before the call returns, so the caller may reuse it. Call it from the MT once the values
 * the PT needs are known (after MPI_Init, after broadcasts). Does nothing in
 * PPIOS_MODE=off or if a PT was already started. Returns 0, or -1 with errno set.
 * entry runs under the PT's escape (see above); the PT blocks every asynchronous signal
 * (the program's handlers run on the program's threads) and has a fault net for
 * SIGSEGV, SIGBUS, SIGFPE and SIGILL. */
PPIOS_API int ppios_pt_start(void (*ppios_entry)(void *ppios_context), const void *ppios_context,
                             size_t ppios_context_size);

/* The number of data transfers (reads and writes through ppios_* calls) the MT has
 * started so far: the sequence number a PT started now counts on from. */
PPIOS_API ppios_seq_t ppios_mt_seq(void);

/* Replaces MPI_Finalize: stops the PT, writes PPIOS_STATS and PPIOS_TRACE output, then
 * calls MPI_Finalize. (Programs that exit without MPI_Finalize get their output at exit.) */
PPIOS_API int ppios_MPI_Finalize(void);

/* ---------------------------------------------------------------- PT: safety
 * For generated PT code only (on any other thread ppios_pt_exit aborts the process). */

/* The PT stops quietly, here and now: where the program would exit, abort or MPI_Abort
 * on the PT's path (the PT keeps the program's guards but never ends the process).
 * PPIOS_STATS pt_stop "exit". */
PPIOS_API void ppios_pt_exit(void) PPIOS_NORETURN;

/* Called at every loop iteration of the slice: escapes if the runtime is stopping (an
 * acquire load otherwise). PPIOS_STATS pt_stop "stopped". */
PPIOS_API void ppios_pt_poll(void);

/* ppios_pt_poll for a loop the PT runs past an exit it cannot evaluate (a condition on
 * the data read, which it speculates is false): `seq` is the PT's sequence number. The PT
 * waits while the MT has not started transfer seq - 16, so at most 16 prefetches are
 * wasted when the program leaves the loop. PPIOS_STATS pt_speculation_wait_s. */
PPIOS_API void ppios_pt_speculate(ppios_seq_t ppios_sequence);

/* The PT's own heap memory (copies of the program's tables), counted against the same
 * PPIOS_CACHE_MB budget as the prefetch cache. They never return NULL: over budget or out
 * of memory the PT escapes (pt_stop "budget"). ppios_pt_realloc(NULL, n) allocates;
 * ppios_pt_free(NULL) does nothing. Every block still allocated when the PT ends (or
 * escapes) is freed then. A pointer that is not such a block (the program's memory) is
 * never freed: ppios_pt_free ignores it, ppios_pt_realloc escapes. */
PPIOS_API void *ppios_pt_malloc(size_t ppios_size);
PPIOS_API void *ppios_pt_calloc(size_t ppios_nmemb, size_t ppios_size);
PPIOS_API void *ppios_pt_realloc(void *ppios_ptr, size_t ppios_size);
PPIOS_API void ppios_pt_free(void *ppios_ptr);

/* The block of a variable-length array the PT declares (no limit on its size can be
 * checked against its thread stack before it runs): one block per declaration, kept in
 * *slot (a static of the PT's function), resized to `bytes` and zeroed each time the
 * declaration runs. Within PPIOS_CACHE_MB like ppios_pt_malloc. */
PPIOS_API void *ppios_pt_vla(void **ppios_slot, size_t ppios_bytes);

/* The escape of ppios_pt_index (pt_stop "bounds"); not called directly. */
PPIOS_API void ppios_pt_out_of_bounds(void) PPIOS_NORETURN;

/* Bounds check the transformer emits around subscripts of the PT's arrays of constant size:
 * returns i if 0 <= i < n, else the PT escapes quietly. __inline__, not inline: this header
 * is compiled with the program's flags, and under -std=c89/-ansi `inline` is no keyword. */
static __inline__ long long ppios_pt_index(long long ppios_i, long long ppios_n) {
  if (__builtin_expect(ppios_i >= 0 && ppios_i < ppios_n, 1))
    return ppios_i;
  ppios_pt_out_of_bounds();
}

/* The 16 bytes the runtime keeps right before each block of ppios_pt_malloc and friends
 * (and ppios_pt_vla): `key` is the block's address xor PPIOS_PT_BLOCK_KEY (zero once the
 * block is freed), `bytes` its size. ppios_pt_block_index reads them. */
struct ppios_pt_block_header {
  uintptr_t ppios_key;
  size_t ppios_bytes;
};
#define PPIOS_PT_BLOCK_KEY ((uintptr_t)0x70705f626c6f636bUL)

/* Bounds check the transformer emits where the PT stores through a subscript (or `*`, `->`)
 * of a pointer that only the PT's allocator sets: p must be a block of the PT's, and
 * element i of `size` bytes must lie inside it; returns i, else the PT escapes quietly
 * (pt_stop "bounds"). One load of the header (next to the block's first bytes), a compare
 * and a division by a constant. A pointer that is not a live block of the PT's (the PT
 * freed it) escapes; a null one faults, and the fault net escapes. */
/* The header that would precede p, out of the compiler's sight (p may be a variable: the
 * compiler must neither warn about nor optimise on what lies before it). */
static __inline__ const struct ppios_pt_block_header *
ppios_pt_block_header_of(const void *ppios_p) {
  uintptr_t ppios_at = (uintptr_t)ppios_p - sizeof(struct ppios_pt_block_header);
  __asm__("" : "+r"(ppios_at));
  return (const struct ppios_pt_block_header *)ppios_at;
}

static __inline__ long long ppios_pt_block_index(const void *ppios_p, long long ppios_i,
                                                 size_t ppios_size) {
  const struct ppios_pt_block_header *ppios_h = ppios_pt_block_header_of(ppios_p);
  if (__builtin_expect(ppios_h->ppios_key == ((uintptr_t)ppios_p ^ PPIOS_PT_BLOCK_KEY) &&
                           ppios_i >= 0 &&
                           (unsigned long long)ppios_i <
                               ppios_h->ppios_bytes / (ppios_size ? ppios_size : 1),
                       1))
    return ppios_i;
  ppios_pt_out_of_bounds();
}

/* The same for a clone's pointer parameter, whose callers pass only the start of memory the
 * PT owns: a block of its allocator (checked as above), or a whole variable of the PT's,
 * of which only element 0 is known to exist. */
static __inline__ long long ppios_pt_object_index(const void *ppios_p, long long ppios_i,
                                                  size_t ppios_size) {
  const struct ppios_pt_block_header *ppios_h = ppios_pt_block_header_of(ppios_p);
  if (ppios_h->ppios_key == ((uintptr_t)ppios_p ^ PPIOS_PT_BLOCK_KEY))
    return ppios_pt_block_index(ppios_p, ppios_i, ppios_size);
  if (__builtin_expect(ppios_i == 0, 1))
    return 0;
  ppios_pt_out_of_bounds();
}

/* ---------------------------------------------------------------- MT: POSIX */
PPIOS_API int ppios_open(const char *ppios_path, int ppios_flags, ...);
PPIOS_API int ppios_openat(int ppios_dirfd, const char *ppios_path, int ppios_flags,
                           mode_t ppios_mode);
PPIOS_API int ppios_close(int ppios_fd);
PPIOS_API ssize_t ppios_read(int ppios_fd, void *ppios_buf, size_t ppios_count);
PPIOS_API ssize_t ppios_pread(int ppios_fd, void *ppios_buf, size_t ppios_count,
                              off_t ppios_offset);
PPIOS_API ssize_t ppios_write(int ppios_fd, const void *ppios_buf, size_t ppios_count);
PPIOS_API ssize_t ppios_pwrite(int ppios_fd, const void *ppios_buf, size_t ppios_count,
                               off_t ppios_offset);
PPIOS_API off_t ppios_lseek(int ppios_fd, off_t ppios_offset, int ppios_whence);

/* ---------------------------------------------------------------- MT: stdio */
PPIOS_API FILE *ppios_fopen(const char *ppios_path, const char *ppios_mode);
PPIOS_API FILE *ppios_fdopen(int ppios_fd, const char *ppios_mode);
PPIOS_API FILE *ppios_freopen(const char *ppios_path, const char *ppios_mode, FILE *ppios_stream);
PPIOS_API int ppios_fclose(FILE *ppios_stream);
PPIOS_API size_t ppios_fread(void *ppios_ptr, size_t ppios_size, size_t ppios_nmemb,
                             FILE *ppios_stream);
PPIOS_API size_t ppios_fwrite(const void *ppios_ptr, size_t ppios_size, size_t ppios_nmemb,
                              FILE *ppios_stream);
/* Line reads: the stream's buffer is topped up from the cache before the original call. */
PPIOS_API char *ppios_fgets(char *ppios_s, int ppios_n, FILE *ppios_stream);
PPIOS_API char *ppios_fgets_chk(char *ppios_s, size_t ppios_size, int ppios_n, FILE *ppios_stream);
PPIOS_API ssize_t ppios_getline(char **ppios_lineptr, size_t *ppios_n, FILE *ppios_stream);
PPIOS_API ssize_t ppios_getdelim(char **ppios_lineptr, size_t *ppios_n, int ppios_delim,
                                 FILE *ppios_stream);
/* fscanf (c99: glibc's __isoc99_fscanf; else the GNU one), topped up the same way. */
PPIOS_API int ppios_vfscanf(FILE *ppios_stream, const char *ppios_format, va_list ppios_ap,
                            int ppios_c99);
PPIOS_API int ppios_fseek(FILE *ppios_stream, long ppios_offset, int ppios_whence);
PPIOS_API int ppios_fseeko(FILE *ppios_stream, off_t ppios_offset, int ppios_whence);
PPIOS_API long ppios_ftell(FILE *ppios_stream);
PPIOS_API off_t ppios_ftello(FILE *ppios_stream);
PPIOS_API void ppios_rewind(FILE *ppios_stream);

/* ---------------------------------------------------------------- MT: MPI-IO
 * Reads through a contiguous file view (a displacement, contiguous etype and filetype)
 * are served from the cache, collective ones too: the MT still takes part in the
 * collective call, with the items the cache did not serve (none if it served them all).
 * Other views pass straight through. Datatypes: predefined, or derived, contiguous and
 * committed through ppios_MPI_Type_commit (the runtime measures them there for the PT,
 * which never calls MPI); reads with any other type pass straight through. */
PPIOS_API int ppios_MPI_Type_commit(MPI_Datatype *ppios_datatype);
PPIOS_API int ppios_MPI_Type_free(MPI_Datatype *ppios_datatype);
PPIOS_API int ppios_MPI_File_open(MPI_Comm ppios_comm, const char *ppios_filename, int ppios_amode,
                                  MPI_Info ppios_info, MPI_File *ppios_fh);
PPIOS_API int ppios_MPI_File_close(MPI_File *ppios_fh);
PPIOS_API int ppios_MPI_File_read(MPI_File ppios_fh, void *ppios_buf, int ppios_count,
                                  MPI_Datatype ppios_datatype, MPI_Status *ppios_status);
PPIOS_API int ppios_MPI_File_read_at(MPI_File ppios_fh, MPI_Offset ppios_offset, void *ppios_buf,
                                     int ppios_count, MPI_Datatype ppios_datatype,
                                     MPI_Status *ppios_status);
PPIOS_API int ppios_MPI_File_read_all(MPI_File ppios_fh, void *ppios_buf, int ppios_count,
                                      MPI_Datatype ppios_datatype, MPI_Status *ppios_status);
PPIOS_API int ppios_MPI_File_read_at_all(MPI_File ppios_fh, MPI_Offset ppios_offset,
                                         void *ppios_buf, int ppios_count,
                                         MPI_Datatype ppios_datatype, MPI_Status *ppios_status);
PPIOS_API int ppios_MPI_File_write(MPI_File ppios_fh, const void *ppios_buf, int ppios_count,
                                   MPI_Datatype ppios_datatype, MPI_Status *ppios_status);
PPIOS_API int ppios_MPI_File_write_at(MPI_File ppios_fh, MPI_Offset ppios_offset,
                                      const void *ppios_buf, int ppios_count,
                                      MPI_Datatype ppios_datatype, MPI_Status *ppios_status);
PPIOS_API int ppios_MPI_File_write_all(MPI_File ppios_fh, const void *ppios_buf, int ppios_count,
                                       MPI_Datatype ppios_datatype, MPI_Status *ppios_status);
PPIOS_API int ppios_MPI_File_write_at_all(MPI_File ppios_fh, MPI_Offset ppios_offset,
                                          const void *ppios_buf, int ppios_count,
                                          MPI_Datatype ppios_datatype, MPI_Status *ppios_status);
PPIOS_API int ppios_MPI_File_seek(MPI_File ppios_fh, MPI_Offset ppios_offset, int ppios_whence);

/* ---------------------------------------------------------------- PT: POSIX and stdio */

/* Opens `path` read-only for the PT, whatever `flags`/`mode` the program used (the PT
 * never creates or truncates). Returns a descriptor/stream of the PT's own, or -1/NULL.
 * Only regular files: anything else (FIFO, tty, device, /dev/stdin) is closed again
 * without being read (opened with O_NONBLOCK so that a FIFO never blocks) and the result
 * is -1/NULL with errno ENXIO. ppios_pt_close/ppios_pt_fclose refuse (-1/EOF, EBADF) a
 * descriptor or stream the PT does not own. */
PPIOS_API int ppios_pt_open(const char *ppios_path, int ppios_flags, ...);
PPIOS_API int ppios_pt_close(int ppios_fd);
PPIOS_API FILE *ppios_pt_fopen(const char *ppios_path, const char *ppios_mode);
PPIOS_API int ppios_pt_fclose(FILE *ppios_stream); /* a NULL stream is allowed (the open failed) */

/* Pre-execute read/pread/fread (a NULL stream fetches nothing and returns 0): fetch what the original call would read into the cache
 * and return what it is predicted to return (bytes for read/pread, items for fread).
 * ppios_prefetch_read and ppios_prefetch_fread advance the PT descriptor's or stream's
 * position by the predicted amount, as the original call would. A read that cannot be
 * predicted (not a regular file, bad descriptor) returns -1 (0 for fread) and fetches
 * nothing. */
PPIOS_API ssize_t ppios_prefetch_read(int ppios_fd, size_t ppios_count, ppios_seq_t ppios_sequence,
                                      unsigned ppios_flags, const char *ppios_site);
PPIOS_API ssize_t ppios_prefetch_pread(int ppios_fd, size_t ppios_count, off_t ppios_offset,
                                       ppios_seq_t ppios_sequence, unsigned ppios_flags,
                                       const char *ppios_site);
PPIOS_API size_t ppios_prefetch_fread(size_t ppios_size, size_t ppios_nmemb, FILE *ppios_stream,
                                      ppios_seq_t ppios_sequence, unsigned ppios_flags,
                                      const char *ppios_site);

/* Variants for a PT that needs the bytes themselves (e.g. an index file whose values are
 * the offsets of later reads): they read into `buf`, which must be the PT's own memory,
 * return exactly what the original call would (bytes or -1 with errno; items for fread),
 * move the PT descriptor's or stream's position like the original, and leave a copy in
 * the cache for the MT. With PPIOS_PF_AFTER_WRITE the PT first waits until the MT has
 * completed every transfer before `seq`; with PPIOS_PF_AFTER_SYNC until it has started
 * transfer `seq`. The bytes of `buf` the read will fill are touched first, so a bad
 * buffer is a fault of the slice (an escape), not of the runtime. */
PPIOS_API ssize_t ppios_prefetch_pread_copy(int ppios_fd, void *ppios_buf, size_t ppios_count,
                                            off_t ppios_offset, ppios_seq_t ppios_sequence,
                                            unsigned ppios_flags, const char *ppios_site);
PPIOS_API ssize_t ppios_prefetch_read_copy(int ppios_fd, void *ppios_buf, size_t ppios_count,
                                           ppios_seq_t ppios_sequence, unsigned ppios_flags,
                                           const char *ppios_site);
PPIOS_API size_t ppios_prefetch_fread_copy(void *ppios_buf, size_t ppios_size, size_t ppios_nmemb,
                                           FILE *ppios_stream, ppios_seq_t ppios_sequence,
                                           unsigned ppios_flags, const char *ppios_site);

/* Line reads (fgets, getline, getdelim): the PT's stream is topped up by a prefetch of
 * what the MT's stream will take from the cache before the same call (each once per half
 * a stream buffer), then the original call runs on the PT's stream, so the PT follows
 * the lines exactly. The line goes to `s` (_copy: the PT's own memory) or to a buffer of
 * the runtime's; the result is the original call's (NULL / -1 on a stream the PT could
 * not open). */
PPIOS_API char *ppios_prefetch_fgets(int ppios_n, FILE *ppios_stream, ppios_seq_t ppios_sequence,
                                     unsigned ppios_flags, const char *ppios_site);
PPIOS_API char *ppios_prefetch_fgets_copy(char *ppios_s, int ppios_n, FILE *ppios_stream,
                                          ppios_seq_t ppios_sequence, unsigned ppios_flags,
                                          const char *ppios_site);
PPIOS_API ssize_t ppios_prefetch_getline(FILE *ppios_stream, ppios_seq_t ppios_sequence,
                                         unsigned ppios_flags, const char *ppios_site);
PPIOS_API ssize_t ppios_prefetch_getdelim(int ppios_delim, FILE *ppios_stream,
                                          ppios_seq_t ppios_sequence, unsigned ppios_flags,
                                          const char *ppios_site);
/* fscanf: the PT's stream is topped up the same way, then scanned with every conversion
 * suppressed, so it matches exactly the input the program's call matches; the result is
 * the count the program's call returns (EOF on a NULL stream). The destinations after
 * `format` are never written (ppios-cc passes null pointers). A format it cannot follow
 * (%n, the m modifier, n$ arguments, more than 32 conversions) ends the PT. */
PPIOS_API int ppios_prefetch_fscanf(FILE *ppios_stream, ppios_seq_t ppios_sequence,
                                    unsigned ppios_flags, const char *ppios_site,
                                    const char *ppios_format, ...);

/* ---------------------------------------------------------------- PT: reopening
 * Called by the MT where the PT starts, for a descriptor, stream or MPI file the MT opened
 * earlier (anywhere: in main, in a helper, in another file) and the PT will read through:
 * the PT gets a read-only handle of its own to the same file, at the MT's current position
 * (kernel offset, stream position, MPI individual file pointer), so the MT's handle is
 * never touched by the PT. Only regular files are reopened; otherwise (or if the MT's
 * handle is invalid) the result is -1 / NULL / the null token, on which the PT's calls do
 * nothing. */
PPIOS_API int ppios_pt_reopen_fd(int ppios_mt_fd);
PPIOS_API FILE *ppios_pt_reopen_stream(FILE *ppios_mt_stream);

/* A handle the MT sets after the PT started (a helper opens a file later): right after
 * that statement the MT hands the PT a reopened copy in `slot`; the PT, arriving at the
 * same statement, takes it, waiting until the MT got there or the runtime stops (then
 * -1 / NULL / the null token). Without a running PT the MT's call does nothing. */
PPIOS_API void ppios_mt_handoff_fd(unsigned ppios_slot, int ppios_mt_fd);
PPIOS_API void ppios_mt_handoff_stream(unsigned ppios_slot, FILE *ppios_mt_stream);
PPIOS_API int ppios_pt_take_fd(unsigned ppios_slot);
PPIOS_API FILE *ppios_pt_take_stream(unsigned ppios_slot);

/* ---------------------------------------------------------------- PT: MPI-IO
 * The PT may not call MPI, so it sees an MPI file as a read-only POSIX descriptor of its
 * own (ROMIO prefixes such as "ufs:" are stripped). Offsets count etypes of the handle's
 * view, as for MPI: the default view (bytes), or a contiguous one set with
 * ppios_pt_MPI_File_set_view (a displacement that skips a header; predefined etype and
 * filetype) or inherited from the MT's handle at a reopen. A handle whose view has holes
 * is not prefetched (its prefetch calls return -1). Datatypes must be contiguous:
 * predefined, or derived and committed by the MT through ppios_MPI_Type_commit.
 * A PT handle has the type MPI_File, so that it fits where the program keeps its files
 * (struct fields, parameters), but it is a token of the runtime's: it must never reach an
 * MPI call. An invalid PT handle is the null token (a failed open). */
typedef MPI_File ppios_pt_mpi_file;

/* Returns MPI_SUCCESS and sets *fh, or an MPI error class. */
PPIOS_API int ppios_pt_MPI_File_open(const char *ppios_filename, int ppios_amode,
                                     ppios_pt_mpi_file *ppios_fh);
/* See "PT: reopening": an MPI file the MT opened through ppios_MPI_File_open. */
PPIOS_API ppios_pt_mpi_file ppios_pt_reopen_MPI_File(MPI_File ppios_mt_fh);
PPIOS_API void ppios_mt_handoff_MPI_File(unsigned ppios_slot, MPI_File ppios_mt_fh);
PPIOS_API ppios_pt_mpi_file ppios_pt_take_MPI_File(unsigned ppios_slot);
PPIOS_API int ppios_pt_MPI_File_close(ppios_pt_mpi_file *ppios_fh);
PPIOS_API int ppios_pt_MPI_File_seek(ppios_pt_mpi_file ppios_fh, MPI_Offset ppios_offset,
                                     int ppios_whence);
PPIOS_API int ppios_pt_MPI_File_get_size(ppios_pt_mpi_file ppios_fh, MPI_Offset *ppios_size);
/* Like MPI_File_set_view, for the PT's handle (moves its file pointer to the view's
 * start). Returns MPI_SUCCESS, or MPI_ERR_FILE for a handle the PT does not own. */
PPIOS_API int ppios_pt_MPI_File_set_view(ppios_pt_mpi_file ppios_fh, MPI_Offset ppios_disp,
                                         MPI_Datatype ppios_etype, MPI_Datatype ppios_filetype,
                                         const char *ppios_datarep, MPI_Info ppios_info);
/* Return what the MT's read is predicted to return: MPI_SUCCESS (at the end of the file
 * too, with fewer items), or MPI_ERR_UNKNOWN when the PT cannot tell (a handle it does not
 * own, a view with holes, a derived datatype). `status` (or MPI_STATUS_IGNORE) is the
 * PT's own: its fields are set to zero and its count, for ppios_pt_MPI_Get_count, to the
 * whole items predicted. */
PPIOS_API int ppios_prefetch_MPI_File_read(ppios_pt_mpi_file ppios_fh, int ppios_count,
                                           MPI_Datatype ppios_datatype, MPI_Status *ppios_status,
                                           ppios_seq_t ppios_sequence, unsigned ppios_flags,
                                           const char *ppios_site);
PPIOS_API int ppios_prefetch_MPI_File_read_at(ppios_pt_mpi_file ppios_fh, MPI_Offset ppios_offset,
                                              int ppios_count, MPI_Datatype ppios_datatype,
                                              MPI_Status *ppios_status, ppios_seq_t ppios_sequence,
                                              unsigned ppios_flags, const char *ppios_site);
/* This process's part of a collective read, prefetched with independent reads. */
PPIOS_API int ppios_prefetch_MPI_File_read_all(ppios_pt_mpi_file ppios_fh, int ppios_count,
                                               MPI_Datatype ppios_datatype,
                                               MPI_Status *ppios_status, ppios_seq_t ppios_sequence,
                                               unsigned ppios_flags, const char *ppios_site);
PPIOS_API int ppios_prefetch_MPI_File_read_at_all(ppios_pt_mpi_file ppios_fh,
                                                  MPI_Offset ppios_offset, int ppios_count,
                                                  MPI_Datatype ppios_datatype,
                                                  MPI_Status *ppios_status,
                                                  ppios_seq_t ppios_sequence, unsigned ppios_flags,
                                                  const char *ppios_site);

/* The PT needs the items themselves: see ppios_prefetch_pread_copy. Returns as above. */
PPIOS_API int ppios_prefetch_MPI_File_read_at_copy(ppios_pt_mpi_file ppios_fh,
                                                   MPI_Offset ppios_offset, void *ppios_buf,
                                                   int ppios_count, MPI_Datatype ppios_datatype,
                                                   MPI_Status *ppios_status,
                                                   ppios_seq_t ppios_sequence, unsigned ppios_flags,
                                                   const char *ppios_site);
PPIOS_API int ppios_prefetch_MPI_File_read_at_all_copy(
    ppios_pt_mpi_file ppios_fh, MPI_Offset ppios_offset, void *ppios_buf, int ppios_count,
    MPI_Datatype ppios_datatype, MPI_Status *ppios_status, ppios_seq_t ppios_sequence,
    unsigned ppios_flags, const char *ppios_site);

/* MPI_Get_count / MPI_Get_elements on a status a PT prefetch set: the predicted number of
 * whole items (MPI_UNDEFINED if the bytes are not known or not whole items). A program
 * that reads until a short count (do { MPI_File_read(..., &status); MPI_Get_count(&status,
 * ..., &n); ... } while (n == N)) is pre-executed with the counts its reads will return. */
/* MPI_Comm_rank and MPI_Comm_size for the PT: answered for MPI_COMM_WORLD (measured by
 * the MT when the PT started) and MPI_COMM_SELF. For any other communicator the PT cannot
 * know the answer: it ends there, as at the program's end (pt_stop "exit"). */
PPIOS_API int ppios_pt_MPI_Comm_rank(MPI_Comm ppios_comm, int *ppios_rank);
PPIOS_API int ppios_pt_MPI_Comm_size(MPI_Comm ppios_comm, int *ppios_size);
PPIOS_API int ppios_pt_MPI_Get_count(const MPI_Status *ppios_status, MPI_Datatype ppios_datatype,
                                     int *ppios_count);
PPIOS_API int ppios_pt_MPI_Get_elements(const MPI_Status *ppios_status, MPI_Datatype ppios_datatype,
                                        int *ppios_count);

#ifdef __cplusplus
}
#endif

#endif /* PPIOS_PPIOS_H */
