/* multi_tu: the reader module (b.c), used by the driver loop in a.c. */
#ifndef MULTI_TU_B_H
#define MULTI_TU_B_H

#include <mpi.h>
#include <stdio.h>

struct reader {
  FILE *fp;      /* the file through stdio */
  MPI_File fh;   /* the same file through MPI-IO */
  long chunk;    /* bytes per chunk */
  long base;     /* where this rank's part starts */
};

int reader_open(struct reader *r, const char *path, long chunk, long base);
/* Chunk `index` of the rank's part: fseek + fread. Returns the bytes read. */
long reader_fread_chunk(struct reader *r, long index, void *buf);
/* Chunk `index` of the rank's part: MPI_File_read_at. Returns the bytes read. */
long reader_mpi_chunk(struct reader *r, long index, void *buf);
void reader_close(struct reader *r);

#endif
