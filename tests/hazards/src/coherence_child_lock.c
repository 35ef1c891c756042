/* A child process is a writer the runtime does not see: taking a lock while one may run
 * drops everything cached. A counter file incremented N times by the parent (pread +
 * pwrite) and N times by a forked child (through a MAP_SHARED mapping), each increment
 * under an fcntl F_SETLKW write lock. The final value is 2N whatever the interleaving.
 * argv[1]: file prefix, argv[2]: N. */
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

static void lock_file(int fd, short type) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  if (fcntl(fd, F_SETLKW, &fl) != 0) _exit(11);
}

static void child(const char *path, int n) {
  int fd = open(path, O_RDWR), i;
  volatile long *m = (volatile long *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd < 0 || (void *)m == MAP_FAILED) _exit(3);
  for (i = 0; i < n; i++) {
    lock_file(fd, F_WRLCK);
#ifdef CHILD_PWRITE
    {
      long v;
      if (pread(fd, &v, sizeof v, 0) != (ssize_t)sizeof v) _exit(12);
      v++;
      if (pwrite(fd, &v, sizeof v, 0) != (ssize_t)sizeof v) _exit(13);
    }
#else
    m[0] = m[0] + 1;
#endif
    lock_file(fd, F_UNLCK);
    if (i % 8 == 0) usleep(200);
  }
  _exit(0);
}

static pid_t start_child(const char *path, int n) {
  pid_t pid = fork();
  if (pid == 0) child(path, n);
  return pid;
}

int main(int argc, char **argv) {
  int rank, fd, n, i, status;
  long v, last = -1, backwards = 0;
  char path[256], line[256];
  static char page[4096];
  pid_t pid;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  n = atoi(argv[2]);
  snprintf(path, sizeof path, "%s.%d", argv[1], rank);
  fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
  memset(page, 0, sizeof page);
  if (fd < 0 || pwrite(fd, page, sizeof page, 0) != (ssize_t)sizeof page) MPI_Abort(MPI_COMM_WORLD, 1);
  pid = start_child(path, n);
  for (i = 0; i < n; i++) {
    lock_file(fd, F_WRLCK);
    if (pread(fd, &v, sizeof v, 0) != (ssize_t)sizeof v) MPI_Abort(MPI_COMM_WORLD, 2);
    if (v < last) backwards++;
    last = v + 1;
    v++;
    if (pwrite(fd, &v, sizeof v, 0) != (ssize_t)sizeof v) MPI_Abort(MPI_COMM_WORLD, 3);
    lock_file(fd, F_UNLCK);
    if (i % 8 == 4) usleep(200);
  }
  waitpid(pid, &status, 0);
  if (pread(fd, &v, sizeof v, 0) != (ssize_t)sizeof v) MPI_Abort(MPI_COMM_WORLD, 2);
  close(fd);
  snprintf(line, sizeof line, "rank %d final %ld (expected %d) went backwards %s\n", rank, v, 2 * n,
           backwards ? "yes" : "no");
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
