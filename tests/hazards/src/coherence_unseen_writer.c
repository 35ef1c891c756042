/* A writer whose bytes reach the file through no call the runtime brackets one by one.
 * Rank 0's rounds each have an open of their own (the PT is handed it); in each, rank 0
 * reads the file's first 4 KiB while rank 1 overwrites the part after them in one large
 * write, and after rank 1's FIFO message (sent once that write returned) it reads the
 * last MiB of that part. A prefetch that took the file's stamp while the write was under
 * way, ahead of it, holds old bytes: served, they are wrong. 2 ranks.
 * argv[1]: file prefix; argv[2]: MiB in the second part; argv[3]: the writer:
 *   stdout    rank 1 points stdout at the file (dup2) and writes with fputs and fflush
 *   dprintf   rank 1 writes with dprintf (glibc's stream of one call)
 *   forkfw    a child rank 1 forked (no exec) writes with fopen, fwrite and fclose
 *   jumpfw    rank 1 left a signal handler by siglongjmp once, then writes with stdio
 *   jumpmpi   the same, then writes with MPI_File_write_at
 *   prefixmpi rank 1 writes with MPI_File_write_at through "ufs:" and the relative name
 *             (ROMIO's file-system prefix)
 * Correct and deterministic. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hz.h"

enum { kHead = 4096, kRounds = 6, kTail = 1 << 20 };

static sigjmp_buf jump;
static void leave(int sig) {
  (void)sig;
  siglongjmp(jump, 1);
}

/* One round of the writer: the part after the header becomes `body` bytes of `letter`. */
static int write_round(const char *how, const char *path, MPI_File fh, char *buf, size_t body) {
  if (strcmp(how, "stdout") == 0)
    return fseeko(stdout, kHead, SEEK_SET) == 0 && fputs(buf, stdout) >= 0 && fflush(stdout) == 0;
  if (strcmp(how, "dprintf") == 0) {
    int fd = open(path, O_WRONLY), ok;
    ok = fd >= 0 && lseek(fd, kHead, SEEK_SET) == kHead && dprintf(fd, "%s", buf) == (int)body;
    return close(fd) == 0 && ok;
  }
  if (strcmp(how, "jumpmpi") == 0 || strcmp(how, "prefixmpi") == 0)
    return MPI_File_write_at(fh, kHead, buf, (int)body, MPI_CHAR, MPI_STATUS_IGNORE) == MPI_SUCCESS;
  {
    FILE *f = fopen(path, "r+");
    int ok = f != NULL && fseek(f, kHead, SEEK_SET) == 0 && fwrite(buf, 1, body, f) == body;
    return f != NULL && fclose(f) == 0 && ok;
  }
}

static void report(char *line, size_t size, int r, const char *head, const char *buf) {
  size_t bad = 0;
  for (size_t i = 0; i < kTail; i++) bad += buf[i] != 'C' + r;
  snprintf(line + strlen(line), size - strlen(line), "round %d: %c %c%c old %zu %016llx\n", r, head[0],
           buf[0], buf[kTail - 1], bad, (unsigned long long)hz_sum(0, buf, kTail));
}

int main(int argc, char **argv) {
  int rank, fd, errs = 0, in = -1, out = -1, saved = -1;
  char path[256], go[256], done[256], line[4096], c, head[kHead];
  const char *how = argc > 3 ? argv[3] : "forkfw";
  size_t body = (size_t)(argc > 2 ? atoi(argv[2]) : 32) << 20;
  char *buf = malloc(body + 1);
  MPI_File fh = MPI_FILE_NULL;
  pid_t child = -1;
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
    if (strcmp(how, "stdout") == 0) {
      fflush(stdout);
      saved = dup(STDOUT_FILENO);
      fd = open(path, O_WRONLY);
      errs += fd < 0 || dup2(fd, STDOUT_FILENO) != STDOUT_FILENO;
      close(fd);
    } else if (strncmp(how, "jump", 4) == 0) {
      struct sigaction act;
      memset(&act, 0, sizeof act);
      act.sa_handler = leave;
      sigemptyset(&act.sa_mask);
      sigaction(SIGUSR1, &act, NULL);
      if (sigsetjmp(jump, 1) == 0) raise(SIGUSR1);
    }
    if (strcmp(how, "jumpmpi") == 0 || strcmp(how, "prefixmpi") == 0) {
      char name[300];
      snprintf(name, sizeof name, "%s%s", how[0] == 'p' ? "ufs:" : "", path);
      errs += MPI_File_open(MPI_COMM_SELF, name, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS;
    }
    if (strcmp(how, "forkfw") == 0) child = fork();
    if (child <= 0) {
      for (int r = 0; r < kRounds; r++) {
        memset(buf, 'C' + r, body);
        buf[body] = 0;
        errs += read(in, &c, 1) != 1;
        errs += !write_round(how, path, fh, buf, body);
        errs += write(out, "d", 1) != 1;
      }
      if (child == 0) _exit(errs != 0);
    } else {
      int status = 0;
      errs += waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    if (fh != MPI_FILE_NULL) MPI_File_close(&fh);
    if (saved >= 0) {
      fflush(stdout);
      dup2(saved, STDOUT_FILENO);
      close(saved);
    }
  } else {
    out = open(go, O_WRONLY);
    in = open(done, O_RDONLY);
    {  /* round 0: unrolled, so that each open is one the PT is handed */
      int fd0;
      errs += write(out, "g", 1) != 1;
      usleep(3000 * 0);
      fd0 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd0, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* the write returned */
      errs += pread(fd0, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 0, head, buf);
      close(fd0);
    }
    {  /* round 1: unrolled, so that each open is one the PT is handed */
      int fd1;
      errs += write(out, "g", 1) != 1;
      usleep(3000 * 1);
      fd1 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd1, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* the write returned */
      errs += pread(fd1, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 1, head, buf);
      close(fd1);
    }
    {  /* round 2: unrolled, so that each open is one the PT is handed */
      int fd2;
      errs += write(out, "g", 1) != 1;
      usleep(3000 * 2);
      fd2 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd2, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* the write returned */
      errs += pread(fd2, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 2, head, buf);
      close(fd2);
    }
    {  /* round 3: unrolled, so that each open is one the PT is handed */
      int fd3;
      errs += write(out, "g", 1) != 1;
      usleep(3000 * 3);
      fd3 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd3, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* the write returned */
      errs += pread(fd3, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 3, head, buf);
      close(fd3);
    }
    {  /* round 4: unrolled, so that each open is one the PT is handed */
      int fd4;
      errs += write(out, "g", 1) != 1;
      usleep(3000 * 4);
      fd4 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd4, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* the write returned */
      errs += pread(fd4, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 4, head, buf);
      close(fd4);
    }
    {  /* round 5: unrolled, so that each open is one the PT is handed */
      int fd5;
      errs += write(out, "g", 1) != 1;
      usleep(3000 * 5);
      fd5 = open(path, O_RDONLY | O_CREAT, 0644);
      errs += pread(fd5, head, kHead, 0) != kHead;
      usleep(200000);
      errs += read(in, &c, 1) != 1; /* the write returned */
      errs += pread(fd5, buf, kTail, kHead + body - kTail) != kTail;
      report(line, sizeof line, 5, head, buf);
      close(fd5);
    }
    unlink(go);
    unlink(done);
  }
  if (errs) MPI_Abort(MPI_COMM_WORLD, 6);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
