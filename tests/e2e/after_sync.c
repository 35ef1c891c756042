/* Data-dependent reads of an index another rank writes before a barrier: rank 0 creates
 * the index empty, the last rank fills it, a barrier, then every rank reads the index and
 * the records it points to.
 * usage: after_sync <data> <record-bytes> <records> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#ifndef START_PT
#define START_PT(c) ((void)0)
#endif

struct after_sync {
  const char *data_path;
  size_t record, span;
  int records, rank, writer;
};

static uint32_t offset_of(int i) { return (uint32_t)i * 2654435761u; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  struct after_sync c = {argv[1], (size_t)atol(argv[2]), 0, atoi(argv[3]), rank, nprocs - 1};
  struct stat st;
  stat(c.data_path, &st);
  c.span = (size_t)st.st_size - c.record;
  if (rank == 0) close(open("index.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644));
  MPI_Barrier(MPI_COMM_WORLD);
  START_PT(&c);
  uint32_t *index = malloc((size_t)c.records * sizeof *index);
  if (rank == c.writer) {
    usleep(200000);  /* long after every PT started */
    for (int i = 0; i < c.records; ++i) index[i] = offset_of(i);
    int fw = open("index.bin", O_WRONLY);
    pwrite(fw, index, (size_t)c.records * sizeof *index, 0);
    close(fw);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int fi = open("index.bin", O_RDONLY), fd = open(c.data_path, O_RDONLY);
  ssize_t got = pread(fi, index, (size_t)c.records * sizeof *index, 0);
  char *buf = malloc(c.record);
  uint64_t h = FNV_START;
  for (int i = 0; i < c.records; ++i) {
    ssize_t n = pread(fd, buf, c.record, (off_t)(index[i] % c.span));
    h = fnv1a(h, buf, (size_t)n);
    h ^= busy_work(buf, (size_t)n, 4);
  }
  close(fi);
  close(fd);
  char line[128];
  snprintf(line, sizeof line, "rank %d: index %zd sum %016llx\n", rank, got, (unsigned long long)h);
  print_in_rank_order(line);
  free(buf);
  free(index);
  MPI_Finalize();
  return 0;
}
