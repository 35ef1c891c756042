/* indexed.c as ppios-cc turns it into its prefetching build (by hand until the
 * transformer exists): the PT reads the index itself (ppios_prefetch_pread_copy, which
 * also leaves the index bytes for the MT) and prefetches the records it points to. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "ppios/ppios.h"

#define BATCH 64

struct pt_ctx {
  const char *index_path, *data_path;
  size_t record, span;
  int batches, rank;
};

static void prefetch_thread(void *arg) {
  struct pt_ctx *c = arg;
  ppios_seq_t seq = 0;
  int fi = ppios_pt_open(c->index_path, O_RDONLY), fd = ppios_pt_open(c->data_path, O_RDONLY);
  uint32_t idx[BATCH];
  for (int b = c->rank; b < c->batches; b += 2) {
    ppios_prefetch_pread_copy(fi, idx, sizeof idx, (off_t)(b * sizeof idx), ++seq, 0, NULL);
    for (int j = 0; j < BATCH; ++j)
      ppios_prefetch_pread(fd, c->record, (off_t)(idx[j] % c->span), ++seq, 0, NULL);
  }
  ppios_pt_close(fi);
  ppios_pt_close(fd);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t record = (size_t)atol(argv[3]);
  int batches = atoi(argv[4]);
  int fi = ppios_open(argv[1], O_RDONLY), fd = ppios_open(argv[2], O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  size_t span = (size_t)st.st_size - record;
  {
    struct pt_ctx ctx = {argv[1], argv[2], record, span, batches, rank};
    ppios_pt_start(prefetch_thread, &ctx, sizeof ctx);
  }
  char *buf = malloc(record);
  uint32_t idx[BATCH];
  uint64_t h = FNV_START;
  for (int b = rank; b < batches; b += 2) {
    ppios_pread(fi, idx, sizeof idx, (off_t)(b * sizeof idx));
    for (int j = 0; j < BATCH; ++j) {
      ssize_t n = ppios_pread(fd, buf, record, (off_t)(idx[j] % span));
      h = fnv1a(h, buf, (size_t)n);
      h ^= busy_work(buf, (size_t)n, 2);
    }
  }
  char line[64];
  snprintf(line, sizeof line, "rank %d: %016llx\n", rank, (unsigned long long)h);
  print_in_rank_order(line);
  free(buf);
  ppios_MPI_Finalize();
  return 0;
}
