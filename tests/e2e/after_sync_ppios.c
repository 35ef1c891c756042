/* after_sync.c with a PT (wrapped build: the MT's calls are the program's own). The PT
 * reads the index itself with PPIOS_PF_AFTER_SYNC: it waits until the MT has started that
 * read, so it sees what the last rank wrote before the barrier, and prefetches the
 * records the index points to. Without the flag it would read the empty index. */
#include <fcntl.h>
#include <unistd.h>

#include "ppios/ppios.h"

struct after_sync;
static void start_pt(struct after_sync *c);
#define START_PT(c) start_pt(c)
#include "after_sync.c"

static void prefetch_thread(void *arg) {
  struct after_sync *c = arg;
  ppios_seq_t seq = ppios_mt_seq();
  if (c->rank == c->writer) ++seq;  /* its pwrite of the index */
  int fi = ppios_pt_open("index.bin", O_RDONLY), fd = ppios_pt_open(c->data_path, O_RDONLY);
  size_t bytes = (size_t)c->records * sizeof(uint32_t);
  uint32_t *index = ppios_pt_malloc(bytes);
  ssize_t got = ppios_prefetch_pread_copy(fi, index, bytes, 0, ++seq, PPIOS_PF_AFTER_SYNC, NULL);
  for (int i = 0; (size_t)i < (got > 0 ? (size_t)got : 0) / sizeof(uint32_t); ++i) {
    ppios_pt_poll();
    ppios_prefetch_pread(fd, c->record, (off_t)(index[i] % c->span), ++seq, 0, NULL);
  }
  ppios_pt_free(index);
  ppios_pt_close(fi);
  ppios_pt_close(fd);
}

static void start_pt(struct after_sync *c) { ppios_pt_start(prefetch_thread, c, sizeof *c); }
