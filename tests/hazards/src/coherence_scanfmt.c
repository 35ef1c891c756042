/* fscanf(f, FORMAT) with one integer conversion (a width, a flag: "%5d", "%'d") on lines
 * of numbers, one of which ends at the last byte of the stream's first block (4095):
 * glibc's integer conversion reads the character after it (at 4096, refilling its buffer
 * with [4096,8192)) even when the width is reached, and pushes it back. The program
 * prints where the descriptor stands, then bytes of the next block change (by <how>:
 * the process itself, rank 1 between barriers, or nobody), and it reads on: the original
 * answers from its buffer.
 * usage: coherence_scanfmt <own|rank|none> FORMAT */
#define _POSIX_C_SOURCE 200809L
#include "hz_files.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  const char *path = "data.txt", *how = argv[1];
  if (rank == 0) {
    FILE *w = fopen(path, "w");
    fputs("0000000000\n", w); /* 11 bytes: lines of 6 from 11, one ends at 4096 */
    for (int i = 0; i < 2000; i++) fprintf(w, "%05d\n", i % 1000);
    fclose(w);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  FILE *f = NULL;
  long sum = 0, n = 0;
  int x, hit = 0;
  if (rank == 0) { f = fopen(path, "r"); if (!f) MPI_Abort(MPI_COMM_WORLD, 1); }
  for (;;) {
    int more = 0;
    if (rank == 0) {
      for (;;) {
        const char *fm = argv[2];
        char sbuf[256] = "";
        double d = 0;
        int r;
        if (strpbrk(fm, "fgea")) { r = fscanf(f, fm, &d); x = (int)d; }
        else if (strpbrk(fm, "sc[")) { r = fscanf(f, fm, sbuf); x = atoi(sbuf); }
        else r = fscanf(f, fm, &x);
        if (r != 1) break;
        sum += x; n++;
        if (!hit && ftell(f) == 4096) { hit = 1; more = 1; break; }
      }
    }
    MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!more) break;
    if (rank == 0) printf("at 4096 after %ld numbers, fdpos %ld\n", n, (long)lseek(fileno(f), 0, SEEK_CUR));
    if (strcmp(how, "rank") == 0) {
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == 1) hz_put(path, 4097, "77777");
      MPI_Barrier(MPI_COMM_WORLD);
    } else if (strcmp(how, "own") == 0) {
      hz_put(path, 4097, "77777");
    }
  }
  if (rank == 0) { printf("n %ld sum %ld\n", n, sum); fclose(f); }
  MPI_Finalize();
  return 0;
}
