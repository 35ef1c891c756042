/* Pattern: read after write in the same loop. Each rank builds raw.<rank>.dat block by
 * block: iteration i preads block i-1 of the output file, which iteration i-1 has just
 * pwritten, and the rank's next block of data.bin, combines them (XOR with a rotation) and
 * pwrites block i. At the end it streams the whole output file back with read().
 * usage: raw_same_loop <data.bin> <block-bytes> <blocks> */
#include <fcntl.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: raw_same_loop <data.bin> <block-bytes> <blocks>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  int blocks = atoi(argv[3]);
  char path[64];
  snprintf(path, sizeof path, "raw.%d.dat", rank);
  unsigned char *prev = malloc((size_t)block), *cur = malloc((size_t)block),
                *next = malloc((size_t)block);

  int in = open(argv[1], O_RDONLY);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || fd < 0) {
    fprintf(stderr, "rank %d: cannot open the files\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (pread(in, cur, (size_t)block, (off_t)(rank * block)) != block ||
      pwrite(fd, cur, (size_t)block, 0) != block)
    MPI_Abort(MPI_COMM_WORLD, 1);
  for (int i = 1; i < blocks; ++i) {
    ssize_t np = pread(fd, prev, (size_t)block, (off_t)((long)(i - 1) * block));
    ssize_t nc = pread(in, cur, (size_t)block, (off_t)(((long)i * nprocs + rank) * block));
    if (np != block || nc != block) MPI_Abort(MPI_COMM_WORLD, 1);
    long shift = i % block;
    for (long k = 0; k < block; ++k) next[k] = prev[k] ^ cur[(k + shift) % block];
    crunch(next, (size_t)block);
    if (pwrite(fd, next, (size_t)block, (off_t)((long)i * block)) != block)
      MPI_Abort(MPI_COMM_WORLD, 1);
  }
  close(in);

  lseek(fd, 0, SEEK_SET);
  uint32_t crc = 0;
  long total = 0;
  ssize_t n;
  while ((n = read(fd, cur, (size_t)block)) > 0) {
    crc = crc32_update(crc, cur, (size_t)n);
    total += n;
  }
  close(fd);

  char line[128];
  snprintf(line, sizeof line, "rank %d: %ld bytes crc %08x\n", rank, total, (unsigned)crc);
  print_ranked(line);
  free(prev);
  free(cur);
  free(next);
  MPI_Finalize();
  return 0;
}
