/* Cache coherence 1b: the program changes its file through a call the runtime does not
 * intercept, then writes a small note at the file's end with one it does (pwrite), then
 * reads the changed region (the first half) back through a read-only descriptor. A PT
 * that read the region ahead holds the old bytes; the hidden change altered the file's
 * stamp, but the note write must not make the cache take them for current again ("only
 * our own write changed the file" is false). The hidden change, by <how>:
 *   pwritev, writev      new bytes over the region
 *   ftruncate            ftruncate to 0 and back to the old size (the region reads zeros)
 *   creat                creat() truncates the file (the note, at its old end, brings
 *                        the size back: the region reads zeros)
 *   fputs                fputs + fflush on a stream of its own ("r+") over the region
 *   mpi_set_size         MPI_File_set_size to 0 and back, on an MPI_File of its own
 *                        (the region reads zeros)
 *   fallocate            FALLOC_FL_PUNCH_HOLE over the region (it reads zeros)
 *   copy_file_range      the region copied from <src.bin>
 * Deterministic under mpicc: one rank, every change and write is in program order and
 * a function of the inputs. The program prints the bytes and checksum of the region.
 * usage: coherence_hidden <data.bin> <src.bin> <how>   (data.bin: kSize = 1 MiB,
 *        src.bin: at least 512 KiB) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "hz.h"

enum { kBlock = 16384, kBlocks = 32, kRegion = kBlock * kBlocks, kSize = 2 * kRegion };

static void change(const char *how, const char *path, const char *src_path, int wr) {
  static char text[kRegion];
  for (int i = 0; i < kRegion; i++) text[i] = (i % 64 == 63) ? '\n' : (char)('a' + i % 26);
  struct iovec iov[2] = {{text, kRegion / 2}, {text + kRegion / 2, kRegion / 2}};
  int ok;
  if (strcmp(how, "pwritev") == 0) {
    ok = pwritev(wr, iov, 2, 0) == kRegion;
  } else if (strcmp(how, "writev") == 0) {
    ok = lseek(wr, 0, SEEK_SET) == 0 && writev(wr, iov, 2) == kRegion;
  } else if (strcmp(how, "ftruncate") == 0) {
    ok = ftruncate(wr, 0) == 0 && ftruncate(wr, kSize) == 0;
  } else if (strcmp(how, "creat") == 0) {
    int fd = creat(path, 0644);
    ok = fd >= 0 && close(fd) == 0;
  } else if (strcmp(how, "fputs") == 0) {
    FILE *s = fopen(path, "r+");
    ok = s != NULL;
    for (int i = 0; ok && i < kRegion; i += 64) {
      char line[65];
      memcpy(line, text + i, 64);
      line[64] = '\0';
      ok = fputs(line, s) >= 0;
    }
    ok = ok && fflush(s) == 0 && fclose(s) == 0;
  } else if (strcmp(how, "mpi_set_size") == 0) {
    MPI_File fh;
    ok = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh) == MPI_SUCCESS &&
         MPI_File_set_size(fh, 0) == MPI_SUCCESS && MPI_File_set_size(fh, kSize) == MPI_SUCCESS &&
         MPI_File_close(&fh) == MPI_SUCCESS;
  } else if (strcmp(how, "fallocate") == 0) {
    ok = fallocate(wr, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, kRegion) == 0;
  } else if (strcmp(how, "copy_file_range") == 0) {
    int src = open(src_path, O_RDONLY);
    loff_t in = 0, out = 0;
    ssize_t n = 0, got;
    while (src >= 0 && n < kRegion && (got = copy_file_range(src, &in, wr, &out, kRegion - n, 0)) > 0)
      n += got;
    ok = src >= 0 && n == kRegion && close(src) == 0;
  } else {
    fprintf(stderr, "unknown change %s\n", how);
    ok = 0;
  }
  if (!ok) MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 4) MPI_Abort(MPI_COMM_WORLD, 2);
  const char *how = argv[3];
  int rd = open(argv[1], O_RDONLY);
  int wr = open(argv[1], O_WRONLY);
  if (rd < 0 || wr < 0) MPI_Abort(MPI_COMM_WORLD, 1);

  /* The MT works for a while first: the PT, which does not run this, reads the region
   * ahead meanwhile. */
  struct timespec pause = {0, 200 * 1000000L};
  nanosleep(&pause, NULL);
  change(how, argv[1], argv[2], wr);
  char note[64];
  memset(note, 0, sizeof note);
  snprintf(note, sizeof note, "changed by %s\n", how);
  if (pwrite(wr, note, sizeof note, kSize - 64) != (ssize_t)sizeof note)
    MPI_Abort(MPI_COMM_WORLD, 1);

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
  close(wr);
  printf("%s: read %ld bytes of the region, sum %016llx\n", how, bytes, (unsigned long long)h);
  MPI_Finalize();
  return 0;
}
