/* A read-write stream (fopen "r+", "w+", "a+"): a line read fills glibc's buffer with a
 * block, then fread takes the next bytes from that buffer. usage: coherence_rw_stream <r+|w+|a+> */
#define _POSIX_C_SOURCE 200809L
#include "hz_files.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *mode = argv[1];
  if (rank == 0) {
    if (mode[0] == 'r') {
      hz_numbered_lines("data.txt", "record", 2000);
    }
    FILE *f = fopen("data.txt", mode);
    if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
    if (mode[0] != 'r') {
      for (int i = 0; i < 2000; i++) fprintf(f, "record %05d\n", i);
      rewind(f);
    }
    char line[64], rec[13];
    if (fgets(line, sizeof line, f)) printf("fgets: %s", line);
    for (int i = 0; i < 3; i++) {
      size_t n = fread(rec, 1, 13, f);
      printf("fread %zu: %.12s\n", n, n ? rec : "");
    }
    printf("ftell %ld\n", ftell(f));
    fclose(f);
  }
  MPI_Finalize();
  return 0;
}
