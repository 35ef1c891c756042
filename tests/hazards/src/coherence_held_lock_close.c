/* A file held through a shared writable mapping is never served by any process of the
 * node while it is held (the node table's hold): whatever channel orders its stores
 * before another process's read, synchronization or not.
 * Rank 1 holds a lock on a lock file (flock, or an OFD record lock), changes a data file
 * through a MAP_SHARED mapping (the file is held), and gives the lock back by closing its
 * descriptor. Rank 0 waits for the lock, then reads the data. 2 ranks.
 * argv[1]: prefix; argv[2]: "flock" or "ofd", or "dup2" / "close_range": a POSIX record
 * lock (F_SETLKW), given back by dup2() over its descriptor or by close_range().
 * Correct and deterministic. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hz.h"
#include "hz_files.h"

enum { kSize = 16384 };

static int take_lock(int fd, int ofd) {
  struct flock l;
  if (ofd == 0) return flock(fd, LOCK_EX);
  memset(&l, 0, sizeof l);
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  return fcntl(fd, ofd == 1 ? F_OFD_SETLKW : F_SETLKW, &l);
}

int main(int argc, char **argv) {
  int rank, fd, rfd, lfd, errs = 0, i, ofd;
  char path[256], lock[256], line[256];
  static char buf[kSize];
  char *m;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ofd = strcmp(argv[2], "ofd") == 0 ? 1 : strcmp(argv[2], "dup2") == 0 ? 2
        : strcmp(argv[2], "close_range") == 0 ? 3 : 0;
  snprintf(path, sizeof path, "%s.dat", argv[1]);
  snprintf(lock, sizeof lock, "%s.lock", argv[1]);
  if (rank == 0) {
    hz_fill(path, 'A', kSize);
    fd = open(lock, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  line[0] = 0;
  if (rank == 1) {
    lfd = open(lock, O_RDWR);
    if (lfd < 0 || take_lock(lfd, ofd) != 0) MPI_Abort(MPI_COMM_WORLD, 4);
    m = hz_map_shared(path, kSize, &fd);
    memset(m, 'B', kSize);                  /* faults: timestamps move */
    MPI_Barrier(MPI_COMM_WORLD);            /* release point: rank 0 may read B */
    usleep(500000);
    memset(m, 'C', kSize);                  /* no faults */
    if (ofd == 3) {
      close_range((unsigned)lfd, (unsigned)lfd, 0);  /* gives the lock back */
    } else if (ofd == 2) {
      int nfd = open("/dev/null", O_RDONLY);
      dup2(nfd, lfd);                       /* closes lfd: gives the lock back */
      close(nfd);
    } else {
      close(lfd);                           /* gives the lock back */
    }
    usleep(300000);                         /* no release point meanwhile */
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    lfd = open(lock, O_RDWR);
    rfd = open(path, O_RDONLY | O_CREAT, 0644);
    for (i = 0; i < 2; ++i) {
      errs += pread(rfd, buf + i * (kSize / 2), kSize / 2, (off_t)i * (kSize / 2)) != kSize / 2;
      if (i == 0) errs += take_lock(lfd, ofd) != 0;  /* after rank 1's close */
    }
    close(lfd);
    hz_describe_halves(line, sizeof line, buf, kSize);
    close(rfd);
  }
  if (errs) MPI_Abort(MPI_COMM_WORLD, 6);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
