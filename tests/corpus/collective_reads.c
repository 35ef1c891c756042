/* Shape: collective MPI-IO reads, as I/O benchmarks and I/O libraries issue them:
 * MPI_File_read_at_all, and MPI_File_read_all after an MPI_File_seek, on a file every
 * rank opened together, through a view whose displacement skips a 4 KiB header. Every
 * rank takes part in every round (with 0 items once it has no block left). Each rank
 * reads every nprocs-th block after the header and prints a CRC of what it read.
 * usage: collective_reads <shapes.bin> <block-bytes> */
#include "corpus.h"

CORPUS_DEFINE_SINK;

enum { kHeader = 4096 };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3 || atol(argv[2]) <= 0) {
    if (rank == 0) fprintf(stderr, "usage: collective_reads <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  unsigned char *buf = malloc((size_t)block);
  MPI_File fh;
  if (buf == NULL ||
      MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
    fprintf(stderr, "%s: cannot open\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Offset file_size;
  MPI_File_get_size(fh, &file_size);
  MPI_File_set_view(fh, kHeader, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  long size = (long)file_size - kHeader;
  long nblocks = size / block;
  long rounds = (nblocks + nprocs - 1) / nprocs;
  uint32_t crc = 0;
  long bytes = 0, blocks = 0;
  for (long r = 0; r < rounds; r++) {
    long i = r * nprocs + rank;
    int count = i < nblocks ? (int)block : 0;
    MPI_Status status;
    if (r % 2 == 0) {
      MPI_File_read_at_all(fh, (MPI_Offset)i * block, buf, count, MPI_BYTE, &status);
    } else {
      MPI_File_seek(fh, (MPI_Offset)i * block, MPI_SEEK_SET);
      MPI_File_read_all(fh, buf, count, MPI_BYTE, &status);
    }
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (got <= 0) continue;
    crc = crc32_update(crc, buf, (size_t)got);
    crunch(buf, (size_t)got);
    bytes += got;
    blocks++;
  }
  MPI_File_close(&fh);
  free(buf);

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
