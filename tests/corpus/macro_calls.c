/* Shape (issue 9, 4): every MPI call wrapped in an error-checking macro that prints the
 * call's text (#call) on failure. Each rank reads every nprocs-th block with
 * MPI_File_read_at and prints a CRC of what it read; a failing call (a bad block size)
 * prints the call as written.
 * usage: macro_calls <shapes.bin> <block-bytes> */
#include "corpus.h"

CORPUS_DEFINE_SINK;

#define CHECK(call)                                                         \
  do {                                                                      \
    int check_rc_ = (call);                                                 \
    if (check_rc_ != MPI_SUCCESS) {                                         \
      fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #call, \
              check_rc_);                                                   \
      MPI_Abort(MPI_COMM_WORLD, 1);                                         \
    }                                                                       \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nprocs));
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: macro_calls <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
  CHECK(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
  MPI_Offset size;
  CHECK(MPI_File_get_size(fh, &size));
  long nblocks = (long)((size + block - 1) / block);
  unsigned char *buf = malloc((size_t)block);
  uint32_t crc = 0;
  long bytes = 0, blocks = 0;
  for (long i = rank; i < nblocks; i += nprocs) {
    MPI_Status st;
    int n;
    CHECK(MPI_File_read_at(fh, (MPI_Offset)i * block, buf, (int)block, MPI_BYTE, &st));
    CHECK(MPI_Get_count(&st, MPI_BYTE, &n));
    if (n <= 0) break;
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    bytes += n;
    blocks++;
  }
  CHECK(MPI_File_close(&fh));

  char line[128];
  snprintf(line, sizeof line, "rank %d: blocks %ld bytes %ld crc %08x\n", rank, blocks, bytes,
           (unsigned)crc);
  print_ranked(line);
  long total = 0;
  CHECK(MPI_Reduce(&bytes, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
  if (rank == 0) printf("total bytes %ld of %ld\n", total, (long)size);
  free(buf);
  MPI_Finalize();
  return 0;
}
