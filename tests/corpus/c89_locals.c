/* Shape (issue 9, 1): C89 style. Every local, the handles among them, is declared at the
 * top of main, before the prefetch thread's start point, and assigned after it. Each rank
 * reads every nprocs-th block of one file, through pread, fseek + fread or
 * MPI_File_read_at in turn, and prints a CRC of what it read.
 * usage: c89_locals <shapes.bin> <block-bytes> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

int main(int argc, char **argv) {
  int rank, nprocs, fd;
  FILE *f;
  MPI_File fh;
  MPI_Status status;
  struct stat st;
  long block, nblocks, i, blocks, bytes, total;
  int got;
  unsigned char *buf;
  uint32_t crc;
  char line[128];

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: c89_locals <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  block = atol(argv[2]);
  fd = open(argv[1], O_RDONLY);
  f = fopen(argv[1], "rb");
  if (fd < 0 || f == NULL ||
      MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  fstat(fd, &st);
  nblocks = (st.st_size + block - 1) / block;
  buf = malloc((size_t)block);
  crc = 0;
  blocks = 0;
  bytes = 0;
  for (i = rank; i < nblocks; i += nprocs) {
    long n;
    if (i % 3 == 0) {
      n = (long)pread(fd, buf, (size_t)block, (off_t)(i * block));
    } else if (i % 3 == 1) {
      fseek(f, i * block, SEEK_SET);
      n = (long)fread(buf, 1, (size_t)block, f);
    } else {
      MPI_File_read_at(fh, (MPI_Offset)(i * block), buf, (int)block, MPI_BYTE, &status);
      MPI_Get_count(&status, MPI_BYTE, &got);
      n = got;
    }
    if (n <= 0) break;
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    bytes += n;
    blocks++;
  }
  close(fd);
  fclose(f);
  MPI_File_close(&fh);

  snprintf(line, sizeof line, "rank %d: blocks %ld bytes %ld crc %08x\n", rank, blocks, bytes,
           (unsigned)crc);
  print_ranked(line);
  total = 0;
  MPI_Reduce(&bytes, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("total bytes %ld of %ld\n", total, (long)st.st_size);
  free(buf);
  MPI_Finalize();
  return 0;
}
