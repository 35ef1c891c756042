/* Case 4: a 64 MiB table in memory. The program computes a table of 8 Mi offsets (a
 * pseudo-random walk), then each rank reads the blocks the table names. Run under an
 * address-space limit (ulimit -v) that the mpicc build fits in.
 * usage: big_table <data.bin> <reads> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hz.h"

#define BS 256
#define NTAB (8L << 20) /* 8 Mi int64 = 64 MiB */

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  long reads = atol(argv[2]);
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct stat st;
  fstat(fd, &st);
  long nblocks = (long)(st.st_size / BS);
  int64_t *table = malloc(NTAB * sizeof *table);
  if (!table) {
    fprintf(stderr, "out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  uint64_t x = 88172645463325252ULL;
  for (long i = 0; i < NTAB; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    table[i] = (int64_t)(x % (uint64_t)nblocks);
  }
  unsigned char buf[BS];
  uint64_t h = 0;
  long bytes = 0;
  for (long i = 0; i < reads; i++) {
    long k = (i * 7919L + rank * 104729L) % NTAB;
    ssize_t n = pread(fd, buf, BS, (off_t)table[k] * BS);
    if (n <= 0) break;
    h = hz_sum(h, buf, (size_t)n);
    bytes += n;
  }
  close(fd);
  free(table);
  char line[128];
  snprintf(line, sizeof line, "rank %d: bytes %ld sum %016llx\n", rank, bytes,
           (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
