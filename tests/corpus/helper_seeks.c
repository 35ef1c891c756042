/* Shape (issue 9, 6): seeks before reads inside a helper. load() positions each of three
 * handles (lseek, fseek, MPI_File_seek) and then reads sequentially from there. Each rank
 * reads every nprocs-th block through the handles in turn and prints a CRC of what it
 * read; the last two blocks of each rank go through load_switch, the same in a switch.
 * usage: helper_seeks <shapes.bin> <block-bytes> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

static long load(int fd, FILE *f, MPI_File fh, long i, long block, unsigned char *buf) {
  long offset = i * block;
  if (i % 3 == 0) {
    lseek(fd, (off_t)offset, SEEK_SET);
    return (long)read(fd, buf, (size_t)block);
  } else if (i % 3 == 1) {
    fseek(f, offset, SEEK_SET);
    return (long)fread(buf, 1, (size_t)block, f);
  }
  MPI_Status st;
  int n = 0;
  MPI_File_seek(fh, (MPI_Offset)offset, MPI_SEEK_SET);
  MPI_File_read(fh, buf, (int)block, MPI_BYTE, &st);
  MPI_Get_count(&st, MPI_BYTE, &n);
  return n;
}

/* The same reads chosen by a switch, with breaks and a case that falls through: the PT
 * runs the switch itself, so each read is prefetched from its seek's position. */
static long load_switch(int fd, FILE *f, long i, long block, unsigned char *buf) {
  long n = 0;
  switch (i % 3) {
    case 0:
      lseek(fd, (off_t)(i * block), SEEK_SET);
      n = (long)read(fd, buf, (size_t)block);
      break;
    case 1:
      n = 0; /* falls through to the stdio read */
    default:
      fseek(f, i * block, SEEK_SET);
      n += (long)fread(buf, 1, (size_t)block, f);
      break;
  }
  return n;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: helper_seeks <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  int fd = open(argv[1], O_RDONLY);
  FILE *f = fopen(argv[1], "rb");
  MPI_File fh;
  if (fd < 0 || f == NULL ||
      MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct stat st;
  fstat(fd, &st);
  long nblocks = ((long)st.st_size + block - 1) / block;
  unsigned char *buf = malloc((size_t)block);
  uint32_t crc = 0;
  long bytes = 0, blocks = 0;
  for (long i = rank; i < nblocks; i += nprocs) {
    long n = i + 2 * nprocs >= nblocks ? load_switch(fd, f, i, block, buf)
                                       : load(fd, f, fh, i, block, buf);
    if (n <= 0) break;
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    bytes += n;
    blocks++;
  }
  close(fd);
  fclose(f);
  MPI_File_close(&fh);

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
