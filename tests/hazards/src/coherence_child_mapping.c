/* A child process is a writer the runtime does not see: while one may run, and when it
 * is reaped, everything cached is dropped at each synchronization. A forked child changes a file through a MAP_SHARED mapping; the parent reads the file
 * after the child told it so (a pipe) or after it reaped the child (waitpid).
 * The child's first stores fault (the file's mtime/ctime move); its second stores hit
 * pages already dirty and writable: no fault, no timestamp change.
 * argv[1]: file prefix; argv[2]: "pipe" or "wait". Correct and deterministic. */
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

static void child(const char *path, int in, int out, int by_wait) {
  char c;
  int fd = open(path, O_RDWR);
  char *m = (char *)mmap(NULL, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd < 0 || m == MAP_FAILED) _exit(3);
  memset(m, 'B', kSize);            /* faults: timestamps move */
  if (write(out, "1", 1) != 1) _exit(4);
  if (read(in, &c, 1) != 1) _exit(5);
  memset(m, 'C', kSize);            /* no faults */
  if (!by_wait) {
    if (write(out, "2", 1) != 1) _exit(4);
    if (read(in, &c, 1) != 1) _exit(5);
  }
  _exit(0);
}

static pid_t start_child(const char *path, int *to_child, int *from_child, int by_wait) {
  int c2p[2], p2c[2];
  pid_t pid;
  if (pipe(c2p) != 0 || pipe(p2c) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  pid = fork();
  if (pid == 0) {
    close(c2p[0]);
    close(p2c[1]);
    child(path, p2c[0], c2p[1], by_wait);
  }
  close(c2p[1]);
  close(p2c[0]);
  *to_child = p2c[1];
  *from_child = c2p[0];
  return pid;
}

int main(int argc, char **argv) {
  int rank, fd, rfd, to_child, from_child, by_wait, status, errs = 0;
  char path[256], line[256], c;
  static char buf[kSize];
  pid_t pid;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  by_wait = strcmp(argv[2], "wait") == 0;
  snprintf(path, sizeof path, "%s.%d", argv[1], rank);
  memset(buf, 'A', sizeof buf);
  fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) MPI_Abort(MPI_COMM_WORLD, 1);
  close(fd);
  pid = start_child(path, &to_child, &from_child, by_wait);
  errs += read(from_child, &c, 1) != 1;
  rfd = open(path, O_RDONLY | O_CREAT, 0644); /* exists: O_CREAT changes nothing */
  errs += pread(rfd, buf, kSize / 2, 0) != kSize / 2;
  snprintf(line, sizeof line, "rank %d first read: %c%c %016llx\n", rank, buf[0], buf[kSize - 1],
           (unsigned long long)hz_sum(0, buf, kSize));
  usleep(300000);
  if (write(to_child, "g", 1) != 1) MPI_Abort(MPI_COMM_WORLD, 8);
  if (by_wait) {
    waitpid(pid, &status, 0);
  } else {
    errs += read(from_child, &c, 1) != 1;
  }
  errs += pread(rfd, buf + kSize / 2, kSize / 2, kSize / 2) != kSize / 2;
  snprintf(line + strlen(line), sizeof line - strlen(line), "rank %d second read: %c%c %016llx\n", rank,
           buf[0], buf[kSize - 1], (unsigned long long)hz_sum(0, buf, kSize));
  if (!by_wait) {
    if (write(to_child, "e", 1) != 1) MPI_Abort(MPI_COMM_WORLD, 8);
    waitpid(pid, &status, 0);
  }
  close(rfd);
  if (errs) MPI_Abort(MPI_COMM_WORLD, 6);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
