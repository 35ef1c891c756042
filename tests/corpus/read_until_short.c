/* Pattern: MPI-IO reads until a short count. Each rank reads the whole input with
 * MPI_File_read in blocks, takes each read's item count from its status with
 * MPI_Get_count, computes on the block, and stops after the first read that returned fewer
 * items than it asked for (the last, partial block; or an empty read at a block boundary).
 * usage: read_until_short <shapes.bin> <block-bytes> */
#include "corpus.h"

CORPUS_DEFINE_SINK;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: read_until_short <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int block = atoi(argv[2]);
  MPI_File fh;
  if (block <= 0 ||
      MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
    fprintf(stderr, "read_until_short: cannot read %s in blocks of %s\n", argv[1], argv[2]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  unsigned char *buf = malloc((size_t)block);
  MPI_Status status;
  int count;
  uint32_t crc = 0;
  long bytes = 0, reads = 0;
  do {
    MPI_File_read(fh, buf, block, MPI_BYTE, &status);
    MPI_Get_count(&status, MPI_BYTE, &count);
    crc = crc32_update(crc, buf, (size_t)count);
    crunch(buf, (size_t)count);
    bytes += count;
    reads++;
  } while (count == block);
  MPI_File_close(&fh);
  free(buf);
  char line[128];
  snprintf(line, sizeof line, "rank %d: read %ld bytes in %ld reads crc %08x\n", rank, bytes,
           reads, (unsigned)crc);
  print_ranked(line);
  MPI_Finalize();
  return 0;
}
