/* raw.c as ppios-cc turns it into its prefetching build (by hand until the transformer
 * exists). The first read of each block depends on the program's own earlier write, so
 * its prefetch is marked PPIOS_PF_AFTER_WRITE and runs in a waiting thread. The read-back
 * after the rewrite is prefetched WITHOUT the mark on purpose: the runtime must still
 * never serve the bytes from before the rewrite. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"
#include "ppios/ppios.h"

static void fill(char *buf, size_t n, uint64_t h, size_t block) {
  for (size_t i = 0; i < n; ++i) buf[i] = (char)((h >> (8 * (i % 8))) + block + i);
}

struct pt_ctx {
  size_t blocks, bs;
  char name[64], name2[64];
};

static void prefetch_thread(void *arg) {
  struct pt_ctx *c = arg;
  ppios_seq_t seq = 0;
  int fd = ppios_pt_open(c->name, O_RDWR | O_CREAT | O_TRUNC);
  seq += c->blocks;  /* the writes of the first loop */
  for (size_t i = 0; i < c->blocks; ++i) {
    ppios_prefetch_pread(fd, c->bs, (off_t)(i * c->bs), ++seq, PPIOS_PF_AFTER_WRITE, NULL);
    ++seq;  /* the rewrite */
    ppios_prefetch_pread(fd, c->bs, (off_t)(i * c->bs), ++seq, 0, NULL);
  }
  ppios_pt_close(fd);
  seq += c->blocks;  /* fwrite */
  FILE *fp = ppios_pt_fopen(c->name2, "w+");
  if (fp != NULL) {
    for (size_t i = 0; i < c->blocks; ++i) ppios_prefetch_fread(1, c->bs, fp, ++seq, PPIOS_PF_AFTER_WRITE, NULL);
    ppios_pt_fclose(fp);
  }
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

  int fd = ppios_open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
  {  /* the PT starts once the file it reads exists */
    struct pt_ctx ctx = {blocks, bs, "", ""};
    memcpy(ctx.name, name, sizeof name);
    memcpy(ctx.name2, name2, sizeof name2);
    ppios_pt_start(prefetch_thread, &ctx, sizeof ctx);
  }
  for (size_t i = 0; i < blocks; ++i) {
    fill(buf, bs, h, i);
    ppios_pwrite(fd, buf, bs, (off_t)(i * bs));
  }
  for (size_t i = 0; i < blocks; ++i) {
    ssize_t n = ppios_pread(fd, buf, bs, (off_t)(i * bs));
    h = fnv1a(h, buf, (size_t)n);
    fill(buf, bs, h, i);
    ppios_pwrite(fd, buf, bs, (off_t)(i * bs));
    n = ppios_pread(fd, back, bs, (off_t)(i * bs));
    h = fnv1a(h, back, (size_t)n);
  }
  ppios_close(fd);

  FILE *fp = ppios_fopen(name2, "w+");
  for (size_t i = 0; i < blocks; ++i) {
    fill(buf, bs, h, i);
    ppios_fwrite(buf, 1, bs, fp);
  }
  ppios_fseek(fp, 0, SEEK_SET);
  for (size_t i = 0; i < blocks; ++i) {
    size_t got = ppios_fread(back, 1, bs, fp);
    h = fnv1a(h, back, got);
  }
  ppios_fclose(fp);

  char line[64];
  snprintf(line, sizeof line, "rank %d: %016llx\n", rank, (unsigned long long)h);
  print_in_rank_order(line);
  free(buf);
  free(back);
  ppios_MPI_Finalize();
  return 0;
}
