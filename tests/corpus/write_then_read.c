/* Pattern: a program that writes a file and reads it back later. Phase 1 reads the rank's
 * blocks of data.bin (pread), reverses each and appends it to wtr.<rank>.dat (write);
 * phase 2 reopens that file and reads its blocks back in a scrambled order (pread) - reads
 * that depend on the earlier writes (read after write).
 * usage: write_then_read <data.bin> <block-bytes> <blocks> */
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
    if (rank == 0) fprintf(stderr, "usage: write_then_read <data.bin> <block-bytes> <blocks>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  int blocks = atoi(argv[3]);
  char out_path[64];
  snprintf(out_path, sizeof out_path, "wtr.%d.dat", rank);
  unsigned char *in = malloc((size_t)block), *rev = malloc((size_t)block);

  int src = open(argv[1], O_RDONLY);
  int dst = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (src < 0 || dst < 0) {
    fprintf(stderr, "rank %d: cannot open the files\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < blocks; ++i) {
    ssize_t n = pread(src, in, (size_t)block, (off_t)(((long)i * nprocs + rank) * block));
    for (ssize_t k = 0; k < n; ++k) rev[k] = in[n - 1 - k];
    crunch(in, (size_t)n);
    if (write(dst, rev, (size_t)n) != n) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  close(dst);
  close(src);

  int back = open(out_path, O_RDONLY);
  uint32_t crc = 0;
  for (int i = 0; i < blocks; ++i) {
    int j = (int)(((long)i * 7 + 3) % blocks);
    ssize_t n = pread(back, in, (size_t)block, (off_t)((long)j * block));
    crc = crc32_update(crc, in, (size_t)n);
    crunch(in, (size_t)n);
  }
  close(back);

  char line[128];
  snprintf(line, sizeof line, "rank %d: wrote %d blocks, read back crc %08x\n", rank, blocks,
           (unsigned)crc);
  print_ranked(line);
  free(in);
  free(rev);
  MPI_Finalize();
  return 0;
}
