/* Cache coherence 1a: two ranks exchange blocks through one shared file. Each rank
 * writes its own half of the file (32 pwrites, write-only descriptor), MPI_Barrier,
 * writes a small progress note into the file's tail, then reads the other rank's half
 * through a read-only descriptor: it must see the other rank's new bytes. A PT that read
 * the other half ahead, before the barrier, holds the old bytes. The other rank's writes
 * changed the file's size/mtime/ctime stamp, but so did this rank's own writes (its half,
 * its note) since: an own write must not make the old bytes current again ("only our
 * own write changed the file" is false here).
 * Deterministic under mpicc: every byte written is a function of rank and offset, every
 * read is ordered after the writes by the barrier, and rank 0 prints in rank order.
 * usage: coherence_exchange <shared.bin>   (at least 2 * kHalf + 4096 bytes) */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "hz.h"

enum { kBlock = 16384, kBlocks = 32, kHalf = kBlock * kBlocks };

/* The MT pauses for `ms` milliseconds (no I/O): the PT, which does not run this, reads
 * the other half ahead meanwhile, before either rank writes. */
static void pause_ms(int ms) {
  struct timespec t = {0, ms * 1000000L};
  nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2 || nprocs != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int rd = open(argv[1], O_RDONLY);
  int wr = open(argv[1], O_WRONLY);
  if (rd < 0 || wr < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  const int other = 1 - rank;
  static unsigned char block[kBlock];

  pause_ms(200);
  for (int i = 0; i < kBlocks; i++) {
    for (int j = 0; j < kBlock; j++) block[j] = (unsigned char)(rank * 101 + i * 7 + j);
    if (pwrite(wr, block, kBlock, (off_t)rank * kHalf + (off_t)i * kBlock) != kBlock)
      MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  char note[64];
  memset(note, 0, sizeof note);
  snprintf(note, sizeof note, "rank %d wrote its half\n", rank);
  if (pwrite(wr, note, sizeof note, 2 * (off_t)kHalf + rank * 64) != (ssize_t)sizeof note)
    MPI_Abort(MPI_COMM_WORLD, 1);

  uint64_t h = 0;
  long bytes = 0;
  for (int i = 0; i < kBlocks; i++) {
    ssize_t n = pread(rd, block, kBlock, (off_t)other * kHalf + (off_t)i * kBlock);
    if (n > 0) {
      h = hz_sum(h, block, (size_t)n);
      bytes += n;
    }
  }
  close(rd);
  close(wr);
  char line[128];
  snprintf(line, sizeof line, "rank %d: read %ld bytes of rank %d's half, sum %016llx\n", rank,
           bytes, other, (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
