/* Pattern: reads that cannot be prefetched safely; the output must still be right.
 *  1. A token travels round the ranks (MPI_Recv from the left, MPI_Send to the right) and
 *     each rank reads the block of data.bin the token points to, then folds the block's
 *     CRC into the token: every offset comes from a message received inside the loop,
 *     which a prefetch thread (no MPI) cannot know.
 *  2. Reads through a function pointer chosen at run time from argv (pread itself or a
 *     retrying wrapper), which a source transformer cannot resolve statically.
 * usage: unpredictable <data.bin> <second.bin> <rounds> pread|retry */
#include <fcntl.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

enum { kBlock = 8192 };

typedef ssize_t (*fetch_fn)(int fd, void *buf, size_t count, off_t offset);

/* pread until count bytes or end of file. */
static ssize_t pread_retry(int fd, void *buf, size_t count, off_t offset) {
  size_t done = 0;
  while (done < count) {
    ssize_t n = pread(fd, (char *)buf + done, count - done, offset + (off_t)done);
    if (n < 0) return -1;
    if (n == 0) break;
    done += (size_t)n;
  }
  return (ssize_t)done;
}

struct source {
  int fd;
  fetch_fn fetch;
};

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 5 || nprocs < 2) {
    if (rank == 0)
      fprintf(stderr, "usage: mpirun -np 2+ unpredictable <data.bin> <second.bin> <rounds> pread|retry\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rounds = atoi(argv[3]);
  unsigned char buf[kBlock];
  int fd = open(argv[1], O_RDONLY);
  off_t size = lseek(fd, 0, SEEK_END);
  uint64_t nblocks = (uint64_t)(size / kBlock);
  int left = (rank + nprocs - 1) % nprocs, right = (rank + 1) % nprocs;

  uint64_t token = 12345, ring_crc = 0;
  for (int it = 0; it < rounds; ++it) {
    if (rank != 0) MPI_Recv(&token, 1, MPI_UINT64_T, left, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    off_t offset = (off_t)((token % nblocks) * kBlock);
    ssize_t n = pread(fd, buf, kBlock, offset);
    uint32_t c = crc32_update(0, buf, (size_t)n);
    crunch(buf, (size_t)n);
    ring_crc = crc32_update((uint32_t)ring_crc, &c, sizeof c);
    token = token * 6364136223846793005ull + c;
    MPI_Send(&token, 1, MPI_UINT64_T, right, it, MPI_COMM_WORLD);
    if (rank == 0) MPI_Recv(&token, 1, MPI_UINT64_T, left, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  close(fd);

  struct source src = {open(argv[2], O_RDONLY), strcmp(argv[4], "retry") == 0 ? pread_retry : pread};
  uint32_t fp_crc = 0;
  for (int i = 0; i < rounds; ++i) {
    ssize_t n = src.fetch(src.fd, buf, kBlock, (off_t)((long)(i * nprocs + rank) * kBlock));
    if (n <= 0) break;
    fp_crc = crc32_update(fp_crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
  }
  close(src.fd);

  char line[160];
  snprintf(line, sizeof line, "rank %d: ring crc %08x fn-pointer crc %08x\n", rank,
           (unsigned)ring_crc, (unsigned)fp_crc);
  print_ranked(line);
  if (rank == 0) printf("final token %016llx\n", (unsigned long long)token);
  MPI_Finalize();
  return 0;
}
