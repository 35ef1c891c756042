#include "scan.h"

void scan_chunk(const char *buf, size_t n, struct stats *s) {
  size_t i;
  for (i = 0; i < n; i++) {
    if (buf[i] == '\n') s->lines++;
    if (buf[i] >= '0' && buf[i] <= '9') s->digits++;
  }
  s->bytes += (long)n;
}
