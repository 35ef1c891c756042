/* Case 10: fork after MPI_Init. Each rank forks a child that checksums the input with
 * stdio (fread) and with read(), writes the result to a pipe and _exits; meanwhile the
 * parent preads its share of the file. The parent waits for the child and prints both.
 * With -DCHILD_EXIT=exit the child ends with exit() (atexit handlers, stdio flush) instead
 * of _exit().
 * usage: fork_child <data.bin> */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hz.h"

#define BS 8192

#ifndef CHILD_EXIT
#define CHILD_EXIT _exit
#endif

static uint64_t child_sum(const char *path) {
  char buf[BS];
  uint64_t h = 0;
  FILE *f = fopen(path, "rb");
  size_t n;
  if (!f) return 0;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = hz_sum(h, buf, n);
  fclose(f);
  int fd = open(path, O_RDONLY);
  ssize_t m;
  while ((m = read(fd, buf, 777)) > 0) h = hz_sum(h, buf, (size_t)m);
  close(fd);
  return h;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int fd = open(argv[1], O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  long nblocks = (long)((st.st_size + BS - 1) / BS);

  int p[2];
  if (pipe(p) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    uint64_t h = child_sum(argv[1]);
    if (write(p[1], &h, sizeof h) != (ssize_t)sizeof h) CHILD_EXIT(1);
    CHILD_EXIT(0);
  }
  close(p[1]);

  char buf[BS];
  uint64_t h = 0;
  long bytes = 0;
  for (long i = rank; i < nblocks; i += nprocs) {
    ssize_t n = pread(fd, buf, BS, (off_t)i * BS);
    if (n <= 0) break;
    h = hz_sum(h, buf, (size_t)n);
    bytes += n;
  }
  close(fd);

  uint64_t ch = 0;
  int status = 0;
  ssize_t got = read(p[0], &ch, sizeof ch);
  close(p[0]);
  waitpid(pid, &status, 0);
  char line[200];
  snprintf(line, sizeof line, "rank %d: bytes %ld sum %016llx; child %s, status %d, sum %016llx\n",
           rank, bytes, (unsigned long long)h, got == (ssize_t)sizeof ch ? "answered" : "silent",
           WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), (unsigned long long)ch);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
