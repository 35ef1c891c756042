/* A file held through a shared writable mapping is never served by any process of the
 * node while it is held (the node table's hold): whatever channel orders its stores
 * before another process's read, synchronization or not.
 * Rank 1 changes a file through a MAP_SHARED mapping (the file is held), then announces
 * the change by writing a flag into a second file; rank 0 polls the flag file with
 * pread and reads the data once the flag is there ("a file the other process wrote and
 * this one read", coherence.md). 2 ranks. argv[1]: prefix. Correct and deterministic. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hz.h"
#include "hz_files.h"

enum { kSize = 16384 };

int main(int argc, char **argv) {
  int rank, fd, rfd, ffd, errs = 0, i;
  char path[256], flag[256], line[256], c = 0;
  static char buf[kSize];
  char *m;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  snprintf(path, sizeof path, "%s.dat", argv[1]);
  snprintf(flag, sizeof flag, "%s.flag", argv[1]);
  if (rank == 0) {
    hz_fill(path, 'A', kSize);
    fd = open(flag, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0 || write(fd, "0", 1) != 1) MPI_Abort(MPI_COMM_WORLD, 1);
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  line[0] = 0;
  if (rank == 1) {
    m = hz_map_shared(path, kSize, &fd);
    memset(m, 'B', kSize);                  /* faults: timestamps move */
    MPI_Barrier(MPI_COMM_WORLD);            /* release point: rank 0 may read B */
    usleep(500000);
    memset(m, 'C', kSize);                  /* no faults */
    ffd = open(flag, O_WRONLY);
    errs += pwrite(ffd, "1", 1, 0) != 1;    /* the flag, after the stores */
    close(ffd);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    rfd = open(path, O_RDONLY | O_CREAT, 0644);
    ffd = open(flag, O_RDONLY);
    for (i = 0; i < 2; ++i) {
      errs += pread(rfd, buf + i * (kSize / 2), kSize / 2, (off_t)i * (kSize / 2)) != kSize / 2;
      if (i == 0) {
        while (pread(ffd, &c, 1, 0) != 1 || c != '1') usleep(10000);
      }
    }
    close(ffd);
    hz_describe_halves(line, sizeof line, buf, kSize);
    close(rfd);
  }
  if (errs) MPI_Abort(MPI_COMM_WORLD, 6);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
