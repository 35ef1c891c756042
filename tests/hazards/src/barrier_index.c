/* Case 1: data read after a barrier. Rank 1 (the "indexer") writes the index of the
 * records to process; after MPI_Barrier rank 0 reads that index and then each record it
 * names through table[idx[i]] (the table maps a record id to its offset). The index that
 * is on disk before rank 1 rewrites it is stale: its ids are far out of the table's
 * bounds, so only the data read after the barrier may be used.
 * usage: barrier_index <index.bin> <records.bin> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hz.h"

#define NIDS 256
#define NIDX 96
#define RECSZ 128

static long table[NIDS];

int main(int argc, char **argv) {
  int rank, nprocs, i;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: barrier_index <index.bin> <records.bin>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (i = 0; i < NIDS; i++) table[i] = (long)((i * 37) % NIDS) * RECSZ;

  if (rank == 1) {
    int32_t idx[NIDX];
    int fd = open(argv[1], O_WRONLY | O_TRUNC);
    for (i = 0; i < NIDX; i++) idx[i] = (int32_t)((i * 11 + 5) % NIDS);
    if (fd < 0 || write(fd, idx, sizeof idx) != (ssize_t)sizeof idx) {
      perror("index");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == 0) {
    int32_t idx[NIDX];
    unsigned char rec[RECSZ];
    uint64_t h = 0;
    long bytes = 0;
    int ifd = open(argv[1], O_RDONLY);
    int dfd = open(argv[2], O_RDONLY);
    ssize_t n;
    if (ifd < 0 || dfd < 0) {
      perror("open");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    n = read(ifd, idx, sizeof idx);
    if (n != (ssize_t)sizeof idx) {
      fprintf(stderr, "short index (%ld bytes)\n", (long)n);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    close(ifd);
    for (i = 0; i < NIDX; i++) {
      ssize_t got = pread(dfd, rec, RECSZ, table[idx[i]]);
      if (got <= 0) break;
      h = hz_sum(h, rec, (size_t)got);
      bytes += got;
    }
    close(dfd);
    printf("records %d bytes %ld sum %016llx\n", NIDX, bytes, (unsigned long long)h);
  }
  MPI_Finalize();
  return 0;
}
