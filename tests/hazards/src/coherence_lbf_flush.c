/* glibc's refill of a line-buffered (or unbuffered) input stream flushes a line-buffered
 * stdout first (libio's _IO_new_file_underflow). The program makes stdout line buffered,
 * prints a partial line, reads, then writes to descriptor 1 directly.
 * usage: coherence_lbf_flush <fgets|fread> <null|own> */
#define _POSIX_C_SOURCE 200809L
#include "hz_files.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *how = argc > 1 ? argv[1] : "fgets";
  const char *buffer = argc > 2 ? argv[2] : "null";
  if (rank == 0) {
    hz_numbered_lines("data.txt", "line", 3000);
    static char own[4096];
    setvbuf(stdout, NULL, _IOLBF, 0);
    FILE *f = fopen("data.txt", "r");
    if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
    setvbuf(f, strcmp(buffer, "own") == 0 ? own : NULL, _IOLBF, sizeof own);
    char buf[256];
    for (int k = 0; k < 3; k++) {
      printf("partial%d ", k);
      if (strcmp(how, "fgets") == 0) { if (!fgets(buf, sizeof buf, f)) break; }
      else { if (fread(buf, 1, 11, f) != 11) break; }
      if (write(1, "[direct]\n", 9) != 9) MPI_Abort(MPI_COMM_WORLD, 1);
      if (fseek(f, 5000 * (k + 1), SEEK_SET) != 0) break;  /* each read refills */
    }
    printf("\n");
    fclose(f);
  }
  MPI_Finalize();
  return 0;
}
