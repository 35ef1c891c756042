/* Shape (issue 9, 8): strict C99 (-std=c99, so no POSIX declarations beyond what the
 * program asks for), a 1 MiB local array whose size gives the record stride
 * (`sizeof window`), reads with MPI_STATUS_IGNORE, and MPI_File_set_view with a plain
 * displacement and MPI_BYTE, used only to skip a header. Each rank reads every
 * nprocs-th block after the header (stdio fseek + fread for even blocks, MPI-IO for odd
 * ones) and prints a CRC of what it read.
 * usage: c99_offsets <shapes.bin> <block-bytes> */
#include "corpus.h"

CORPUS_DEFINE_SINK;

enum { kHeader = 4096 };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3 || atol(argv[2]) > (1L << 20)) {
    if (rank == 0) fprintf(stderr, "usage: c99_offsets <shapes.bin> <block-bytes <= 1 MiB>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  static unsigned char window[1 << 20];
  unsigned char scratch[1 << 20];
  FILE *f = fopen(argv[1], "rb");
  MPI_File fh;
  if (f == NULL ||
      MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_File_set_view(fh, kHeader, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  fseek(f, 0, SEEK_END);
  long size = ftell(f) - kHeader;
  long stride = (long)sizeof scratch / (1L << 20) * block; /* one block, written the long way */
  long nblocks = size / stride;
  uint32_t crc = 0;
  long bytes = 0, blocks = 0;
  for (long i = rank; i < nblocks; i += nprocs) {
    if (i % 2 == 0) {
      fseek(f, kHeader + i * stride, SEEK_SET);
      if (fread(window, 1, (size_t)block, f) != (size_t)block) break;
    } else {
      MPI_File_read_at(fh, (MPI_Offset)i * stride, window, (int)block, MPI_BYTE,
                       MPI_STATUS_IGNORE);
    }
    crc = crc32_update(crc, window, (size_t)block);
    crunch(window, (size_t)block);
    bytes += block;
    blocks++;
  }
  fclose(f);
  MPI_File_close(&fh);

  char line[128];
  snprintf(line, sizeof line, "rank %d: blocks %ld bytes %ld crc %08x\n", rank, blocks, bytes,
           (unsigned)crc);
  print_ranked(line);
  long total = 0;
  MPI_Reduce(&bytes, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("total bytes %ld of %ld\n", total, size);
  MPI_Finalize();
  return 0;
}
