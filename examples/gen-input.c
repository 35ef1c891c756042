/* gen-input: writes a deterministic input file for the example kernels.
 *
 * The file holds decimal integers as text, one per line, of 1 to 9 digits
 * and random sign, so lines have varying lengths (1 to 11 bytes) and
 * straddle every chunk and rank boundary somewhere. The file has exactly the
 * requested size. GREP's default 30-byte pattern (three 9-digit lines) is
 * planted --matches times at evenly spaced line starts. The same options
 * always give the same bytes: the generator is splitmix64, seeded.
 *
 * With values below 10^9 and at least 2 bytes per line, the sum of a file
 * of S bytes is below S/2 * 10^9, exact in 64 bits for files up to 16 GiB.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_common.h"

#define RANDOM_LINE_MAX 11 /* '-', 9 digits, '\n' */

struct generator {
  uint64_t state;
};

static uint64_t next_random(struct generator *g) {
  uint64_t z = (g->state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Writes `digits` random digits (no leading zero unless a single digit). */
static size_t random_digits(struct generator *g, char *out, int digits) {
  for (int i = 0; i < digits; i++) {
    int low = (i == 0 && digits > 1) ? 1 : 0;
    out[i] = (char)('0' + low + (int)(next_random(g) % (uint64_t)(10 - low)));
  }
  return (size_t)digits;
}

static size_t random_line(struct generator *g, char *out) {
  size_t length = 0;
  uint64_t r = next_random(g);
  if (r & 1)
    out[length++] = '-';
  length += random_digits(g, out + length, 1 + (int)((r >> 1) % 9));
  out[length++] = '\n';
  return length;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: gen-input (--mib N | --bytes N) [--seed S] [--matches K] -o OUTPUT\n"
          "  --mib N       file size in MiB (exact)\n"
          "  --bytes N     file size in bytes (exact; 0 or at least 2)\n"
          "  --seed S      random seed, unsigned integer (default 1)\n"
          "  --matches K   how many times to plant GREP's default pattern\n"
          "                (default: one per 64 KiB)\n"
          "  -o OUTPUT     file to write\n"
          "Prints: gen-input bytes=N lines=L planted=K seed=S\n");
}

static int parse_unsigned(const char *text, unsigned long long *value) {
  char *end;
  errno = 0;
  if (text == NULL || *text < '0' || *text > '9')
    return -1;
  *value = strtoull(text, &end, 10);
  return errno != 0 || *end != '\0' ? -1 : 0;
}

static int fail_usage(const char *problem, const char *arg) {
  fprintf(stderr, "gen-input: %s%s\n", problem, arg);
  usage(stderr);
  return 2;
}

int main(int argc, char **argv) {
  unsigned long long size = 0, seed = 1, matches = 0, number;
  int have_size = 0, have_matches = 0;
  const char *output_path = NULL;

  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(arg, "--mib") == 0 || strcmp(arg, "--bytes") == 0) {
      if (have_size)
        return fail_usage("give the size once", "");
      if (parse_unsigned(value, &number) != 0)
        return fail_usage("bad size: ", value ? value : "(missing)");
      if (arg[2] == 'm' && number > (1ULL << 20))
        return fail_usage("size too large: ", value);
      size = arg[2] == 'm' ? number << 20 : number;
      have_size = 1;
      i++;
    } else if (strcmp(arg, "--seed") == 0) {
      if (parse_unsigned(value, &seed) != 0)
        return fail_usage("bad seed: ", value ? value : "(missing)");
      i++;
    } else if (strcmp(arg, "--matches") == 0) {
      if (parse_unsigned(value, &matches) != 0)
        return fail_usage("bad match count: ", value ? value : "(missing)");
      have_matches = 1;
      i++;
    } else if (strcmp(arg, "-o") == 0) {
      if (value == NULL)
        return fail_usage("missing value for -o", "");
      output_path = value;
      i++;
    } else {
      return fail_usage("unknown argument: ", arg);
    }
  }
  if (!have_size)
    return fail_usage("missing --mib or --bytes", "");
  if (output_path == NULL)
    return fail_usage("missing -o OUTPUT", "");
  if (size == 1)
    return fail_usage("a file of one byte cannot hold a line; use 0 or at least 2", "");
  if (!have_matches)
    matches = size >> 16;
  const size_t pattern_length = sizeof GREP_DEFAULT_PATTERN - 1;
  if (matches > 0 && size < matches * pattern_length + 2 * RANDOM_LINE_MAX + 1)
    return fail_usage("too many matches for this size", "");

  FILE *out = fopen(output_path, "wb");
  if (out == NULL) {
    fprintf(stderr, "gen-input: cannot create %s: %s\n", output_path, strerror(errno));
    return 1;
  }
  static char buffer[1 << 20];
  setvbuf(out, buffer, _IOFBF, sizeof buffer);

  struct generator g = {seed};
  unsigned long long remaining = size, lines = 0, planted = 0;
  char line[RANDOM_LINE_MAX + 1];
  /* Random lines while any line fits with room to spare; plant the pattern
   * at the i-th of `matches` evenly spaced targets, or earlier if the space
   * left is only just enough for the plantings still due. */
  while (remaining >= 2 * RANDOM_LINE_MAX) {
    unsigned long long written = size - remaining;
    unsigned long long target = (unsigned long long)((unsigned __int128)(2 * planted + 1) * size /
                                                     (2 * (matches ? matches : 1)));
    int due = planted < matches;
    if (due && (written >= target ||
                remaining <= (matches - planted) * pattern_length + 3 * RANDOM_LINE_MAX)) {
      fwrite(GREP_DEFAULT_PATTERN, 1, pattern_length, out);
      remaining -= pattern_length;
      lines += 3;
      planted++;
      continue;
    }
    size_t length = random_line(&g, line);
    fwrite(line, 1, length, out);
    remaining -= length;
    lines++;
  }
  /* Fill the last 0 to 21 bytes exactly, never leaving a single byte. */
  while (remaining > 0) {
    size_t length = remaining <= 10 ? (size_t)remaining : 6;
    random_digits(&g, line, (int)length - 1);
    line[length - 1] = '\n';
    fwrite(line, 1, length, out);
    remaining -= length;
    lines++;
  }
  if (fclose(out) != 0 || planted != matches) {
    fprintf(stderr, "gen-input: cannot write %s: %s\n", output_path,
            planted != matches ? "internal error placing matches" : strerror(errno));
    return 1;
  }
  printf("gen-input bytes=%llu lines=%llu planted=%llu seed=%llu\n", size, lines, planted, seed);
  return 0;
}
