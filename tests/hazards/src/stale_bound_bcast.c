/* Case 11a (variant): the loop bound is broadcast. Rank 0 reads the record count from the
 * table's header and broadcasts it; the count on disk is stale (huge) until rank 1
 * rewrites the header after a barrier; rank 0 reads and broadcasts it again, and every
 * rank then reads its share of that many records.
 * usage: stale_bound_bcast <table.bin> */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define REC 64

static int32_t read_count(const char *path) {
  int32_t count = -1;
  int fd = open(path, O_RDONLY);
  if (fd < 0 || read(fd, &count, sizeof count) != (ssize_t)sizeof count) count = -1;
  if (fd >= 0) close(fd);
  return count;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int32_t count = 0;
  if (rank == 0) count = read_count(argv[1]);
  MPI_Bcast(&count, 1, MPI_INT32_T, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("header before the rebuild: %s\n", count > 1000 ? "too large" : "usable");
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
  if (rank == 0) count = read_count(argv[1]);
  MPI_Bcast(&count, 1, MPI_INT32_T, 0, MPI_COMM_WORLD);

  int fd = open(argv[1], O_RDONLY);
  char rec[REC];
  uint64_t h = 0;
  long bytes = 0;
  for (int32_t i = rank; i < count; i += nprocs) {
    ssize_t n = pread(fd, rec, REC, (off_t)sizeof count + (off_t)i * REC);
    if (n <= 0) break;
    h = hz_sum(h, rec, (size_t)n);
    bytes += n;
  }
  close(fd);
  char line[128];
  snprintf(line, sizeof line, "rank %d: count %d bytes %ld sum %016llx\n", rank, (int)count, bytes,
           (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
