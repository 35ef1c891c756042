/* Cache coherence 5: POSIX record locks. Two ranks increment a counter in a shared file
 * 400 times each, every increment under an fcntl F_SETLKW write lock: lock, pread the
 * counter, pread a 4 KiB block of the file's (never written) data, pwrite the counter
 * plus one, unlock. POSIX releases all of a process's locks on a file when it closes
 * ANY descriptor of that file: a descriptor the runtime opens and closes for its own
 * reads of the file (the PT's, or a copy a waiting or reader thread reads the block
 * through) must not end the program's lock while it holds it, or the other rank gets in
 * between the read and the write of the counter, and an increment is lost.
 * Deterministic under mpicc: with the locks, the values the two ranks read are exactly
 * 0..799 in some order; rank 0 prints their sum (MPI_Reduce) and the largest, and the
 * counter file ends at 800; each rank prints a checksum of the data blocks it read.
 * usage: coherence_locks <counter.bin>   (the counter, 8 bytes, set to 0 by rank 0 at the
 * start, then kBlocks * 4 KiB of data) */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

enum { kIncrements = 400, kBlock = 4096, kBlocks = 64 };

static void lock_counter(int fd, short type, long long at) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 8;
  if (fcntl(fd, type == F_UNLCK ? F_SETLK : F_SETLKW, &fl) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int fd = open(argv[1], O_RDWR);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  const long long at = 0;  /* the counter's offset */
  long long zero = 0;
  if (rank == 0 && pwrite(fd, &zero, sizeof zero, at) != (ssize_t)sizeof zero)
    MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Barrier(MPI_COMM_WORLD);
  static unsigned char block[kBlock];
  uint64_t h = 0;
  long long seen_sum = 0, seen_max = -1;
  for (int i = 0; i < kIncrements; i++) {
    long long c;
    lock_counter(fd, F_WRLCK, at);
    if (pread(fd, &c, sizeof c, at) != (ssize_t)sizeof c) MPI_Abort(MPI_COMM_WORLD, 1);
    if (pread(fd, block, kBlock, 8 + (off_t)(i % kBlocks) * kBlock) != kBlock)
      MPI_Abort(MPI_COMM_WORLD, 1);
    h = hz_sum(h, block, kBlock);
    seen_sum += c;
    if (c > seen_max) seen_max = c;
    c++;
    if (pwrite(fd, &c, sizeof c, at) != (ssize_t)sizeof c) MPI_Abort(MPI_COMM_WORLD, 1);
    lock_counter(fd, F_UNLCK, at);
  }
  close(fd);
  long long sum = 0, max = 0;
  MPI_Reduce(&seen_sum, &sum, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&seen_max, &max, 1, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("values read under the lock: sum %lld, largest %lld\n", sum, max);
  char line[96];
  snprintf(line, sizeof line, "rank %d: data blocks sum %016llx\n", rank, (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
