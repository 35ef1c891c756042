/* Reference results for the kernel tests, computed the simplest way: the
 * whole file in memory, one pass, strtoll and printf, no chunks, no ranks.
 * It shares no code with the kernels, so a bug in their chunk or line
 * splitting cannot hide behind the same bug here.
 *
 *   reference sum FILE
 *   reference avg FILE
 *   reference dscal FILE SCALAR OUTPUT   (also writes the expected output)
 *   reference grep FILE [PATTERN]        (PATTERN with \n escapes)
 *
 * prints the result line the kernel must print.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  size_t capacity = 1 << 16, length = 0;
  char *data = malloc(capacity + 1);
  size_t got;
  while ((got = fread(data + length, 1, capacity - length, f)) > 0) {
    length += got;
    if (length == capacity)
      data = realloc(data, (capacity *= 2) + 1);
  }
  fclose(f);
  data[length] = '\0';
  *size = length;
  return data;
}

static void die(const char *why, size_t offset) {
  fprintf(stderr, "reference: %s at byte %zu\n", why, offset);
  exit(1);
}

/* Calls visit(value, line_length) for each line, validating as specified. */
static void for_each_item(char *data, size_t size, void (*visit)(long long, size_t, void *),
                          void *context) {
  if (size > 0 && data[size - 1] != '\n')
    die("last line does not end with a newline", size);
  size_t start = 0;
  while (start < size) {
    char *newline = memchr(data + start, '\n', size - start);
    size_t length = (size_t)(newline - (data + start)) + 1;
    if (length > 256)
      die("line too long", start);
    *newline = '\0';
    char *line = data + start, *end;
    int digits = 0;
    for (char *p = line; *p; p++)
      digits += isdigit((unsigned char)*p) != 0;
    long long value = strtoll(line, &end, 10);
    if (end == line || digits > 18 || digits == 0)
      die("bad integer", start);
    end += strspn(end, " \t\r");
    if (*end != '\0')
      die("trailing garbage", start);
    *newline = '\n';
    visit(value, length, context);
    start += length;
  }
}

struct totals {
  uint64_t sum;
  long long count;
  long long scalar;
  FILE *out;
  uint64_t digest;
};

static void add_item(long long value, size_t length, void *context) {
  (void)length;
  struct totals *t = context;
  t->sum += (uint64_t)value;
  t->count++;
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void scale_item(long long value, size_t length, void *context) {
  struct totals *t = context;
  long long product = value * t->scalar;
  fprintf(t->out, "%*lld\n", (int)(3 * length - 1), product);
  t->count++;
  t->digest += mix((uint64_t)product);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: reference sum|avg|grep FILE | dscal FILE SCALAR OUTPUT\n");
    return 2;
  }
  size_t size;
  char *data = slurp(argv[2], &size);
  struct totals t = {0, 0, 0, NULL, 0};
  if (strcmp(argv[1], "sum") == 0) {
    for_each_item(data, size, add_item, &t);
    printf("SUM result=%lld items=%lld\n", (long long)(int64_t)t.sum, t.count);
  } else if (strcmp(argv[1], "avg") == 0) {
    for_each_item(data, size, add_item, &t);
    if (t.count == 0) {
      printf("AVG result=nan items=0\n");
    } else {
      /* micro-units rounded half away from zero: (2*s*10^6 +- n) / (2n) */
      __int128 s = (int64_t)t.sum;
      __int128 twice = 2 * s * 1000000 + (s < 0 ? -t.count : t.count);
      __int128 micro = twice / (2 * (__int128)t.count);
      __int128 magnitude = micro < 0 ? -micro : micro;
      printf("AVG result=%s%lld.%06lld items=%lld\n", micro < 0 ? "-" : "",
             (long long)(magnitude / 1000000), (long long)(magnitude % 1000000), t.count);
    }
  } else if (strcmp(argv[1], "dscal") == 0 && argc == 5) {
    t.scalar = atoll(argv[3]);
    t.out = fopen(argv[4], "wb");
    if (t.out == NULL) {
      perror(argv[4]);
      return 1;
    }
    for_each_item(data, size, scale_item, &t);
    fclose(t.out);
    printf("DSCAL result=%lld checksum=%016" PRIx64 "\n", t.count, t.digest);
  } else if (strcmp(argv[1], "grep") == 0) {
    char pattern[512] = "314159265\n358979323\n846264338\n";
    if (argc > 3) {
      size_t n = 0;
      for (const char *p = argv[3]; *p && n < sizeof pattern - 1; p++)
        pattern[n++] = (*p == '\\' && p[1] == 'n') ? (p++, '\n') : *p;
      pattern[n] = '\0';
    }
    size_t length = strlen(pattern);
    long long matches = 0;
    for (size_t i = 0; i + length <= size; i++)
      matches += memcmp(data + i, pattern, length) == 0;
    printf("GREP result=%lld\n", matches);
  } else {
    fprintf(stderr, "reference: unknown mode %s\n", argv[1]);
    return 2;
  }
  free(data);
  return 0;
}
