/* Case 7: descriptors the program did not open. The launcher opens the input on the
 * descriptor number given in argv[1] and redirects stdin from a second regular file.
 * The program reads both with read() loops, seeks back with lseek and reads again, and
 * prints checksums. Run as an MPI singleton (mpirun would not pass the descriptor).
 * usage: inherited_fds <fd> */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define BS 1000

static uint64_t drain(int fd, long *bytes) {
  char buf[BS];
  uint64_t h = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    h = hz_sum(h, buf, (size_t)n);
    *bytes += n;
  }
  return h;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int in = atoi(argv[1]);
  char buf[BS];
  long a = 0, b = 0, c = 0, d = 0;

  /* The passed descriptor: the whole file, then again from 3/4 of it. */
  uint64_t h1 = drain(in, &a);
  off_t end = lseek(in, 0, SEEK_CUR);
  lseek(in, end / 4 * 3, SEEK_SET);
  uint64_t h2 = drain(in, &b);

  /* stdin: a header record, then every other record. */
  ssize_t hn = read(STDIN_FILENO, buf, 16);
  uint64_t h3 = hz_sum(0, buf, hn > 0 ? (size_t)hn : 0);
  for (int i = 0; i < 40; i++) {
    if (lseek(STDIN_FILENO, 16 + (off_t)i * 2 * BS, SEEK_SET) < 0) break;
    ssize_t n = read(STDIN_FILENO, buf, BS);
    if (n <= 0) break;
    h3 = hz_sum(h3, buf, (size_t)n);
    c += n;
  }
  lseek(STDIN_FILENO, 0, SEEK_SET);
  uint64_t h4 = drain(STDIN_FILENO, &d);

  printf("fd %d: %ld bytes sum %016llx, tail from %ld: %ld bytes sum %016llx\n", in, a,
         (unsigned long long)h1, (long)(end / 4 * 3), b, (unsigned long long)h2);
  printf("stdin: header %ld, records %ld bytes sum %016llx, all %ld bytes sum %016llx\n",
         (long)hn, c, (unsigned long long)h3, d, (unsigned long long)h4);
  MPI_Finalize();
  return 0;
}
