/* Cache coherence 2: a file rewritten shorter. The program reads a 512 KiB file in 16 KiB
 * blocks through a read-only descriptor, but first rewrites it with 96 KiB of new bytes:
 *   creat          creat() (truncates it: not a call the runtime intercepts) + write()
 *   mpi_set_size   MPI_File_set_size(fh, 0) + MPI_File_write_at
 * Past the new end every read returns 0 bytes. A PT that read the blocks ahead, before
 * the rewrite, holds the old bytes past the new end; the write (which the runtime does
 * see, and which overlaps only the first blocks) must not make them current again.
 * Deterministic under mpicc: one rank, the rewrite comes before the reads in program
 * order; the program prints the bytes read and their checksum.
 * usage: coherence_truncate <data.bin> <how> */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "hz.h"

enum { kBlock = 16384, kBlocks = 32, kNew = 6 * kBlock };

static void rewrite(const char *path, const char *how) {
  static unsigned char fresh[kNew];
  for (int i = 0; i < kNew; i++) fresh[i] = (unsigned char)(i * 31 + 7);
  int ok;
  if (strcmp(how, "creat") == 0) {
    int fd = creat(path, 0644);
    ok = fd >= 0 && write(fd, fresh, kNew) == kNew && close(fd) == 0;
  } else if (strcmp(how, "mpi_set_size") == 0) {
    MPI_File fh;
    ok = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh) == MPI_SUCCESS &&
         MPI_File_set_size(fh, 0) == MPI_SUCCESS &&
         MPI_File_write_at(fh, 0, fresh, kNew, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
         MPI_File_close(&fh) == MPI_SUCCESS;
  } else {
    fprintf(stderr, "unknown rewrite %s\n", how);
    ok = 0;
  }
  if (!ok) MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  int rd = open(argv[1], O_RDONLY);
  if (rd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  /* The MT works for a while first: the PT, which does not run this, reads ahead. */
  struct timespec pause = {0, 200 * 1000000L};
  nanosleep(&pause, NULL);
  rewrite(argv[1], argv[2]);

  static unsigned char block[kBlock];
  uint64_t h = 0;
  long bytes = 0;
  for (int i = 0; i < kBlocks; i++) {
    ssize_t n = pread(rd, block, kBlock, (off_t)i * kBlock);
    if (n > 0) {
      h = hz_sum(h, block, (size_t)n);
      bytes += n;
    }
  }
  close(rd);
  printf("%s: read %ld bytes, sum %016llx\n", argv[2], bytes, (unsigned long long)h);
  MPI_Finalize();
  return 0;
}
