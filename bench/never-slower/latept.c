/* A loop whose read offsets take as much computing as the data itself: the prefetch
 * thread has to redo that computing, so with more threads than cores it falls behind the
 * main thread (its prefetches arrive late) and takes CPU the main threads need.
 * usage: latept <input> <block-bytes> <rounds> */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t mix(uint64_t x, long rounds) {
  for (long r = 0; r < rounds; ++r) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
  }
  return x;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: latept <input> <block-bytes> <rounds>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t block = (size_t)atol(argv[2]);
  long rounds = atol(argv[3]);
  struct stat st;
  if (stat(argv[1], &st) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  size_t blocks = (size_t)st.st_size / block;
  size_t per_rank = blocks / (size_t)nprocs;
  char *buf;
  if (posix_memalign((void **)&buf, 4096, block) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  int fd = open(argv[1], O_RDONLY);
  uint64_t sum = 0;
  for (size_t i = 0; i < per_rank; ++i) {
    size_t b = (size_t)(mix(i * (size_t)nprocs + (size_t)rank, rounds) % blocks);
    ssize_t n = pread(fd, buf, block, (off_t)(b * block));
    for (ssize_t k = 0; k < n; k += 4096) sum = sum * 31 + (unsigned char)buf[k];
  }
  close(fd);
  uint64_t total = 0;
  MPI_Reduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("LATEPT result=%llu\n", (unsigned long long)total);
  free(buf);
  MPI_Finalize();
  return 0;
}
