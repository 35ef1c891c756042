/* Case 7 (variant): only the descriptor the launcher opened (number in argv[1]): read()
 * loops, lseek back, pread, and the position it leaves. Run as an MPI singleton.
 * usage: passed_fd <fd> */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define BS 4096

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int in = atoi(argv[1]);
  char buf[BS];
  uint64_t h1 = 0, h2 = 0, h3 = 0;
  long a = 0, b = 0, c = 0;
  for (;;) {
    ssize_t n = read(in, buf, BS);
    if (n <= 0) break;
    h1 = hz_sum(h1, buf, (size_t)n);
    a += n;
  }
  off_t end = lseek(in, 0, SEEK_CUR);
  lseek(in, end / 2, SEEK_SET);
  for (;;) {
    ssize_t n = read(in, buf, BS);
    if (n <= 0) break;
    h2 = hz_sum(h2, buf, (size_t)n);
    b += n;
  }
  for (long i = 0; i < 16; i++) {
    ssize_t n = pread(in, buf, 100, i * 1000);
    if (n <= 0) break;
    h3 = hz_sum(h3, buf, (size_t)n);
    c += n;
  }
  printf("fd %d: %ld bytes sum %016llx; from %ld: %ld bytes sum %016llx; pread %ld sum %016llx; "
         "position %ld\n", in, a, (unsigned long long)h1, (long)(end / 2), b,
         (unsigned long long)h2, c, (unsigned long long)h3, (long)lseek(in, 0, SEEK_CUR));
  MPI_Finalize();
  return 0;
}
