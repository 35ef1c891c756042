/* Shared definitions of the blocksum project. */
#ifndef BLOCKSUM_H
#define BLOCKSUM_H

#include <stdint.h>
#include <sys/types.h>

#define BLOCK 4096

struct reader {
  int fd;
  long nblocks;
};

int reader_open(struct reader *r, const char *path);
ssize_t reader_block(struct reader *r, long i, unsigned char *buf);
void reader_close(struct reader *r);
uint64_t checksum(uint64_t h, const unsigned char *p, size_t n);

#endif
