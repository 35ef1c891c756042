/* A plain MPI C program for the packaging tests: each rank reads its share of a file in
 * chunks with pread and hashes it; rank 0 prints the byte count and the sum of the
 * ranks' hashes. Built once with mpicc and once with ppios-cc from an installed prefix. */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (64 * 1024)

static uint64_t hash_chunk(uint64_t h, const unsigned char *p, ssize_t n) {
  for (ssize_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 2) {
    if (rank == 0)
      fprintf(stderr, "usage: chunks FILE\n");
    MPI_Finalize();
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  off_t share = (st.st_size / size + CHUNK - 1) / CHUNK * CHUNK;
  off_t begin = share * rank, end = begin + share < st.st_size ? begin + share : st.st_size;
  static unsigned char buf[CHUNK];
  uint64_t h = 14695981039346656037ull, bytes = 0;
  for (off_t off = begin; off < end;) {
    size_t want = end - off < CHUNK ? (size_t)(end - off) : CHUNK;
    ssize_t n = pread(fd, buf, want, off);
    if (n <= 0)
      break;
    h = hash_chunk(h, buf, n);
    bytes += (uint64_t)n;
    off += n;
  }
  close(fd);
  uint64_t total_bytes = 0, total_hash = 0;
  MPI_Reduce(&bytes, &total_bytes, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&h, &total_hash, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("chunks: bytes=%" PRIu64 " hash=%016" PRIx64 "\n", total_bytes, total_hash);
  MPI_Finalize();
  return 0;
}
