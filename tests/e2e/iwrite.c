/* A file written through a nonblocking MPI-IO write is not cached by any process of the
 * node until the writer closes its handle (docs/guarantees.md): the runtime does not see
 * when such a write completes, so it holds the file from the MPI_File_iwrite_at on.
 * Rank 1 overwrites the file with MPI_File_iwrite_at, completes the write (MPI_Wait) and
 * tells rank 0, keeping its handle open; rank 0 reads the file (held). Then rank 1
 * closes its handle, and rank 0 reads the file again (no longer held).
 * iwrite_ppios.c adds a PT that prefetches each of rank 0's reads just before it: the
 * first must not be served from the cache, the second must be.
 * usage: iwrite <file> <bytes>; 2 ranks. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"

/* The prefetching build's hooks (iwrite_ppios.c): start the PT; have it prefetch read
 * number r and wait until it did. */
#ifndef START_PT
#define START_PT(path, bytes)
#define PREFETCH(r)
#endif

static void report(char *line, size_t size, const char *when, const char *buf, ssize_t n) {
  size_t written = 0;
  for (ssize_t i = 0; i < n; ++i) written += buf[i] == 'B';
  snprintf(line + strlen(line), size - strlen(line), "rank 0 read %s: %zd bytes, %zu of rank 1's\n", when,
           n, written);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs, token = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3 || nprocs != 2) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 iwrite <file> <bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *path = argv[1];
  size_t bytes = (size_t)atol(argv[2]);
  char *buf = malloc(bytes), line[512] = "";
  if (rank == 0) {
    memset(buf, 'A', bytes);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, bytes) != (ssize_t)bytes || close(fd) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    MPI_File fh;
    MPI_Request rq;
    if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
      MPI_Abort(MPI_COMM_WORLD, 4);
    memset(buf, 'B', bytes);
    MPI_File_iwrite_at(fh, 0, buf, (int)bytes, MPI_BYTE, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Send(&token, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);  /* written, the handle open */
    MPI_Recv(&token, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_Send(&token, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);  /* closed */
    snprintf(line, sizeof line, "rank 1 wrote %zu bytes\n", bytes);
  } else {
    int fd = open(path, O_RDONLY);
    if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 5);
    START_PT(path, bytes);
    MPI_Recv(&token, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    PREFETCH(1);
    report(line, sizeof line, "while rank 1's handle is open", buf, pread(fd, buf, bytes, 0));
    MPI_Send(&token, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    PREFETCH(2);
    report(line, sizeof line, "after rank 1 closed it", buf, pread(fd, buf, bytes, 0));
    close(fd);
  }
  print_in_rank_order(line);
  free(buf);
  MPI_Finalize();
  return 0;
}
