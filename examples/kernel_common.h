/* Shared helpers of the example kernels (SUM, AVG, DSCAL, GREP).
 *
 * The kernels are inputs to ppios-cc, which pre-executes their reads in a
 * prefetch thread. For that to work, every read offset and size must be
 * computable from the rank, the number of ranks, the command line, the
 * chunk size and the file size, never from data read earlier. The chunk
 * arithmetic that produces those offsets is therefore kept here as static
 * inline functions: ppios-cc sees their bodies in the kernel's own
 * translation unit when it slices the read loop. Argument parsing, text
 * parsing and reporting, which no read offset depends on, live in
 * kernel_common.c.
 *
 * Input format: decimal integers as text, one per line, every line ending
 * in '\n'. A line is optional blanks, an optional sign, 1 to 18 digits,
 * optional blanks. Lines are at most KERNEL_MAX_LINE bytes including the
 * newline.
 *
 * Work split: rank r owns the bytes [r*S/P, (r+1)*S/P) of a file of S bytes
 * (balanced split), and walks them in chunks of the chosen size. A line
 * (an item) belongs to the chunk holding its first byte, so every line is
 * counted exactly once whatever P and the chunk size are. To see whole
 * lines, a chunk reads one byte before its start (to know whether its
 * first byte starts a line) and KERNEL_MAX_LINE bytes past its end (to
 * finish its last line), both clipped to the file.
 */
#ifndef PPIOS_EXAMPLES_KERNEL_COMMON_H
#define PPIOS_EXAMPLES_KERNEL_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Longest accepted line, newline included. Also the fixed look-ahead past a
 * chunk's end, so a line that starts in the chunk always ends in its buffer. */
#define KERNEL_MAX_LINE 256

/* Most digits an item may have: 10^18 - 1 still fits in int64_t. */
#define KERNEL_MAX_DIGITS 18

/* Chunks are read with one call each; MPI-IO counts are int, so stay well
 * below INT_MAX together with the look-around bytes. */
#define KERNEL_MAX_CHUNK ((int64_t)1 << 30)

/* DSCAL writes the result for the input line at bytes [o, o+L) to the
 * output bytes [F*o, F*(o+L)), right-aligned and padded with blanks. The
 * output is then a pure function of each input line, byte-identical for
 * any rank count and chunk size, and offsets stay predictable. F = 3 fits
 * any product of a valid line with a scalar of at most 3 digits. */
#define DSCAL_WIDTH_FACTOR 3
#define DSCAL_MAX_ABS_SCALAR 999

/* GREP's default pattern: three 9-digit items with their newlines (30
 * bytes), the first 27 digits of pi. Items are short integers, so a
 * 30-character pattern necessarily spans lines; gen-input plants it. */
#define GREP_DEFAULT_PATTERN "314159265\n358979323\n846264338\n"
#define GREP_MAX_PATTERN KERNEL_MAX_LINE

enum kernel_id { KERNEL_SUM, KERNEL_AVG, KERNEL_DSCAL, KERNEL_GREP };

struct kernel_options {
  const char *input_path;
  const char *output_path;     /* DSCAL only */
  int64_t chunk_bytes;
  int compute_factor;          /* repeat the per-chunk computation */
  int64_t scalar;              /* DSCAL only */
  char pattern[GREP_MAX_PATTERN + 1]; /* GREP only, may contain '\n' */
  size_t pattern_length;
};

/* Parses argv for the given kernel. Returns -1 when the program should run,
 * otherwise the exit status to return (0 after --help, 2 after a usage
 * error). Only print_rank 0 prints, so P ranks do not repeat the message. */
int kernel_parse_args(enum kernel_id kernel, int argc, char **argv,
                      struct kernel_options *options, int print_rank);

/* The bytes [*begin, *end) of the file that `rank` of `nprocs` owns. */
static inline void kernel_rank_share(int64_t file_size, int rank, int nprocs,
                                     int64_t *begin, int64_t *end) {
  int64_t base = file_size / nprocs;
  int64_t extra = file_size % nprocs; /* the first `extra` ranks get one more */
  *begin = base * rank + (rank < extra ? rank : extra);
  *end = *begin + base + (rank < extra ? 1 : 0);
}

static inline int64_t kernel_chunk_count(int64_t share_begin, int64_t share_end,
                                         int64_t chunk_bytes) {
  return (share_end - share_begin + chunk_bytes - 1) / chunk_bytes;
}

/* What chunk number `index` of a rank's share owns and what it must read. */
struct chunk_window {
  int64_t own_begin;   /* items starting in [own_begin, own_end) are ours */
  int64_t own_end;
  int64_t read_offset; /* file offset of the read */
  int64_t read_length; /* bytes to read */
};

/* Window for line-oriented kernels: one byte before, KERNEL_MAX_LINE after. */
static inline struct chunk_window kernel_line_window(int64_t share_begin, int64_t share_end,
                                                     int64_t chunk_bytes, int64_t index,
                                                     int64_t file_size) {
  struct chunk_window w;
  w.own_begin = share_begin + index * chunk_bytes;
  w.own_end = w.own_begin + chunk_bytes < share_end ? w.own_begin + chunk_bytes : share_end;
  w.read_offset = w.own_begin > 0 ? w.own_begin - 1 : 0;
  int64_t read_end = w.own_end + KERNEL_MAX_LINE;
  if (read_end > file_size)
    read_end = file_size;
  w.read_length = read_end - w.read_offset;
  return w;
}

/* Window for GREP: a match starting in the chunk may run pattern_length - 1
 * bytes past its end; nothing before the chunk is needed. */
static inline struct chunk_window kernel_match_window(int64_t share_begin, int64_t share_end,
                                                      int64_t chunk_bytes, int64_t index,
                                                      int64_t file_size, int64_t pattern_length) {
  struct chunk_window w;
  w.own_begin = share_begin + index * chunk_bytes;
  w.own_end = w.own_begin + chunk_bytes < share_end ? w.own_begin + chunk_bytes : share_end;
  w.read_offset = w.own_begin;
  int64_t read_end = w.own_end + pattern_length - 1;
  if (read_end > file_size)
    read_end = file_size;
  w.read_length = read_end - w.read_offset;
  return w;
}

/* Buffer size that holds any window of the given chunk size. */
static inline size_t kernel_buffer_size(int64_t chunk_bytes) {
  return (size_t)chunk_bytes + 1 + KERNEL_MAX_LINE;
}

/* Walks the lines a chunk owns, in file order. */
struct line_cursor {
  const char *buffer;   /* holds file bytes [buffer_offset, buffer_offset + buffer_length) */
  int64_t buffer_offset;
  int64_t buffer_length;
  int64_t own_end;
  int64_t file_size;
  int64_t position;     /* file offset of the next line start to parse */
  int64_t error_offset; /* where parsing failed */
  const char *error;    /* why, or NULL */
};

struct line_item {
  int64_t value;
  int64_t offset; /* file offset of the line's first byte */
  int64_t length; /* bytes including the newline */
};

void line_cursor_init(struct line_cursor *cursor, const char *buffer,
                      const struct chunk_window *window, int64_t file_size);

/* 1: *item holds the next owned line; 0: no more; -1: malformed input
 * (cursor->error and cursor->error_offset say what and where). */
int line_cursor_next(struct line_cursor *cursor, struct line_item *item);

/* SUM's and AVG's computation on one chunk: adds the owned lines' values to *sum and
 * their number to *items, repeating the parse `compute_factor` times (only the last pass
 * counts). Aborts with a message on malformed input. */
void sum_chunk(const char *program, const char *path, const char *buffer,
               const struct chunk_window *window, int64_t file_size, int compute_factor,
               uint64_t *sum, int64_t *items);

/* Counts starts of `pattern` in the chunk's buffer that lie in the owned
 * range (the buffer starts at the window's own_begin). */
int64_t count_pattern_starts(const char *buffer, const struct chunk_window *window,
                             const char *pattern, size_t pattern_length);

/* Formats `value` right-aligned in exactly `width` bytes followed by '\n'.
 * Returns 0, or -1 if it does not fit. */
int format_padded_line(char *out, int64_t width, int64_t value);

/* Order-independent 64-bit digest of DSCAL's output values: the wrapping
 * sum of a bit mixer applied to each value. */
uint64_t dscal_value_digest(int64_t value);

/* Average sum/count printed with exactly 6 decimals, rounded half away from
 * zero, computed from the integers only. */
void format_exact_average(char *out, size_t out_size, int64_t sum, int64_t count);

/* Collective: reduces the rank-local times and prints, on rank 0,
 *   TIME kernel=K nprocs=P chunk_bytes=C wall_s=.. read_max_s=.. read_mean_s=..
 *        write_max_s=.. write_mean_s=.. */
void kernel_report_time(const char *kernel_name, int64_t chunk_bytes, double wall_seconds,
                        double read_seconds, double write_seconds);

/* Collective check after opening files, so a missing file ends every rank
 * cleanly instead of leaving some waiting in a collective. A failing rank
 * prints `message` to stderr (rank 0 only, if rank 0 failed too, so the
 * message appears once). Returns nonzero on every rank if any rank failed. */
int kernel_any_rank_failed(int failed, const char *message);

/* Prints "<program>: <message> at byte <offset> of <path>" and aborts the job. */
void kernel_abort_bad_input(const char *program, const char *path, const char *message,
                            int64_t offset);

/* Prints "<program>: <what> <path>: <strerror(errno_value)>" and aborts the job. */
void kernel_abort_io(const char *program, const char *what, const char *path, int errno_value);

#endif
