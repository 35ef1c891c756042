/* priority.c as ppios-cc turns it into its prefetching build (by hand until the
 * transformer exists). */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "ppios/ppios.h"

#define LARGE_CHUNK (4u << 20)

struct pt_ctx {
  const char *small, *large;
  size_t piece;
};

static void prefetch_thread(void *arg) {
  struct pt_ctx *c = arg;
  ppios_seq_t seq = 0;
  int fd = ppios_pt_open(c->small, O_RDONLY);
  /* The small file's reads are left to the MT (as if they could not be prefetched), so
   * the PT goes on to the large file while the MT reads the small one. */
  struct stat st;
  fstat(fd, &st);
  seq += (ppios_seq_t)((st.st_size + (off_t)c->piece - 1) / (off_t)c->piece) + 1;
  ppios_pt_close(fd);
  fd = ppios_pt_open(c->large, O_RDONLY);
  fstat(fd, &st);
  for (off_t off = 0; off < st.st_size; off += LARGE_CHUNK)
    ppios_prefetch_pread(fd, LARGE_CHUNK, off, ++seq, 0, NULL);
  ppios_pt_close(fd);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *small = argv[1], *large = argv[2];
  size_t piece = (size_t)atol(argv[3]);
  int rounds = atoi(argv[4]);
  {
    struct pt_ctx ctx = {small, large, piece};
    ppios_pt_start(prefetch_thread, &ctx, sizeof ctx);
  }
  char *buf = malloc(LARGE_CHUNK);
  uint64_t h = FNV_START, work = 0;
  int fd = ppios_open(small, O_RDONLY);
  ssize_t n;
  while ((n = ppios_read(fd, buf, piece)) > 0) {
    h = fnv1a(h, buf, (size_t)n);
    work += busy_work(buf, (size_t)n, rounds);
  }
  ppios_close(fd);
  fd = ppios_open(large, O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  for (off_t off = 0; off < st.st_size; off += LARGE_CHUNK) {
    n = ppios_pread(fd, buf, LARGE_CHUNK, off);
    h = fnv1a(h, buf, (size_t)n);
  }
  ppios_close(fd);
  printf("checksum %016llx work %d\n", (unsigned long long)h, work != 0);
  free(buf);
  ppios_MPI_Finalize();
  return 0;
}
