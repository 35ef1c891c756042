/* pclose() reaps a child, a writer the runtime does not see: everything cached is
 * dropped. popen() starts dd, which copies a 32 MiB pattern file over a data file in place with one
 * write; the program opens the data file meanwhile, waits for dd with pclose(), then
 * reads the data's last 256 KiB: every byte must be the pattern's.
 * argv[1]: prefix. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "hz.h"

enum { kRegion = 32 << 20, kTail = 256 << 10 };

static char block[kRegion];

static void make_file(const char *path, char c) {
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  memset(block, c, sizeof block);
  if (write(fd, block, sizeof block) != (ssize_t)sizeof block) MPI_Abort(MPI_COMM_WORLD, 1);
  close(fd);
}

static void spin_us(long us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

int main(int argc, char **argv) {
  int rank, fd, pfd, i, other = 0;
  char first;
  char data[256], pat[256], cmd[1024], line[256];
  static char buf[kTail];
  FILE *p;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  snprintf(data, sizeof data, "%s.data.%d", argv[1], rank);
  snprintf(pat, sizeof pat, "%s.x.%d", argv[1], rank);
  make_file(data, 'o');
  make_file(pat, 'x');
  pfd = open(pat, O_RDONLY);
  if (pread(pfd, &first, 1, 0) != 1) MPI_Abort(MPI_COMM_WORLD, 4);
  snprintf(cmd, sizeof cmd, "dd if=%s of=%s bs=%d count=1 iflag=fullblock conv=notrunc status=none", pat,
           data, kRegion);
  p = popen(cmd, "r");
  spin_us(1000L * (getpid() % 40));
  fd = open(data, O_RDONLY | O_CREAT, 0644); /* exists: O_CREAT changes nothing */
  if (pclose(p) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  if (pread(fd, buf, kTail, kRegion - kTail) != kTail) MPI_Abort(MPI_COMM_WORLD, 3);
  for (i = 0; i < kTail; i++) other += buf[i] != 'x';
  close(fd);
  close(pfd);
  unlink(pat);
  unlink(data);
  snprintf(line, sizeof line, "rank %d pattern %c, bytes not from dd: %d\n", rank, first, other);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
