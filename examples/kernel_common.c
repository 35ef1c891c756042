/* Argument parsing, text parsing and reporting shared by the example
 * kernels. Nothing here touches the input file: every read call stays in the
 * kernel's own source, where ppios-cc can find and rewrite it. */
#define _GNU_SOURCE /* memmem */
#include "kernel_common.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CHUNK_BYTES ((int64_t)16 << 20)
#define MAX_COMPUTE_FACTOR 1000000

static const char *kernel_name(enum kernel_id kernel) {
  switch (kernel) {
  case KERNEL_SUM: return "sum";
  case KERNEL_AVG: return "avg";
  case KERNEL_DSCAL: return "dscal";
  case KERNEL_GREP: return "grep";
  }
  return "kernel";
}

static void print_usage(enum kernel_id kernel, FILE *out) {
  const char *name = kernel_name(kernel);
  switch (kernel) {
  case KERNEL_SUM:
  case KERNEL_AVG:
    fprintf(out, "usage: %s [--chunk SIZE] [--compute-factor N] INPUT\n", name);
    break;
  case KERNEL_DSCAL:
    fprintf(out, "usage: %s [--chunk SIZE] [--compute-factor N] [--scalar K] -o OUTPUT INPUT\n",
            name);
    break;
  case KERNEL_GREP:
    fprintf(out, "usage: %s [--chunk SIZE] [--compute-factor N] [--pattern TEXT] INPUT\n", name);
    break;
  }
  fprintf(out,
          "  INPUT                decimal integers as text, one per line\n"
          "  --chunk SIZE         bytes per read, suffix K, M or G for KiB, MiB, GiB\n"
          "                       (1 to 1G, default 16M)\n"
          "  --compute-factor N   repeat the computation on each chunk N times (default 1)\n");
  if (kernel == KERNEL_DSCAL)
    fprintf(out,
            "  --scalar K           integer multiplier, |K| <= %d (default 3)\n"
            "  -o OUTPUT            result file; input line at bytes [o, o+L) becomes\n"
            "                       output bytes [%d*o, %d*(o+L)), blank-padded\n",
            DSCAL_MAX_ABS_SCALAR, DSCAL_WIDTH_FACTOR, DSCAL_WIDTH_FACTOR);
  if (kernel == KERNEL_GREP)
    fprintf(out,
            "  --pattern TEXT       byte string to count, escapes \\n \\t \\\\ (1 to %d bytes;\n"
            "                       default \"314159265\\n358979323\\n846264338\\n\", 30 bytes)\n",
            GREP_MAX_PATTERN);
}

/* Parses a size such as 4093, 64K, 1M, 1GiB. Returns -1 if malformed. */
static int64_t parse_size(const char *text) {
  char *end;
  errno = 0;
  if (*text < '0' || *text > '9')
    return -1;
  unsigned long long number = strtoull(text, &end, 10);
  if (errno != 0)
    return -1;
  int shift = 0;
  if (*end == 'K' || *end == 'k')
    shift = 10;
  else if (*end == 'M' || *end == 'm')
    shift = 20;
  else if (*end == 'G' || *end == 'g')
    shift = 30;
  if (shift != 0) {
    end++;
    if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
      end += strlen(end);
  }
  if (*end != '\0' || number > ((unsigned long long)INT64_MAX >> shift))
    return -1;
  return (int64_t)(number << shift);
}

static int parse_int64(const char *text, int64_t *value) {
  char *end;
  errno = 0;
  long long number = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0')
    return -1;
  *value = number;
  return 0;
}

/* Expands \n, \t and \\ so a multi-line pattern fits on a command line. */
static int parse_pattern(const char *text, struct kernel_options *options) {
  size_t length = 0;
  for (const char *p = text; *p != '\0'; p++) {
    char c = *p;
    if (c == '\\') {
      p++;
      if (*p == 'n')
        c = '\n';
      else if (*p == 't')
        c = '\t';
      else if (*p == '\\')
        c = '\\';
      else
        return -1;
    }
    if (length == GREP_MAX_PATTERN)
      return -1;
    options->pattern[length++] = c;
  }
  if (length == 0)
    return -1;
  options->pattern[length] = '\0';
  options->pattern_length = length;
  return 0;
}

int kernel_parse_args(enum kernel_id kernel, int argc, char **argv,
                      struct kernel_options *options, int print_rank) {
  const char *name = kernel_name(kernel);
  memset(options, 0, sizeof *options);
  options->chunk_bytes = DEFAULT_CHUNK_BYTES;
  options->compute_factor = 1;
  options->scalar = 3;
  memcpy(options->pattern, GREP_DEFAULT_PATTERN, sizeof GREP_DEFAULT_PATTERN);
  options->pattern_length = sizeof GREP_DEFAULT_PATTERN - 1;

  const char *problem = NULL;
  const char *problem_arg = "";
  for (int i = 1; i < argc && problem == NULL; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      if (print_rank == 0)
        print_usage(kernel, stdout);
      return 0;
    }
    if (arg[0] != '-' || arg[1] == '\0') {
      if (options->input_path != NULL) {
        problem = "more than one input file:";
        problem_arg = arg;
      }
      options->input_path = arg;
      continue;
    }
    /* Every option takes a value, as "--opt value" or "--opt=value". */
    const char *value = NULL;
    char option[32];
    const char *equals = strchr(arg, '=');
    if (equals != NULL && arg[1] == '-' && (size_t)(equals - arg) < sizeof option) {
      memcpy(option, arg, (size_t)(equals - arg));
      option[equals - arg] = '\0';
      value = equals + 1;
    } else {
      snprintf(option, sizeof option, "%s", arg);
      if (i + 1 < argc)
        value = argv[++i];
    }
    problem_arg = option;
    int known = strcmp(option, "--chunk") == 0 || strcmp(option, "--compute-factor") == 0 ||
                (kernel == KERNEL_DSCAL &&
                 (strcmp(option, "--scalar") == 0 || strcmp(option, "-o") == 0)) ||
                (kernel == KERNEL_GREP && strcmp(option, "--pattern") == 0);
    if (!known) {
      problem = "unknown option";
      problem_arg = arg;
    } else if (value == NULL) {
      problem = "missing value for";
    } else if (strcmp(option, "--chunk") == 0) {
      options->chunk_bytes = parse_size(value);
      if (options->chunk_bytes < 1 || options->chunk_bytes > KERNEL_MAX_CHUNK)
        problem = "chunk size must be 1 to 1G bytes:";
      problem_arg = value;
    } else if (strcmp(option, "--compute-factor") == 0) {
      int64_t factor;
      if (parse_int64(value, &factor) != 0 || factor < 1 || factor > MAX_COMPUTE_FACTOR)
        problem = "compute factor must be an integer from 1 to 1000000:";
      else
        options->compute_factor = (int)factor;
      problem_arg = value;
    } else if (strcmp(option, "--scalar") == 0) {
      if (parse_int64(value, &options->scalar) != 0 || options->scalar > DSCAL_MAX_ABS_SCALAR ||
          options->scalar < -DSCAL_MAX_ABS_SCALAR)
        problem = "scalar must be an integer from -999 to 999:";
      problem_arg = value;
    } else if (strcmp(option, "-o") == 0) {
      options->output_path = value;
    } else if (strcmp(option, "--pattern") == 0) {
      if (parse_pattern(value, options) != 0)
        problem = "pattern must be 1 to 256 bytes, escapes \\n \\t \\\\ only:";
      problem_arg = value;
    }
  }
  if (problem == NULL && options->input_path == NULL) {
    problem = "missing INPUT";
    problem_arg = "";
  }
  if (problem == NULL && kernel == KERNEL_DSCAL && options->output_path == NULL) {
    problem = "missing -o OUTPUT";
    problem_arg = "";
  }
  if (problem != NULL) {
    if (print_rank == 0) {
      fprintf(stderr, "%s: %s %s\n", name, problem, problem_arg);
      print_usage(kernel, stderr);
    }
    return 2;
  }
  return -1;
}

void line_cursor_init(struct line_cursor *cursor, const char *buffer,
                      const struct chunk_window *window, int64_t file_size) {
  cursor->buffer = buffer;
  cursor->buffer_offset = window->read_offset;
  cursor->buffer_length = window->read_length;
  cursor->own_end = window->own_end;
  cursor->file_size = file_size;
  cursor->error = NULL;
  cursor->error_offset = 0;

  int64_t begin = window->own_begin;
  if (begin >= window->own_end || begin == 0 || buffer[begin - 1 - window->read_offset] == '\n') {
    cursor->position = begin;
    return;
  }
  /* The chunk starts inside a line that belongs to the previous chunk:
   * our first line starts after the next newline. */
  const char *from = buffer + (begin - window->read_offset);
  int64_t available = window->read_offset + window->read_length - begin;
  const char *newline = memchr(from, '\n', (size_t)available);
  cursor->position = newline != NULL ? begin + (newline - from) + 1 : window->own_end;
}

int line_cursor_next(struct line_cursor *cursor, struct line_item *item) {
  if (cursor->position >= cursor->own_end)
    return 0;
  const int64_t buffer_end = cursor->buffer_offset + cursor->buffer_length;
  const char *start = cursor->buffer + (cursor->position - cursor->buffer_offset);
  int64_t available = buffer_end - cursor->position;
  /* The window holds KERNEL_MAX_LINE bytes past the chunk, so a line that is
   * not finished within that many bytes is too long (or unterminated). */
  int64_t scan = available < KERNEL_MAX_LINE ? available : KERNEL_MAX_LINE;
  const char *newline = memchr(start, '\n', (size_t)scan);
  cursor->error_offset = cursor->position;
  if (newline == NULL) {
    cursor->error = available < KERNEL_MAX_LINE && buffer_end == cursor->file_size
                        ? "last line does not end with a newline"
                        : "line longer than 256 bytes";
    return -1;
  }

  const char *p = start;
  while (*p == ' ' || *p == '\t')
    p++;
  int negative = 0;
  if (*p == '-' || *p == '+')
    negative = *p++ == '-';
  const char *digits = p;
  int64_t magnitude = 0;
  while (*p >= '0' && *p <= '9' && p - digits < KERNEL_MAX_DIGITS)
    magnitude = magnitude * 10 + (*p++ - '0');
  if (*p >= '0' && *p <= '9') {
    cursor->error = "integer with more than 18 digits";
    return -1;
  }
  int has_digits = p > digits;
  while (*p == ' ' || *p == '\t' || *p == '\r')
    p++;
  if (!has_digits || p != newline) {
    cursor->error = "line is not a decimal integer";
    return -1;
  }

  item->value = negative ? -magnitude : magnitude;
  item->offset = cursor->position;
  item->length = newline - start + 1;
  cursor->position += item->length;
  return 1;
}

void sum_chunk(const char *program, const char *path, const char *buffer,
               const struct chunk_window *window, int64_t file_size, int compute_factor,
               uint64_t *sum, int64_t *items) {
  uint64_t chunk_sum = 0; /* unsigned: wrapping is defined and order-independent */
  int64_t chunk_items = 0;
  for (int repeat = 0; repeat < compute_factor; repeat++) {
    chunk_sum = 0;
    chunk_items = 0;
    struct line_cursor cursor;
    struct line_item item;
    int more;
    line_cursor_init(&cursor, buffer, window, file_size);
    while ((more = line_cursor_next(&cursor, &item)) > 0) {
      chunk_sum += (uint64_t)item.value;
      chunk_items++;
    }
    if (more < 0) kernel_abort_bad_input(program, path, cursor.error, cursor.error_offset);
  }
  *sum += chunk_sum;
  *items += chunk_items;
}

int64_t count_pattern_starts(const char *buffer, const struct chunk_window *window,
                             const char *pattern, size_t pattern_length) {
  const int64_t owned = window->own_end - window->own_begin;
  const char *end = buffer + window->read_length;
  int64_t matches = 0;
  for (const char *p = buffer; p < end;) {
    const char *hit = memmem(p, (size_t)(end - p), pattern, pattern_length);
    if (hit == NULL || hit - buffer >= owned)
      break;
    matches++;
    p = hit + 1; /* overlapping matches count too, like a search from every byte */
  }
  return matches;
}

int format_padded_line(char *out, int64_t width, int64_t value) {
  char digits[24];
  int length = 0;
  uint64_t magnitude = value < 0 ? -(uint64_t)value : (uint64_t)value;
  do {
    digits[length++] = (char)('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (value < 0)
    digits[length++] = '-';
  if (length > width)
    return -1;
  int64_t pad = width - length;
  memset(out, ' ', (size_t)pad);
  for (int i = 0; i < length; i++)
    out[pad + i] = digits[length - 1 - i];
  out[width] = '\n';
  return 0;
}

uint64_t dscal_value_digest(int64_t value) {
  /* splitmix64's finalizer: every input bit affects every output bit. */
  uint64_t z = (uint64_t)value + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void format_exact_average(char *out, size_t out_size, int64_t sum, int64_t count) {
  if (count <= 0) {
    snprintf(out, out_size, "nan");
    return;
  }
  uint64_t magnitude = sum < 0 ? -(uint64_t)sum : (uint64_t)sum;
  uint64_t whole = magnitude / (uint64_t)count;
  uint64_t remainder = magnitude % (uint64_t)count;
  /* round(remainder / count * 10^6), half away from zero on the magnitude */
  unsigned __int128 twice = (unsigned __int128)remainder * 2000000u + (uint64_t)count;
  uint64_t fraction = (uint64_t)(twice / ((unsigned __int128)count * 2));
  if (fraction == 1000000) {
    whole++;
    fraction = 0;
  }
  int negative = sum < 0 && (whole != 0 || fraction != 0);
  snprintf(out, out_size, "%s%" PRIu64 ".%06" PRIu64, negative ? "-" : "", whole, fraction);
}

void kernel_report_time(const char *kernel_name, int64_t chunk_bytes, double wall_seconds,
                        double read_seconds, double write_seconds) {
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  double local[3] = {wall_seconds, read_seconds, write_seconds};
  double max[3], sum[3];
  MPI_Reduce(local, max, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(local, sum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("TIME kernel=%s nprocs=%d chunk_bytes=%" PRId64
           " wall_s=%.6f read_max_s=%.6f read_mean_s=%.6f write_max_s=%.6f write_mean_s=%.6f\n",
           kernel_name, nprocs, chunk_bytes, max[0], max[1], sum[1] / nprocs, max[2],
           sum[2] / nprocs);
    fflush(stdout);
  }
}

int kernel_any_rank_failed(int failed, const char *message) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int root_failed = failed;
  MPI_Bcast(&root_failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (failed && (rank == 0 || !root_failed)) {
    fprintf(stderr, "%s\n", message);
    fflush(stderr);
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}

void kernel_abort_bad_input(const char *program, const char *path, const char *message,
                            int64_t offset) {
  fprintf(stderr, "%s: %s at byte %" PRId64 " of %s\n", program, message, offset, path);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void kernel_abort_io(const char *program, const char *what, const char *path, int errno_value) {
  fprintf(stderr, "%s: %s %s: %s\n", program, what, path, strerror(errno_value));
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}
