/* Rank 0's rounds are unrolled: each has an open of its own that the PT is handed.
 * Rank 1 overwrites the second part of a file with aio_write (glibc's POSIX AIO: the
 * bytes are written by a glibc thread, through no call the runtime sees), waits for it
 * with aio_suspend, then tells rank 0 through a FIFO; rank 0 then reads that part.
 * Meanwhile rank 0 reads the first 4 KiB (disjoint from rank 1's write); after the FIFO
 * message it reads the last MiB of the second part. 2 ranks.
 * argv[1]: file prefix; argv[2]: MiB in the second part. Correct and deterministic. */
#define _GNU_SOURCE
#include <aio.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "hz.h"

enum { kHead = 4096, kRounds = 8, kTail = 1 << 20 };

struct job { const char *path; char *buf; size_t body; int ok; };

/* argv[4] "thread": the write is made by a thread of the program through a stdio stream. */
static void *thread_write(void *arg) {
  struct job *j = arg;
  FILE *f = fopen(j->path, "r+");
  j->ok = f != NULL && fseek(f, kHead, SEEK_SET) == 0 && fwrite(j->buf, 1, j->body, f) == j->body;
  if (f != NULL && fclose(f) != 0) j->ok = 0;
  return NULL;
}

static void report(char *line, size_t size, int r, const char *head, const char *buf, size_t body) {
  size_t bad = 0;
  for (size_t i = 0; i < body; i++) bad += buf[i] != 'C' + r;
  snprintf(line + strlen(line), size - strlen(line), "round %d: %c %c%c old %zu %016llx\n", r,
           head[0], buf[0], buf[body - 1], bad, (unsigned long long)hz_sum(0, buf, body));
}

int main(int argc, char **argv) {
  int rank, fd, errs = 0, in = -1, out = -1;
  char path[256], go[256], done[256], line[4096], c;
  size_t body = (size_t)(argc > 2 ? atoi(argv[2]) : 64) << 20;
  int use_thread = argc > 4 && strcmp(argv[4], "thread") == 0;
  int base = argc > 3 ? atoi(argv[3]) : 0; /* microseconds */
  char *buf = malloc(body), head[kHead];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  snprintf(path, sizeof path, "%s.dat", argv[1]);
  snprintf(go, sizeof go, "%s.go", argv[1]);
  snprintf(done, sizeof done, "%s.done", argv[1]);
  if (rank == 0) {
    memset(buf, 'A', body);
    fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0 || write(fd, buf, kHead) != kHead || write(fd, buf, body) != (ssize_t)body)
      MPI_Abort(MPI_COMM_WORLD, 1);
    close(fd);
    if (mkfifo(go, 0600) != 0 || mkfifo(done, 0600) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  line[0] = 0;
  if (rank == 1) {
    in = open(go, O_RDONLY);
    out = open(done, O_WRONLY);
    fd = open(path, O_WRONLY);
    for (int r = 0; r < kRounds; r++) {
      struct aiocb cb;
      const struct aiocb *list[1] = {&cb};
      memset(buf, 'C' + r, body);
      errs += read(in, &c, 1) != 1;
      if (use_thread) {
        pthread_t t;
        struct job j = {path, buf, body, 0};
        errs += pthread_create(&t, NULL, thread_write, &j) != 0;
        pthread_join(t, NULL);
        errs += !j.ok;
      } else {
        memset(&cb, 0, sizeof cb);
        cb.aio_fildes = fd;
        cb.aio_buf = buf;
        cb.aio_nbytes = body;
        cb.aio_offset = kHead;
        errs += aio_write(&cb) != 0;
        while (aio_error(&cb) == EINPROGRESS) aio_suspend(list, 1, NULL);
        errs += aio_return(&cb) != (ssize_t)body;
      }
      errs += write(out, "d", 1) != 1;
    }
    close(fd);
  } else {
    out = open(go, O_WRONLY);
    in = open(done, O_RDONLY);
    {
      int fd0;
      errs += write(out, "g", 1) != 1;
      usleep(base + 3000 * 0);
      fd0 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd0, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* rank 1's write is complete */
      errs += pread(fd0, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 0, head, buf, kTail);
      close(fd0);
    }
    {
      int fd1;
      errs += write(out, "g", 1) != 1;
      usleep(base + 3000 * 1);
      fd1 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd1, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* rank 1's write is complete */
      errs += pread(fd1, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 1, head, buf, kTail);
      close(fd1);
    }
    {
      int fd2;
      errs += write(out, "g", 1) != 1;
      usleep(base + 3000 * 2);
      fd2 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd2, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* rank 1's write is complete */
      errs += pread(fd2, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 2, head, buf, kTail);
      close(fd2);
    }
    {
      int fd3;
      errs += write(out, "g", 1) != 1;
      usleep(base + 3000 * 3);
      fd3 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd3, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* rank 1's write is complete */
      errs += pread(fd3, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 3, head, buf, kTail);
      close(fd3);
    }
    {
      int fd4;
      errs += write(out, "g", 1) != 1;
      usleep(base + 3000 * 4);
      fd4 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd4, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* rank 1's write is complete */
      errs += pread(fd4, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 4, head, buf, kTail);
      close(fd4);
    }
    {
      int fd5;
      errs += write(out, "g", 1) != 1;
      usleep(base + 3000 * 5);
      fd5 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd5, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* rank 1's write is complete */
      errs += pread(fd5, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 5, head, buf, kTail);
      close(fd5);
    }
    {
      int fd6;
      errs += write(out, "g", 1) != 1;
      usleep(base + 3000 * 6);
      fd6 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd6, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* rank 1's write is complete */
      errs += pread(fd6, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 6, head, buf, kTail);
      close(fd6);
    }
    {
      int fd7;
      errs += write(out, "g", 1) != 1;
      usleep(base + 3000 * 7);
      fd7 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd7, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* rank 1's write is complete */
      errs += pread(fd7, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 7, head, buf, kTail);
      close(fd7);
    }
    unlink(go);
    unlink(done);
  }
  if (errs) MPI_Abort(MPI_COMM_WORLD, 6);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
