/* Reads each rank's part of a file chunk by chunk with pread and prints a checksum per
 * rank. Its prefetching build (late_ppios.c) has a PT that is always late.
 * usage: late <input> <chunk-bytes> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: late <input> <chunk-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t chunk = (size_t)atol(argv[2]);
  struct stat st;
  stat(argv[1], &st);
  size_t size = (size_t)st.st_size;
  size_t part = (size + nprocs - 1) / nprocs;
  size_t begin = min_size(size, part * rank), end = min_size(size, begin + part);
  char *buf = malloc(chunk);
  uint64_t sum = FNV_START;
  int fd = open(argv[1], O_RDONLY);
  for (size_t off = begin; off < end; off += chunk) {
    ssize_t n = pread(fd, buf, min_size(chunk, end - off), (off_t)off);
    sum = fnv1a(sum, buf, (size_t)n);
  }
  close(fd);
  char line[128];
  snprintf(line, sizeof line, "rank %d sum %016llx\n", rank, (unsigned long long)sum);
  print_in_rank_order(line);
  free(buf);
  MPI_Finalize();
  return 0;
}
