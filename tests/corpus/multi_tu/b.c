/* multi_tu, translation unit b: all the reads of the program (fseek + fread and
 * MPI_File_read_at), at offsets computed from struct fields and arguments. */
#include "b.h"

int reader_open(struct reader *r, const char *path, long chunk, long base) {
  r->chunk = chunk;
  r->base = base;
  r->fp = fopen(path, "rb");
  if (r->fp == NULL) return -1;
  return MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &r->fh) ==
                 MPI_SUCCESS
             ? 0
             : -1;
}

long reader_fread_chunk(struct reader *r, long index, void *buf) {
  fseek(r->fp, r->base + index * r->chunk, SEEK_SET);
  return (long)fread(buf, 1, (size_t)r->chunk, r->fp);
}

long reader_mpi_chunk(struct reader *r, long index, void *buf) {
  MPI_Status st;
  int count = 0;
  MPI_File_read_at(r->fh, (MPI_Offset)(r->base + index * r->chunk), buf, (int)r->chunk, MPI_BYTE,
                   &st);
  MPI_Get_count(&st, MPI_BYTE, &count);
  return count;
}

void reader_close(struct reader *r) {
  fclose(r->fp);
  MPI_File_close(&r->fh);
}
