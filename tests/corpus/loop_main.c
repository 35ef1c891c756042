/* Pattern: reads in a loop directly in main. Each rank preads every nprocs-th block of
 * one shared file (offset from rank, size and the loop counter), including the short
 * block at the end of the file, and prints a CRC of what it read.
 * usage: loop_main <data.bin> <block-bytes> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: loop_main <data.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct stat st;
  fstat(fd, &st);
  long nblocks = (st.st_size + block - 1) / block;
  unsigned char *buf = malloc((size_t)block);

  uint32_t crc = 0;
  long bytes = 0, blocks = 0;
  for (long i = rank; i < nblocks; i += nprocs) {
    ssize_t n = pread(fd, buf, (size_t)block, (off_t)(i * block));
    if (n <= 0) break;
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    bytes += n;
    blocks++;
  }
  close(fd);

  char line[128];
  snprintf(line, sizeof line, "rank %d: blocks %ld bytes %ld crc %08x\n", rank, blocks, bytes,
           (unsigned)crc);
  print_ranked(line);
  long total = 0;
  MPI_Reduce(&bytes, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("total bytes %ld of %ld\n", total, (long)st.st_size);
  free(buf);
  MPI_Finalize();
  return 0;
}
