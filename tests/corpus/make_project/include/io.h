/* make_project: input access. */
#ifndef HISTO_IO_H
#define HISTO_IO_H

#include <mpi.h>

struct blocks {
  int fd;
  long block_bytes;
};

int blocks_open(struct blocks *b, const char *path, long block_bytes);
long blocks_count(const struct blocks *b);
/* Block `index` with pread; returns the bytes read. */
long blocks_read(struct blocks *b, long index, unsigned char *buf);
void blocks_close(struct blocks *b);

/* An MPI file read sequentially from `start`: MPI_File_seek, then MPI_File_read. */
int stream_open(MPI_File *fh, const char *path, MPI_Offset start);
long stream_next(MPI_File fh, unsigned char *buf, int bytes);

#endif
