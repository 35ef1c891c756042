/* errors.c as ppios-cc turns it into its prefetching build (by hand until the transformer
 * exists); the PT pre-executes every read, including those that fail. */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"
#include "ppios/ppios.h"

#define SHOW(what, expr)                                              \
  do {                                                                \
    errno = 0;                                                        \
    long long r_ = (long long)(expr);                                 \
    printf("%-24s -> %lld errno=%d\n", what, r_, errno);             \
  } while (0)

struct pt_ctx {
  const char *path;
};

static void prefetch_thread(void *arg) {
  struct pt_ctx *c = arg;
  ppios_seq_t seq = 0;
  char unused[1];
  (void)unused;
  ppios_prefetch_read(999, 10, ++seq, 0, NULL);
  ppios_prefetch_pread(999, 10, 0, ++seq, 0, NULL);
  ppios_prefetch_read(999, 0, ++seq, 0, NULL);
  ppios_prefetch_pread(999, 0, 0, ++seq, 0, NULL);
  int dir = ppios_pt_open(".", O_RDONLY);
  ppios_prefetch_read(dir, 10, ++seq, 0, NULL);
  ppios_prefetch_pread(dir, 10, 0, ++seq, 0, NULL);
  ppios_pt_close(dir);
  int fd = ppios_pt_open(c->path, O_RDONLY);
  ppios_prefetch_pread(fd, 10, -5, ++seq, 0, NULL);
  ppios_prefetch_pread(fd, 0, 10, ++seq, 0, NULL);
  ppios_prefetch_pread(fd, 10, 0, ++seq, 0, NULL);
  lseek(fd, -4, SEEK_END);
  ppios_prefetch_read(fd, 100, ++seq, 0, NULL);
  ppios_prefetch_read(fd, 100, ++seq, 0, NULL);
  ppios_pt_close(fd);
  seq += 2;  /* read of the write-only fd (not prefetchable), write */
  ++seq;     /* fread of the write-only stream */
  FILE *r = ppios_pt_fopen(c->path, "r");
  fseek(r, -3, SEEK_END);
  ppios_prefetch_fread(2, 4, r, ++seq, 0, NULL);
  ppios_prefetch_fread(1, 4, r, ++seq, 0, NULL);
  fseek(r, 0, SEEK_SET);
  ppios_prefetch_fread(1, 50, r, ++seq, 0, NULL);
  ppios_prefetch_fread(0, 5, r, ++seq, 0, NULL);
  ppios_pt_fclose(r);
  ppios_pt_mpi_file fh;
  ppios_pt_MPI_File_open(c->path, MPI_MODE_RDONLY, &fh);
  MPI_Offset size;
  ppios_pt_MPI_File_get_size(fh, &size);
  ppios_prefetch_MPI_File_read_at(fh, size - 6, 3, MPI_INT, MPI_STATUS_IGNORE, ++seq, 0, NULL);
  ppios_prefetch_MPI_File_read_at(fh, size + 100, 3, MPI_INT, MPI_STATUS_IGNORE, ++seq, 0, NULL);
  ppios_pt_MPI_File_close(&fh);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *path = argv[1];
  {
    struct pt_ctx ctx = {path};
    ppios_pt_start(prefetch_thread, &ctx, sizeof ctx);
  }
  char buf[256];
  SHOW("read bad fd", ppios_read(999, buf, 10));
  SHOW("pread bad fd", ppios_pread(999, buf, 10, 0));
  SHOW("read bad fd, 0 bytes", ppios_read(999, buf, 0));
  SHOW("pread bad fd, 0 bytes", ppios_pread(999, buf, 0, 0));
  int dir = ppios_open(".", O_RDONLY);
  SHOW("read directory", ppios_read(dir, buf, 10));
  SHOW("pread directory", ppios_pread(dir, buf, 10, 0));
  ppios_close(dir);
  int fd = ppios_open(path, O_RDONLY);
  SHOW("pread negative offset", ppios_pread(fd, buf, 10, -5));
  SHOW("pread zero bytes", ppios_pread(fd, buf, 0, 10));
  errno = 4242;
  ssize_t ok = ppios_pread(fd, buf, 10, 0);
  printf("%-24s -> %zd errno=%d first=%d\n", "errno kept on success", ok, errno, buf[0]);
  SHOW("lseek to end-4", ppios_lseek(fd, -4, SEEK_END));
  SHOW("read across EOF", ppios_read(fd, buf, 100));
  SHOW("read at EOF", ppios_read(fd, buf, 100));
  SHOW("position after EOF", ppios_lseek(fd, 0, SEEK_CUR));
  ppios_close(fd);
  int wfd = ppios_open("errors-out.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  SHOW("read write-only fd", ppios_read(wfd, buf, 10));
  SHOW("write", ppios_write(wfd, "hello", 5));
  ppios_close(wfd);
  FILE *w = ppios_fopen("errors-out2.dat", "w");
  SHOW("fread write-only", ppios_fread(buf, 1, 10, w));
  printf("%-24s -> %d\n", "ferror", ferror(w) != 0);
  ppios_fclose(w);
  FILE *r = ppios_fopen(path, "r");
  ppios_fseek(r, -3, SEEK_END);
  SHOW("fread across EOF", ppios_fread(buf, 2, 4, r));
  printf("%-24s -> eof=%d pos=%ld\n", "after", feof(r) != 0, ppios_ftell(r));
  SHOW("fread at EOF again", ppios_fread(buf, 1, 4, r));
  clearerr(r);
  ppios_fseek(r, 0, SEEK_SET);
  SHOW("fread from start", ppios_fread(buf, 1, 50, r));
  printf("%-24s -> %ld\n", "ftell", ppios_ftell(r));
  SHOW("fread zero size", ppios_fread(buf, 0, 5, r));
  ppios_fclose(r);
  MPI_File fh;
  ppios_MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  MPI_Offset size;
  MPI_File_get_size(fh, &size);
  MPI_Status st;
  int count = -7;
  int rc = ppios_MPI_File_read_at(fh, size - 6, buf, 3, MPI_INT, &st);
  MPI_Get_count(&st, MPI_BYTE, &count);
  printf("%-24s -> rc=%d bytes=%d\n", "MPI read_at across EOF", rc, count);
  rc = ppios_MPI_File_read_at(fh, size + 100, buf, 3, MPI_INT, &st);
  MPI_Get_count(&st, MPI_INT, &count);
  printf("%-24s -> rc=%d count=%d\n", "MPI read_at past EOF", rc, count);
  ppios_MPI_File_close(&fh);
  ppios_MPI_Finalize();
  return 0;
}
