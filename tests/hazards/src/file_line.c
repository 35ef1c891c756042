/* Case 8: __FILE__, __LINE__, assert messages and an error macro that stringifies the
 * call. Compiled as src/file_line.c (so __FILE__ is "src/file_line.c"); one MPI-IO read
 * and one pread fail on purpose (a null file handle, a closed descriptor), and an assert
 * on the data fails at the end (abort).
 * usage: file_line <data.bin> */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define CHECK(call)                                                            \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != MPI_SUCCESS) {                                                  \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);        \
    }                                                                          \
  } while (0)

#define CHECK_IO(call)                                                         \
  do {                                                                         \
    ssize_t rc_ = (call);                                                      \
    if (rc_ < 0) {                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,     \
              strerror(errno));                                                \
    }                                                                          \
  } while (0)

#define TRACE(what) printf("[%s:%d %s] %s\n", __FILE__, __LINE__, __func__, what)

static uint64_t read_block(MPI_File fh, int fd, long i, char *buf, int bs) {
  MPI_Status st;
  TRACE("read_block");
  CHECK(MPI_File_read_at(fh, (MPI_Offset)i * bs, buf, bs, MPI_BYTE, &st));
  uint64_t h = hz_sum(0, buf, (size_t)bs);
  CHECK_IO(pread(fd, buf, (size_t)bs, (off_t)i * bs + 1));
  return hz_sum(h, buf, (size_t)bs);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
  int fd = open(argv[1], O_RDONLY);
  char buf[512];
  uint64_t h = 0;
  if (rank == 0) TRACE("main");
  for (long i = 0; i < 4; i++) {
    if (rank == 0) {
      h ^= read_block(fh, fd, i, buf, (int)sizeof buf);
    } else {
      MPI_Status st;
      CHECK(MPI_File_read_at(fh, i * 512, buf, 512, MPI_BYTE, &st));
      CHECK_IO(pread(fd, buf, sizeof buf, i * 512 + 3));
      h ^= hz_sum(0, buf, sizeof buf);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_Status st;
    MPI_File none = MPI_FILE_NULL;
    int closed = dup(fd);
    close(closed);
    CHECK(MPI_File_read_at(none, 0, buf, 16, MPI_BYTE, &st));
    CHECK_IO(pread(closed, buf, 16, 0));
    printf("%s:%d: rank %d sum %016llx\n", __FILE__, __LINE__, rank, (unsigned long long)h);
    fflush(stdout);
    fflush(stderr);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_close(&fh);
  close(fd);
  if (rank == 0) {
    assert((h & 0xf) == 0x10 && "checksum has a fifth nibble bit");
  }
  MPI_Finalize();
  return 0;
}
