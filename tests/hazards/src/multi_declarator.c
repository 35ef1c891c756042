/* Case 13 (variant): one declaration declares the rank and opens the file. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, fd = open(argv[1], O_RDONLY), i;
  char buf[128];
  long sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (i = 0; i < 32; i++) if (pread(fd, buf, 128, (off_t)(i * 2 + rank) * 128) == 128) sum += buf[i];
  MPI_Reduce(rank ? &sum : MPI_IN_PLACE, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("sum %ld\n", sum);
  MPI_Finalize();
  return 0;
}
