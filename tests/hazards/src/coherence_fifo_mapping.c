/* A FIFO is a synchronization: a write to it a release point (which tells the other
 * processes that files held through a shared writable mapping may have changed), a read
 * from it an acquire point. Rank 1 changes a file through a MAP_SHARED mapping; rank 0 reads it after rank 1 told
 * it so through a FIFO (no MPI call between the stores and the read).
 * argv[1]: data file name. Run with 2 ranks. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "hz.h"

enum { kSize = 16384 };

static void fifo_put(const char *name) {
  int f = open(name, O_WRONLY);
  if (f < 0 || write(f, "x", 1) != 1 || close(f) != 0) MPI_Abort(MPI_COMM_WORLD, 4);
}

static int fifo_get(const char *name) {
  char c;
  int f = open(name, O_RDONLY);
  int n = (int)read(f, &c, 1);
  close(f);
  return n;
}

int main(int argc, char **argv) {
  int rank, fd, errs = 0;
  char line[256];
  static char buf[kSize];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    memset(buf, 'A', sizeof buf);
    fd = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) MPI_Abort(MPI_COMM_WORLD, 1);
    close(fd);
    if (mkfifo("go.fifo", 0600) != 0 || mkfifo("done.fifo", 0600) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  line[0] = 0;
  if (rank == 1) {
    char *m;
    fd = open(argv[1], O_RDWR);
    m = (char *)mmap(NULL, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd < 0 || m == MAP_FAILED) MPI_Abort(MPI_COMM_WORLD, 3);
    memset(m, 'B', kSize);
    MPI_Barrier(MPI_COMM_WORLD);
    errs += fifo_get("go.fifo") != 1;
    memset(m, 'C', kSize);
    fifo_put("done.fifo");
    munmap(m, kSize);
    close(fd);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    fd = open(argv[1], O_RDONLY | O_CREAT, 0644); /* exists already */
    errs += pread(fd, buf, kSize / 2, 0) != kSize / 2;
    snprintf(line, sizeof line, "first read: %c%c\n", buf[0], buf[kSize - 1]);
    usleep(300000);
    fifo_put("go.fifo");
    errs += fifo_get("done.fifo") != 1;
    errs += pread(fd, buf + kSize / 2, kSize / 2, kSize / 2) != kSize / 2;
    snprintf(line + strlen(line), sizeof line - strlen(line), "second read: %c%c %016llx\n", buf[0],
             buf[kSize - 1], (unsigned long long)hz_sum(0, buf, kSize));
    close(fd);
  }
  if (errs) MPI_Abort(MPI_COMM_WORLD, 5);
  hz_print_ranked(line);
  if (rank == 0) {
    unlink("go.fifo");
    unlink("done.fifo");
  }
  MPI_Finalize();
  return 0;
}
