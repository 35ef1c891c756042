/* Small reads, as programs that parse input write them: each rank reads its share of a
 * file a few bytes at a time through one API and folds every byte into a checksum. Each
 * call costs the runtime's per-call work, and with read()/pread() one request to the
 * device, so this is where an added system call or a slow served path would show.
 * usage: smallreads <input> <read|pread|fread|getc> <bytes-per-call> */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: smallreads <input> <read|pread|fread|getc> <bytes-per-call>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *api = argv[2];
  size_t each = (size_t)atol(argv[3]);
  struct stat st;
  if (stat(argv[1], &st) != 0 || each == 0 || each > 4096) MPI_Abort(MPI_COMM_WORLD, 1);
  size_t size = (size_t)st.st_size;
  size_t part = (size + nprocs - 1) / nprocs;
  size_t begin = part * rank < size ? part * rank : size;
  size_t end = begin + part < size ? begin + part : size;
  unsigned char buf[4096];
  uint64_t sum = 0;
  if (strcmp(api, "read") == 0 || strcmp(api, "pread") == 0) {
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || lseek(fd, (off_t)begin, SEEK_SET) != (off_t)begin) MPI_Abort(MPI_COMM_WORLD, 1);
    int positioned = strcmp(api, "pread") == 0;
    for (size_t off = begin; off < end;) {
      size_t want = end - off < each ? end - off : each;
      ssize_t n = positioned ? pread(fd, buf, want, (off_t)off) : read(fd, buf, want);
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; i++) sum = sum * 31 + buf[i];
      off += (size_t)n;
    }
    close(fd);
  } else {
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL || fseek(f, (long)begin, SEEK_SET) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    int by_char = strcmp(api, "getc") == 0;
    for (size_t off = begin; off < end;) {
      size_t want = end - off < each ? end - off : each;
      size_t n = 0;
      if (by_char) {
        int c = getc(f);
        if (c != EOF) buf[n++] = (unsigned char)c;
      } else {
        n = fread(buf, 1, want, f);
      }
      if (n == 0) break;
      for (size_t i = 0; i < n; i++) sum = sum * 31 + buf[i];
      off += n;
    }
    fclose(f);
  }
  uint64_t total = 0;
  MPI_Reduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("SMALLREADS %s %zu result=%llu\n", api, each, (unsigned long long)total);
  MPI_Finalize();
  return 0;
}
