/* Case 14: statements on the line of main's opening brace, several statements per line
 * and one-line loops. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <mpi.h>

int main(int argc, char **argv) { MPI_Init(&argc, &argv); int fd = open(argv[1], O_RDONLY); int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank); int i, n = 64; long sum = 0; char buf[512];
  for (i=0;i<n;i++) { if (pread(fd, buf, sizeof buf, (off_t)(i * 2 + rank) * 512) <= 0) break; sum += buf[i % 512]; }
  lseek(fd, 0, SEEK_SET); long sum2 = 0; ssize_t got; while ((got = read(fd, buf, 100)) > 0) sum2 += buf[got - 1];
  close(fd); if (rank == 0) printf("rank %d: %ld %ld\n", rank, sum, sum2); MPI_Finalize(); return 0; }
