/* make_project: every read of the program (pread; MPI_File_seek + MPI_File_read). */
#include "io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int blocks_open(struct blocks *b, const char *path, long block_bytes) {
  b->block_bytes = block_bytes;
  b->fd = open(path, O_RDONLY);
  return b->fd < 0 ? -1 : 0;
}

long blocks_count(const struct blocks *b) {
  struct stat st;
  if (fstat(b->fd, &st) != 0) return 0;
  return (long)st.st_size / b->block_bytes;
}

long blocks_read(struct blocks *b, long index, unsigned char *buf) {
  return (long)pread(b->fd, buf, (size_t)b->block_bytes, (off_t)(index * b->block_bytes));
}

void blocks_close(struct blocks *b) { close(b->fd); }

int stream_open(MPI_File *fh, const char *path, MPI_Offset start) {
  if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, fh) != MPI_SUCCESS)
    return -1;
  return MPI_File_seek(*fh, start, MPI_SEEK_SET) == MPI_SUCCESS ? 0 : -1;
}

long stream_next(MPI_File fh, unsigned char *buf, int bytes) {
  MPI_Status st;
  int count = 0;
  MPI_File_read(fh, buf, bytes, MPI_BYTE, &st);
  MPI_Get_count(&st, MPI_BYTE, &count);
  return count;
}
