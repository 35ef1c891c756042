/* Cache coherence 3: a prefetch that runs while a large write to the file is in
 * progress. Each round, after a barrier, rank 0 writes 8 MiB (one pwrite) over one of
 * two places of the shared file, and rank 1 writes a small note of its own into the
 * file's tail; after a second barrier rank 1 reads the 8 MiB back. Rank 1 reads through
 * a descriptor it also writes, so ppios-cc leaves its read to a waiting thread, which
 * starts it as soon as rank 1's note is written: while rank 0's write may still be
 * copying its bytes in. The kernel gives the file its new mtime when a write starts, so
 * such a prefetch sees the stamp the file keeps after the write, with bytes partly from
 * before it (most often the first pages old, the rest new); they must not be served.
 * Deterministic under mpicc: every byte written is a function of the round and offset,
 * the read of a round is ordered after its write by the barrier, and only rank 1's line
 * (how many read-backs were not the write, and a checksum of them) is printed.
 * usage: coherence_write_race <data.bin>   (at least 2 * 8 MiB + 4 KiB bytes) */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

enum { kChunk = 8 << 20, kPlaces = 2, kRounds = 16, kNotes = kPlaces * kChunk };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2 || nprocs != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int fd = open(argv[1], O_RDWR);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  static unsigned char out[kChunk], back[kChunk];
  uint64_t h = 0;
  int wrong = 0, first_wrong = -1;
  for (int r = 0; r < kRounds; r++) {
    const off_t at = (off_t)(r % kPlaces) * kChunk;
    for (int p = 0; p < kChunk / 4096; p++) memset(out + p * 4096, (r * 13 + p) & 0xff, 4096);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      if (pwrite(fd, out, kChunk, at) != kChunk) MPI_Abort(MPI_COMM_WORLD, 1);
    } else {
      char note[64];
      memset(note, 0, sizeof note);
      snprintf(note, sizeof note, "rank 1 waits for round %d\n", r);
      if (pwrite(fd, note, sizeof note, kNotes + (off_t)(r % 64) * 64) != (ssize_t)sizeof note)
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
      ssize_t n = pread(fd, back, kChunk, at);
      h = hz_sum(h, back, n > 0 ? (size_t)n : 0);
      if (n != kChunk || memcmp(out, back, kChunk) != 0) {
        if (wrong++ == 0) first_wrong = r;
      }
    }
  }
  close(fd);
  char line[160];
  line[0] = '\0';
  if (rank == 1)
    snprintf(line, sizeof line, "rank 1: %d of %d read-backs differ from the write (first: %d), sum %016llx\n",
             wrong, kRounds, first_wrong, (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
