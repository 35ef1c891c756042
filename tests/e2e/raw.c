/* Writes blocks and reads them back (read after write), rewriting each block from what
 * was read, so that one stale byte changes every later checksum and the output files.
 * usage: raw <blocks> <block-bytes> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"

static void fill(char *buf, size_t n, uint64_t h, size_t block) {
  for (size_t i = 0; i < n; ++i) buf[i] = (char)((h >> (8 * (i % 8))) + block + i);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t blocks = (size_t)atol(argv[1]), bs = (size_t)atol(argv[2]);
  char name[64], name2[64];
  snprintf(name, sizeof name, "raw.%d.dat", rank);
  snprintf(name2, sizeof name2, "raw-stdio.%d.dat", rank);
  char *buf = malloc(bs), *back = malloc(bs);
  uint64_t h = FNV_START + (uint64_t)rank;

  int fd = open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
  for (size_t i = 0; i < blocks; ++i) {
    fill(buf, bs, h, i);
    pwrite(fd, buf, bs, (off_t)(i * bs));
  }
  for (size_t i = 0; i < blocks; ++i) {
    ssize_t n = pread(fd, buf, bs, (off_t)(i * bs));
    h = fnv1a(h, buf, (size_t)n);
    fill(buf, bs, h, i);
    pwrite(fd, buf, bs, (off_t)(i * bs));
    n = pread(fd, back, bs, (off_t)(i * bs));
    h = fnv1a(h, back, (size_t)n);
  }
  close(fd);

  FILE *fp = fopen(name2, "w+");
  for (size_t i = 0; i < blocks; ++i) {
    fill(buf, bs, h, i);
    fwrite(buf, 1, bs, fp);
  }
  fseek(fp, 0, SEEK_SET);
  for (size_t i = 0; i < blocks; ++i) {
    size_t got = fread(back, 1, bs, fp);
    h = fnv1a(h, back, got);
  }
  fclose(fp);

  char line[64];
  snprintf(line, sizeof line, "rank %d: %016llx\n", rank, (unsigned long long)h);
  print_in_rank_order(line);
  free(buf);
  free(back);
  MPI_Finalize();
  return 0;
}
