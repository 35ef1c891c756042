/* blocksum: every rank checksums every nprocs-th block of a file.
 * usage: blocksum <data.bin> */
#include <mpi.h>
#include <stdio.h>

#include "blocksum.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  struct reader r;
  if (argc != 2 || reader_open(&r, argv[1]) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  unsigned char buf[BLOCK];
  uint64_t h = 0;
  long bytes = 0;
  for (long i = rank; i < r.nblocks; i += nprocs) {
    ssize_t n = reader_block(&r, i, buf);
    if (n <= 0) break;
    h = checksum(h, buf, (size_t)n);
    bytes += n;
  }
  reader_close(&r);
  unsigned long long sums[64] = {0};
  unsigned long long mine = h;
  MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, sums, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  long total = 0;
  MPI_Reduce(&bytes, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int k = 0; k < nprocs && k < 64; k++) printf("rank %d: %016llx\n", k, sums[k]);
    printf("total %ld bytes\n", total);
  }
  MPI_Finalize();
  return 0;
}
