/* Case 12: MPI calls inside the offset helper. A program initialized with plain MPI_Init
 * (MPI_THREAD_SINGLE) whose offset helper asks MPI_Comm_rank/MPI_Comm_size each time,
 * on MPI_COMM_WORLD and on a row communicator from MPI_Comm_split.
 * usage: mpi_in_helper <data.bin> <blocks> */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define BS 2048

static MPI_Comm g_row;

static off_t offset_of(long i) {
  int rank, size, row_rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(g_row, &row_rank);
  return (off_t)((i * size + rank) * 2 + row_rank % 2) * BS;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_Comm_split(MPI_COMM_WORLD, rank / 2, -rank, &g_row);
  long blocks = atol(argv[2]);
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  char buf[BS];
  uint64_t h = 0;
  long bytes = 0;
  for (long i = 0; i < blocks; i++) {
    off_t off = offset_of(i);
    ssize_t n = pread(fd, buf, BS, off);
    if (n <= 0) break;
    h = hz_sum(h, buf, (size_t)n);
    bytes += n;
  }
  close(fd);
  MPI_Comm_free(&g_row);
  char line[128];
  snprintf(line, sizeof line, "rank %d: bytes %ld sum %016llx\n", rank, bytes,
           (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
