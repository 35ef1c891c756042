/* linesum: per-rank statistics of a text file's lines. */
#ifndef SCAN_H
#define SCAN_H

#include <stdio.h>

#define CHUNK 2048

struct stats {
  long lines, bytes, digits;
};

void scan_chunk(const char *buf, size_t n, struct stats *s);

#endif
