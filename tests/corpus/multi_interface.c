/* Patterns: every read interface, with two files open at once.
 *  phase 1: data.bin through a descriptor (pread) and second.bin through a FILE*
 *           (fseek + fread) in the same loop; then lseek + read on the descriptor;
 *  phase 2: data.bin opened with MPI_File_open on MPI_COMM_WORLD (MPI_File_read_at) and
 *           second.bin on MPI_COMM_SELF (one MPI_File_seek, then MPI_File_read), both open
 *           and read in the same loop.
 * Offsets come from the rank, the size and the loop counter.
 * usage: multi_interface <data.bin> <second.bin> <chunk-bytes> <chunks-per-rank> */
#include <fcntl.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 5) {
    if (rank == 0)
      fprintf(stderr, "usage: multi_interface <data.bin> <second.bin> <chunk> <chunks>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *data_path = argv[1], *second_path = argv[2];
  long chunk = atol(argv[3]);
  int chunks = atoi(argv[4]);
  unsigned char *a = malloc((size_t)chunk), *b = malloc((size_t)chunk);
  uint32_t crc_pread = 0, crc_fread = 0, crc_read = 0, crc_read_at = 0, crc_mpi_read = 0;

  /* Phase 1: POSIX and stdio, two files. */
  int fd = open(data_path, O_RDONLY);
  FILE *fp = fopen(second_path, "rb");
  if (fd < 0 || fp == NULL) {
    fprintf(stderr, "cannot open the inputs\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < chunks; ++i) {
    long off_a = ((long)rank * chunks + i) * chunk;           /* rank's contiguous part */
    long off_b = ((long)i * nprocs + rank) * (chunk / 2);     /* interleaved half chunks */
    ssize_t na = pread(fd, a, (size_t)chunk, (off_t)off_a);
    fseek(fp, off_b, SEEK_SET);
    size_t nb = fread(b, 1, (size_t)(chunk / 2), fp);
    crc_pread = crc32_update(crc_pread, a, (size_t)na);
    crc_fread = crc32_update(crc_fread, b, nb);
    crunch(a, (size_t)na);
  }
  for (int i = 0; i < chunks; ++i) {
    /* Backwards through the rank's part of data.bin, shifted by a third of a chunk. */
    long off = ((long)rank * chunks + (chunks - 1 - i)) * chunk + chunk / 3;
    lseek(fd, (off_t)off, SEEK_SET);
    ssize_t n = read(fd, a, (size_t)chunk);
    crc_read = crc32_update(crc_read, a, (size_t)n);
    crunch(a, (size_t)n);
  }
  long stdio_pos = ftell(fp);
  fclose(fp);
  close(fd);

  /* Phase 2: MPI-IO, two files. */
  MPI_File fa, fb;
  MPI_File_open(MPI_COMM_WORLD, data_path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fa);
  MPI_File_open(MPI_COMM_SELF, second_path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fb);
  MPI_File_seek(fb, (MPI_Offset)rank * chunks * (chunk / 2), MPI_SEEK_SET);
  for (int i = 0; i < chunks; ++i) {
    MPI_Status st;
    int na, nb;
    MPI_Offset off = ((MPI_Offset)(chunks - 1 - i) * nprocs + rank) * chunk;
    MPI_File_read_at(fa, off, a, (int)chunk, MPI_BYTE, &st);
    MPI_Get_count(&st, MPI_BYTE, &na);
    MPI_File_read(fb, b, (int)(chunk / 2), MPI_BYTE, &st);
    MPI_Get_count(&st, MPI_BYTE, &nb);
    crc_read_at = crc32_update(crc_read_at, a, (size_t)na);
    crc_mpi_read = crc32_update(crc_mpi_read, b, (size_t)nb);
    crunch(a, (size_t)na);
  }
  MPI_Offset mpi_pos;
  MPI_File_get_position(fb, &mpi_pos);
  MPI_File_close(&fb);
  MPI_File_close(&fa);

  char line[256];
  snprintf(line, sizeof line,
           "rank %d: pread %08x fread %08x read %08x read_at %08x mpi_read %08x "
           "pos stdio %ld mpi %lld\n",
           rank, (unsigned)crc_pread, (unsigned)crc_fread, (unsigned)crc_read,
           (unsigned)crc_read_at, (unsigned)crc_mpi_read, stdio_pos, (long long)mpi_pos);
  print_ranked(line);
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
