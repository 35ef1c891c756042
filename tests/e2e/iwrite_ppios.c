/* iwrite.c with a prefetch thread, as ppios-cc builds programs: the MT's calls are the
 * program's own (linked with -Wl,--wrap for interpose.def), the PT is written by hand.
 * On rank 0 it prefetches each of the MT's two reads when the MT asks, and the MT reads
 * only once it has: the first (rank 1's handle open, after its MPI_File_iwrite_at
 * completed) must not be served, the second (after the close) must be. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ppios/ppios.h"

struct pt_ctx {
  char path[4096];
  size_t bytes;
  ppios_seq_t seq;
};

static atomic_int g_asked, g_prefetched;  /* the last read the MT asked for, the PT prefetched */

/* A handle of its own per read: the PT fetches a block once per handle. */
static void prefetch_thread(void *arg) {
  const struct pt_ctx *c = arg;
  for (int r = 1; r <= 2; ++r) {
    while (atomic_load(&g_asked) < r) {
      ppios_pt_poll();
      usleep(1000);
    }
    int fd = ppios_pt_open(c->path, O_RDONLY);
    ppios_prefetch_pread(fd, c->bytes, 0, c->seq + (ppios_seq_t)r, 0, NULL);
    ppios_pt_close(fd);
    atomic_store(&g_prefetched, r);
  }
}

static void start_pt(const char *path, size_t bytes) {
  struct pt_ctx ctx;
  snprintf(ctx.path, sizeof ctx.path, "%s", path);
  ctx.bytes = bytes;
  ctx.seq = ppios_mt_seq();
  ppios_pt_start(prefetch_thread, &ctx, sizeof ctx);
}

/* At most 60 s: on a loaded machine the PT may be slow to run. In mode off there is no PT. */
static void prefetch(int r) {
  const char *mode = getenv("PPIOS_MODE");
  if (mode != NULL && strcmp(mode, "off") == 0) return;
  atomic_store(&g_asked, r);
  for (int i = 0; i < 60000 && atomic_load(&g_prefetched) < r; ++i) usleep(1000);
}

#define START_PT(path, bytes) start_pt(path, bytes)
#define PREFETCH(r) prefetch(r)
#include "iwrite.c"
