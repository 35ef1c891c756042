/* Each rank reads its input in 1 MiB chunks; after the third, it makes a child with
 * _Fork() (glibc's fork without the atfork handlers; clone() when argv[2] is "clone").
 * Parent and child both read the rest through the same descriptor (pread) and report its
 * checksum. argv[3]: microseconds to sleep before the fork. Correct and deterministic. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hz.h"

enum { kChunk = 1 << 20 };
static char buf[kChunk];
static int use_clone;
static int child_fn(void *arg) { (void)arg; return 0; }

int main(int argc, char **argv) {
  int rank, fd, status, p[2];
  char line[512], cl[256];
  pid_t pid = -1;
  int is_child = 0, sleep_us = argc > 3 ? atoi(argv[3]) : 0;
  unsigned long long sum = 0;
  long long total = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  use_clone = argc > 2 && strcmp(argv[2], "clone") == 0;
  if (pipe(p) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  fd = open(argv[1], O_RDONLY | O_CREAT, 0644);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int i = 0;; i++) {
    ssize_t n = pread(fd, buf, kChunk, (off_t)i * kChunk);
    if (n < 0) _exit(4);
    if (n == 0) break;
    sum = hz_sum(sum, buf, (size_t)n);
    total += n;
    if (i == 2) {
      if (sleep_us) usleep(sleep_us);
      pid = _Fork();
      if (pid < 0) MPI_Abort(MPI_COMM_WORLD, 3);
      is_child = pid == 0;
    }
  }
  if (is_child) {
    int len = snprintf(line, sizeof line, "child: %lld bytes %016llx\n", total, sum);
    if (write(p[1], line, (size_t)len) != len) _exit(5);
    _exit(0);
  }
  close(p[1]);
  memset(cl, 0, sizeof cl);
  ssize_t got = 0, r;
  while ((r = read(p[0], cl + got, sizeof cl - 1 - (size_t)got)) > 0) got += r;
  waitpid(pid, &status, 0);
  snprintf(line, sizeof line, "parent: %lld bytes %016llx\n%sstatus %d\n", total, sum, cl, status);
  close(fd);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
