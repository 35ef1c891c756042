/* Case 11a: a loop bound from a header another rank rewrites. Rank 0 reads the header
 * (a record count) of a table that is being rebuilt: the count on disk is stale and huge.
 * After a barrier, rank 1 writes the real count; after a second barrier rank 0 reads the
 * header again and reads that many records.
 * usage: stale_bound <table.bin> */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define REC 64

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int32_t count = 0;
  if (rank == 0) {
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || read(fd, &count, sizeof count) != (ssize_t)sizeof count) {
      perror(argv[1]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    close(fd);
    printf("header before the rebuild: %s\n", count > 1000 ? "too large, waiting" : "usable");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    int32_t real = 300;
    int fd = open(argv[1], O_WRONLY);
    if (fd < 0 || pwrite(fd, &real, sizeof real, 0) != (ssize_t)sizeof real) {
      perror(argv[1]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    int fd = open(argv[1], O_RDONLY);
    if (read(fd, &count, sizeof count) != (ssize_t)sizeof count) MPI_Abort(MPI_COMM_WORLD, 1);
    char rec[REC];
    uint64_t h = 0;
    long bytes = 0;
    for (int32_t i = 0; i < count; i++) {
      ssize_t n = pread(fd, rec, REC, (off_t)sizeof count + (off_t)i * REC);
      if (n <= 0) break;
      h = hz_sum(h, rec, (size_t)n);
      bytes += n;
    }
    close(fd);
    printf("records %d bytes %ld sum %016llx\n", (int)count, bytes, (unsigned long long)h);
  }
  MPI_Finalize();
  return 0;
}
