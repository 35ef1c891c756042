/* Block reader of the blocksum project. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blocksum.h"

int reader_open(struct reader *r, const char *path) {
  struct stat st;
  r->fd = open(path, O_RDONLY);
  if (r->fd < 0 || fstat(r->fd, &st) != 0) return -1;
  r->nblocks = (long)((st.st_size + BLOCK - 1) / BLOCK);
  return 0;
}

ssize_t reader_block(struct reader *r, long i, unsigned char *buf) {
  return pread(r->fd, buf, BLOCK, (off_t)i * BLOCK);
}

void reader_close(struct reader *r) { close(r->fd); }

uint64_t checksum(uint64_t h, const unsigned char *p, size_t n) {
  size_t i;
  if (h == 0) h = 1469598103934665603ULL;
  for (i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}
