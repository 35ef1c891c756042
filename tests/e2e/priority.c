/* The MT reads small pieces of one file, computing between them, then reads a second,
 * large file. In the prefetching build the PT streams the large file meanwhile, so the
 * MT's reads of the small one compete with PT sub-reads: the test checks from the trace
 * that each MT access waited for at most the one sub-read in progress.
 * usage: priority <small-file> <large-file> <piece-bytes> <work-rounds> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define LARGE_CHUNK (4u << 20)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *small = argv[1], *large = argv[2];
  size_t piece = (size_t)atol(argv[3]);
  int rounds = atoi(argv[4]);
  char *buf = malloc(LARGE_CHUNK);
  uint64_t h = FNV_START, work = 0;
  int fd = open(small, O_RDONLY);
  ssize_t n;
  while ((n = read(fd, buf, piece)) > 0) {
    h = fnv1a(h, buf, (size_t)n);
    work += busy_work(buf, (size_t)n, rounds);
  }
  close(fd);
  fd = open(large, O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  for (off_t off = 0; off < st.st_size; off += LARGE_CHUNK) {
    n = pread(fd, buf, LARGE_CHUNK, off);
    h = fnv1a(h, buf, (size_t)n);
  }
  close(fd);
  printf("checksum %016llx work %d\n", (unsigned long long)h, work != 0);
  free(buf);
  MPI_Finalize();
  return 0;
}
