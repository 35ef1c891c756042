/* Calls whose results are errors or edge cases; prints every return value and errno.
 * usage: errors <input> (a regular file of at least 100 bytes) */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"

#define SHOW(what, expr)                                              \
  do {                                                                \
    errno = 0;                                                        \
    long long r_ = (long long)(expr);                                 \
    printf("%-24s -> %lld errno=%d\n", what, r_, errno);             \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *path = argv[1];
  char buf[256];
  SHOW("read bad fd", read(999, buf, 10));
  SHOW("pread bad fd", pread(999, buf, 10, 0));
  SHOW("read bad fd, 0 bytes", read(999, buf, 0));
  SHOW("pread bad fd, 0 bytes", pread(999, buf, 0, 0));
  int dir = open(".", O_RDONLY);
  SHOW("read directory", read(dir, buf, 10));
  SHOW("pread directory", pread(dir, buf, 10, 0));
  close(dir);
  int fd = open(path, O_RDONLY);
  SHOW("pread negative offset", pread(fd, buf, 10, -5));
  SHOW("pread zero bytes", pread(fd, buf, 0, 10));
  errno = 4242;
  ssize_t ok = pread(fd, buf, 10, 0);
  printf("%-24s -> %zd errno=%d first=%d\n", "errno kept on success", ok, errno, buf[0]);
  SHOW("lseek to end-4", lseek(fd, -4, SEEK_END));
  SHOW("read across EOF", read(fd, buf, 100));
  SHOW("read at EOF", read(fd, buf, 100));
  SHOW("position after EOF", lseek(fd, 0, SEEK_CUR));
  close(fd);
  int wfd = open("errors-out.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  SHOW("read write-only fd", read(wfd, buf, 10));
  SHOW("write", write(wfd, "hello", 5));
  close(wfd);
  FILE *w = fopen("errors-out2.dat", "w");
  SHOW("fread write-only", fread(buf, 1, 10, w));
  printf("%-24s -> %d\n", "ferror", ferror(w) != 0);
  fclose(w);
  FILE *r = fopen(path, "r");
  fseek(r, -3, SEEK_END);
  SHOW("fread across EOF", fread(buf, 2, 4, r));
  printf("%-24s -> eof=%d pos=%ld\n", "after", feof(r) != 0, ftell(r));
  SHOW("fread at EOF again", fread(buf, 1, 4, r));
  clearerr(r);
  fseek(r, 0, SEEK_SET);
  SHOW("fread from start", fread(buf, 1, 50, r));
  printf("%-24s -> %ld\n", "ftell", ftell(r));
  SHOW("fread zero size", fread(buf, 0, 5, r));
  fclose(r);
  MPI_File fh;
  MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  MPI_Offset size;
  MPI_File_get_size(fh, &size);
  MPI_Status st;
  int count = -7;
  int rc = MPI_File_read_at(fh, size - 6, buf, 3, MPI_INT, &st);
  MPI_Get_count(&st, MPI_BYTE, &count);
  printf("%-24s -> rc=%d bytes=%d\n", "MPI read_at across EOF", rc, count);
  rc = MPI_File_read_at(fh, size + 100, buf, 3, MPI_INT, &st);
  MPI_Get_count(&st, MPI_INT, &count);
  printf("%-24s -> rc=%d count=%d\n", "MPI read_at past EOF", rc, count);
  MPI_File_close(&fh);
  MPI_Finalize();
  return 0;
}
