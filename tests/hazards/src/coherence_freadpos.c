/* The program moves the stream's descriptor (lseek on fileno), then freads: glibc adjusts
 * the offset it knows by what it read (its ftell then counts from the old offset), it
 * does not set it from the descriptor.
 * usage: coherence_freadpos <whole|part> : a read of exactly one block, or of part of one */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <unistd.h>
#include "hz.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  const char *path = "data.bin";
  static unsigned char buf[20000];
  if (rank == 0) {
    FILE *w = fopen(path, "w");
    for (int i = 0; i < 16384; i++) fputc((i * 7 + 3) & 0xff, w);
    fclose(w);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    FILE *f = fopen(path, "r");
    if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
    fseek(f, 0, SEEK_SET);
    lseek(fileno(f), 100, SEEK_SET);
    size_t want = strcmp(argv[1], "whole") == 0 ? 4096 : 200;
    size_t n = fread(buf, 1, want, f);
    printf("fread %zu %016llx ftell %ld fd %ld\n", n, (unsigned long long)hz_sum(0, buf, n), ftell(f),
           (long)lseek(fileno(f), 0, SEEK_CUR));
    n = fread(buf, 1, 100, f);
    printf("next %zu %016llx ftell %ld\n", n, (unsigned long long)hz_sum(0, buf, n), ftell(f));
    fclose(f);
  }
  MPI_Finalize();
  return 0;
}
