/* Data-dependent offsets: reads an index file in batches and then the records at the
 * offsets the index holds. In the prefetching build the PT must read the index itself.
 * usage: indexed <index-file> <data-file> <record-bytes> <batches> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define BATCH 64

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t record = (size_t)atol(argv[3]);
  int batches = atoi(argv[4]);
  int fi = open(argv[1], O_RDONLY), fd = open(argv[2], O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  size_t span = (size_t)st.st_size - record;
  char *buf = malloc(record);
  uint32_t idx[BATCH];
  uint64_t h = FNV_START;
  for (int b = rank; b < batches; b += 2) {
    pread(fi, idx, sizeof idx, (off_t)(b * sizeof idx));
    for (int j = 0; j < BATCH; ++j) {
      ssize_t n = pread(fd, buf, record, (off_t)(idx[j] % span));
      h = fnv1a(h, buf, (size_t)n);
      h ^= busy_work(buf, (size_t)n, 2);
    }
  }
  char line[64];
  snprintf(line, sizeof line, "rank %d: %016llx\n", rank, (unsigned long long)h);
  print_in_rank_order(line);
  free(buf);
  MPI_Finalize();
  return 0;
}
