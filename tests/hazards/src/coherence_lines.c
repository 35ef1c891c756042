/* Cache coherence 4: line and formatted reads of a text file that changes a few KiB
 * ahead of the stream. Rank 0 reads the first 20 lines of a CSV file (fgets, or fscanf
 * "%d,%15[^,],%d,%lf"), which leaves the stream in its first 4 KiB block; then the
 * bytes of the file's third 4 KiB block [8192, 12288) are rewritten (every digit becomes
 * '7': the lines stay well formed), by <who>:
 *   self   rank 0 itself, pwrite through a descriptor of its own (np 1)
 *   rank   rank 1, between two barriers (np 2)
 * and rank 0 reads the rest of the file. Without ppios, glibc's stream holds one 4 KiB
 * block (st_blksize) and reads the third block from the file after the rewrite: the new
 * digits. A stream buffer that holds more of the file than glibc's would (ppios' 64 KiB
 * line buffer) must not serve the old ones.
 * Deterministic under mpicc: the rewrite is ordered before the rest of the reads (program
 * order, or the barriers) and comes a whole block after the stream's buffer; rank 0
 * prints the lines (records) it read and a checksum of their text (values).
 * usage: coherence_lines <text.csv> <fgets|fscanf> <self|rank> */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

enum { kAt = 8192, kLen = 4096, kFirst = 20 };

static void rewrite(const char *path) {
  static char block[kLen];
  int fd = open(path, O_RDWR);
  if (fd < 0 || pread(fd, block, kLen, kAt) != kLen) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int i = 0; i < kLen; i++)
    if (block[i] >= '0' && block[i] <= '9') block[i] = '7';
  if (pwrite(fd, block, kLen, kAt) != kLen || close(fd) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Reads up to `max` lines or records of `f`; returns how many, adds them to *h. */
static long read_some(FILE *f, int scan, long max, uint64_t *h) {
  long n = 0;
  char line[256], word[16];
  int id, value;
  double x;
  while (n < max) {
    if (scan) {
      if (fscanf(f, "%d,%15[^,],%d,%lf", &id, word, &value, &x) != 4) break;
      long long v[3] = {id, value, (long long)(x * 1e6 + 0.5)};
      *h = hz_sum(*h, v, sizeof v);
      *h = hz_sum(*h, word, strlen(word));
    } else {
      if (fgets(line, sizeof line, f) == NULL) break;
      *h = hz_sum(*h, line, strlen(line));
    }
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 4) MPI_Abort(MPI_COMM_WORLD, 2);
  const int scan = strcmp(argv[2], "fscanf") == 0;
  const int self = strcmp(argv[3], "self") == 0;
  if (nprocs != (self ? 1 : 2)) MPI_Abort(MPI_COMM_WORLD, 2);
  uint64_t h = 0;
  long first = 0, rest = 0;
  FILE *f = NULL;
  if (rank == 0) {
    f = fopen(argv[1], "r");
    if (f == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    first = read_some(f, scan, kFirst, &h);
    if (self) rewrite(argv[1]);
  }
  if (!self) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) rewrite(argv[1]);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (rank == 0) {
    rest = read_some(f, scan, 1L << 30, &h);
    fclose(f);
    printf("%s, rewritten by %s: %ld + %ld %s, sum %016llx\n", argv[2], argv[3], first, rest,
           scan ? "records" : "lines", (unsigned long long)h);
  }
  MPI_Finalize();
  return 0;
}
