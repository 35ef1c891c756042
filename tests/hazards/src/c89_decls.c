/* Case 13: C89 declarations at the top of main, used after MPI_Init. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <mpi.h>

int main(int argc, char **argv) {
  int i, n, rank;
  int fd;
  FILE *f;
  MPI_File fh;
  MPI_Status st;
  char buf[256];
  long sums[3] = {0, 0, 0}, all[3];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  n = 40;
  fd = open(argv[1], O_RDONLY);
  for (i = 0; i < n; i++) {
    if (pread(fd, buf, sizeof buf, (off_t)(i * 2 + rank) * 256) > 0) sums[0] += buf[i % 256];
  }
  close(fd);
  f = fopen(argv[1], "rb");
  for (i = 0; i < n; i++) {
    if (fread(buf, 1, 100, f) == 100) sums[1] += buf[7];
  }
  fclose(f);
  MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  for (i = 0; i < n; i++) {
    MPI_File_read_at(fh, (MPI_Offset)i * 300, buf, 64, MPI_BYTE, &st);
    sums[2] += buf[(i * 3) % 64];
  }
  MPI_File_close(&fh);
  MPI_Reduce(sums, all, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("sums %ld %ld %ld\n", all[0], all[1], all[2]);
  MPI_Finalize();
  return 0;
}
