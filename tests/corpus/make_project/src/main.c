/* make_project (histo): a byte histogram of two inputs. Each rank takes every nprocs-th
 * block of the first (pread, in io.c) and a contiguous part of the second (MPI_File_seek +
 * MPI_File_read, in io.c); rank 0 reduces the histograms, prints the summary and writes
 * it to summary.txt.
 * usage: histo <data.bin> <second.bin> <block-bytes> */
#include <stdlib.h>

#include "io.h"
#include "stats.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: histo <data.bin> <second.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[3]);
  unsigned char *buf = malloc((size_t)block);
  static struct histogram local, total;

  struct blocks b;
  if (blocks_open(&b, argv[1], block) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  long nblocks = blocks_count(&b);
  for (long i = rank; i < nblocks; i += nprocs) histogram_add(&local, buf, blocks_read(&b, i, buf));
  blocks_close(&b);

  MPI_File fh;
  MPI_Offset size;
  MPI_File_open(MPI_COMM_SELF, argv[2], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  MPI_File_get_size(fh, &size);
  MPI_File_close(&fh);
  long part = (long)size / nprocs;
  if (stream_open(&fh, argv[2], (MPI_Offset)part * rank) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  for (long done = 0; done + block <= part; done += block)
    histogram_add(&local, buf, stream_next(fh, buf, (int)block));
  MPI_File_close(&fh);

  MPI_Reduce(local.bins, total.bins, 256, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    histogram_summary(&total, stdout);
    FILE *out = fopen("summary.txt", "w");
    histogram_summary(&total, out);
    fclose(out);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
