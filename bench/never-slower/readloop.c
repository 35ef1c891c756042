/* An I/O-bound loop: each rank reads its share of a file in chunks and does almost
 * nothing with them (a checksum of one byte in 4 KiB). Prefetching can only help here by
 * adding streams below the device's knee; above it, it must not cost anything.
 * usage: readloop <input> <chunk-bytes> */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: readloop <input> <chunk-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t chunk = (size_t)atol(argv[2]);
  struct stat st;
  if (stat(argv[1], &st) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  size_t size = (size_t)st.st_size;
  size_t part = (size + nprocs - 1) / nprocs;
  size_t begin = part * rank < size ? part * rank : size;
  size_t end = begin + part < size ? begin + part : size;
  char *buf;
  if (posix_memalign((void **)&buf, 4096, chunk) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  int fd = open(argv[1], O_RDONLY);
  uint64_t sum = 0;
  for (size_t off = begin; off < end; off += chunk) {
    size_t want = end - off < chunk ? end - off : chunk;
    ssize_t n = pread(fd, buf, want, (off_t)off);
    for (ssize_t i = 0; i < n; i += 4096) sum = sum * 31 + (unsigned char)buf[i];
  }
  close(fd);
  uint64_t total = 0;
  MPI_Reduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("READLOOP result=%llu\n", (unsigned long long)total);
  free(buf);
  MPI_Finalize();
  return 0;
}
