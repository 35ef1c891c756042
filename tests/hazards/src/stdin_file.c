/* Case 7 (variant): stdin redirected from a regular file (`prog < data.bin`): a header
 * read, then records at offsets found with lseek, then the whole file again. Run as an
 * MPI singleton (mpirun would turn stdin into a pipe).
 * usage: stdin_file < data.bin */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define BS 1000

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  char buf[BS];
  ssize_t hn = read(STDIN_FILENO, buf, 16);
  uint64_t h1 = hz_sum(0, buf, hn > 0 ? (size_t)hn : 0), h2 = 0;
  long c = 0, d = 0;
  for (int i = 0; i < 40; i++) {
    if (lseek(STDIN_FILENO, 16 + (off_t)i * 2 * BS, SEEK_SET) < 0) break;
    ssize_t n = read(STDIN_FILENO, buf, BS);
    if (n <= 0) break;
    h1 = hz_sum(h1, buf, (size_t)n);
    c += n;
  }
  lseek(STDIN_FILENO, 0, SEEK_SET);
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, BS);
    if (n <= 0) break;
    h2 = hz_sum(h2, buf, (size_t)n);
    d += n;
  }
  printf("stdin: header %ld, records %ld bytes sum %016llx, all %ld bytes sum %016llx\n",
         (long)hn, c, (unsigned long long)h1, d, (unsigned long long)h2);
  MPI_Finalize();
  return 0;
}
