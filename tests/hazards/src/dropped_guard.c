/* Case 2: a guard the program relies on. Each rank reads its own file: a header with the
 * length of a permutation table, the table (at most 64 bytes: a larger one is rejected
 * with exit code 3), then fixed-size records read in the order the table gives.
 * usage: dropped_guard <prefix>   (reads <prefix>.<rank>) */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define RECSZ 64

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  char path[256];
  snprintf(path, sizeof path, "%s.%d", argc > 1 ? argv[1] : "in", rank);
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int32_t size;
  if (read(fd, &size, sizeof size) != (ssize_t)sizeof size || size <= 0) {
    fprintf(stderr, "%s: bad header\n", path);
    exit(4);
  }
  unsigned char table[64];
  if (size > (int32_t)sizeof table) exit(3);
  if (read(fd, table, (size_t)size) != size) {
    fprintf(stderr, "%s: short table\n", path);
    exit(4);
  }
  unsigned char rec[RECSZ];
  uint64_t h = 0;
  long bytes = 0;
  for (long i = 0; i < 4 * size; i++) {
    off_t off = (off_t)sizeof size + size + (off_t)(table[i % size] % 32) * RECSZ;
    ssize_t n = pread(fd, rec, RECSZ, off);
    if (n <= 0) break;
    h = hz_sum(h, rec, (size_t)n);
    bytes += n;
  }
  close(fd);
  char line[128];
  snprintf(line, sizeof line, "rank %d: table %d bytes %ld sum %016llx\n", rank, (int)size,
           bytes, (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
