/* A file held through a shared writable mapping is never served by any process of the
 * node while it is held (the node table's hold): whatever channel orders its stores
 * before another process's read, synchronization or not.
 * Rank 1 changes a file through a MAP_SHARED mapping (the file is held), then tells
 * rank 0 with a nonblocking send (MPI_Isend, or MPI_Ibarrier with "ibarrier", or a
 * persistent send with "start") that it completes only later. Rank 0 receives (MPI_Recv,
 * or waits for the Ibarrier) and reads the data. 2 ranks.
 * argv[1]: prefix; argv[2]: isend|ibarrier|start, or "send" (the control: a blocking
 * MPI_Send, a release point). Correct and deterministic. */
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
  int rank, fd, rfd, errs = 0, i, msg = 7, kind;
  char path[256], line[256];
  static char buf[kSize];
  char *m;
  MPI_Request rq;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  kind = strcmp(argv[2], "isend") == 0 ? 0 : strcmp(argv[2], "ibarrier") == 0 ? 1
         : strcmp(argv[2], "start") == 0 ? 2 : 3;
  snprintf(path, sizeof path, "%s.dat", argv[1]);
  if (rank == 0) {
    hz_fill(path, 'A', kSize);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  line[0] = 0;
  if (rank == 1) {
    if (kind == 2) MPI_Send_init(&msg, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &rq);
    m = hz_map_shared(path, kSize, &fd);
    memset(m, 'B', kSize);                  /* faults: timestamps move */
    MPI_Barrier(MPI_COMM_WORLD);            /* release point: rank 0 may read B */
    usleep(500000);
    memset(m, 'C', kSize);                  /* no faults */
    if (kind == 0) MPI_Isend(&msg, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &rq);
    else if (kind == 1) MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    else if (kind == 2) MPI_Start(&rq);
    else MPI_Send(&msg, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);
    usleep(300000);                         /* no release point meanwhile */
    if (kind != 3) MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (kind == 2) MPI_Request_free(&rq);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    rfd = open(path, O_RDONLY | O_CREAT, 0644);
    for (i = 0; i < 2; ++i) {
      errs += pread(rfd, buf + i * (kSize / 2), kSize / 2, (off_t)i * (kSize / 2)) != kSize / 2;
      if (i == 0) {
        if (kind == 1) {                              /* matches rank 1's Ibarrier */
          MPI_Ibarrier(MPI_COMM_WORLD, &rq);
          MPI_Wait(&rq, MPI_STATUS_IGNORE);
        }
        else MPI_Recv(&msg, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    }
    hz_describe_halves(line, sizeof line, buf, kSize);
    close(rfd);
  }
  if (errs) MPI_Abort(MPI_COMM_WORLD, 6);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
