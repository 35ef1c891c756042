/* A file held through a shared writable mapping is never served by any process of the
 * node while it is held (the node table's hold): whatever channel orders its stores
 * before another process's read, synchronization or not.
 * A grandchild (double fork: the child forks and exits at once) changes a file through a
 * MAP_SHARED mapping after the parent reaped the child and passed a release point that
 * found no child left. The grandchild orders its stores before the parent's read through
 * a pipe message. argv[1]: file prefix. Correct and deterministic. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hz.h"

enum { kSize = 16384 };

static void grandchild(const char *path, int in, int out) {
  char c;
  int fd = open(path, O_RDWR);
  char *m = (char *)mmap(NULL, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd < 0 || m == MAP_FAILED) _exit(3);
  memset(m, 'B', kSize);            /* faults: timestamps move */
  if (write(out, "1", 1) != 1) _exit(4);
  if (read(in, &c, 1) != 1) _exit(5);
  memset(m, 'C', kSize);            /* no faults */
  if (write(out, "2", 1) != 1) _exit(4);
  if (read(in, &c, 1) != 1) _exit(5);
  _exit(0);
}

int main(int argc, char **argv) {
  int rank, fd, rfd, errs = 0, status;
  int c2p[2], p2c[2];
  char path[256], line[256], c;
  static char buf[kSize];
  pid_t pid;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  snprintf(path, sizeof path, "%s.%d", argv[1], rank);
  memset(buf, 'A', sizeof buf);
  fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) MPI_Abort(MPI_COMM_WORLD, 1);
  close(fd);
  if (pipe(c2p) != 0 || pipe(p2c) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  pid = fork();
  if (pid == 0) {
    close(c2p[0]);
    close(p2c[1]);
    if (fork() == 0) grandchild(path, p2c[0], c2p[1]);
    _exit(0);
  }
  close(c2p[1]);
  close(p2c[0]);
  waitpid(pid, &status, 0);          /* the child is gone; the grandchild runs on */
  MPI_Barrier(MPI_COMM_WORLD);       /* a release point: no child left */
  errs += read(c2p[0], &c, 1) != 1;  /* the grandchild's first stores are done */
  rfd = open(path, O_RDONLY | O_CREAT, 0644);
  errs += pread(rfd, buf, kSize / 2, 0) != kSize / 2;
  snprintf(line, sizeof line, "rank %d first read: %c%c %016llx\n", rank, buf[0], buf[kSize / 2 - 1],
           (unsigned long long)hz_sum(0, buf, kSize / 2));
  usleep(300000);
  if (write(p2c[1], "g", 1) != 1) MPI_Abort(MPI_COMM_WORLD, 8);
  errs += read(c2p[0], &c, 1) != 1;  /* the grandchild's second stores are done */
  errs += pread(rfd, buf + kSize / 2, kSize / 2, kSize / 2) != kSize / 2;
  snprintf(line + strlen(line), sizeof line - strlen(line), "rank %d second read: %c%c %016llx\n", rank,
           buf[kSize / 2], buf[kSize - 1], (unsigned long long)hz_sum(0, buf + kSize / 2, kSize / 2));
  if (write(p2c[1], "e", 1) != 1) MPI_Abort(MPI_COMM_WORLD, 8);
  close(rfd);
  if (errs) MPI_Abort(MPI_COMM_WORLD, 6);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
