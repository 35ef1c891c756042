/* Shape (issue 9, 3): handles in globals, as in many benchmarks. `static FILE *df` and
 * `static int dfd` are opened in an init function and read in helpers called from the
 * loop in main. Each rank reads every nprocs-th block (even blocks through stdio, odd
 * ones through pread) and prints a CRC of what it read.
 * usage: global_handles <shapes.bin> <block-bytes> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

static FILE *df;
static int dfd = -1;
static long file_bytes;

static void open_data(const char *path) {
  df = fopen(path, "rb");
  dfd = open(path, O_RDONLY);
  if (df == NULL || dfd < 0) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct stat st;
  fstat(dfd, &st);
  file_bytes = (long)st.st_size;
}

static long read_stdio(long offset, unsigned char *buf, long n) {
  fseek(df, offset, SEEK_SET);
  return (long)fread(buf, 1, (size_t)n, df);
}

static long read_posix(long offset, unsigned char *buf, long n) {
  return (long)pread(dfd, buf, (size_t)n, (off_t)offset);
}

static void close_data(void) {
  fclose(df);
  close(dfd);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: global_handles <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  open_data(argv[1]);
  long nblocks = (file_bytes + block - 1) / block;
  unsigned char *buf = malloc((size_t)block);
  uint32_t crc = 0;
  long bytes = 0, blocks = 0;
  for (long i = rank; i < nblocks; i += nprocs) {
    long n = i % 2 == 0 ? read_stdio(i * block, buf, block) : read_posix(i * block, buf, block);
    if (n <= 0) break;
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    bytes += n;
    blocks++;
  }
  close_data();

  char line[128];
  snprintf(line, sizeof line, "rank %d: blocks %ld bytes %ld crc %08x\n", rank, blocks, bytes,
           (unsigned)crc);
  print_ranked(line);
  long total = 0;
  MPI_Reduce(&bytes, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("total bytes %ld of %ld\n", total, file_bytes);
  free(buf);
  MPI_Finalize();
  return 0;
}
