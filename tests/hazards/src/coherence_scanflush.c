/* fscanf("%d") whose number ends at 4095: glibc's lookahead refills the buffer with
 * [4096,8192) and pushes the '\n' back (read pointer at the buffer's start). fflush(f) on
 * the input stream (POSIX: the descriptor goes to the stream's position) makes glibc's
 * buffer empty (read_base == read_end), so its next fseek outside the buffer reads only
 * up to its target. The program prints the descriptor's offset, rank 1 changes bytes
 * after the target between barriers, and the program reads a line.
 * usage: coherence_scanflush */
#define _POSIX_C_SOURCE 200809L
#include "hz_files.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *path = "data.txt";
  if (rank == 0) {
    FILE *w = fopen(path, "w");
    fputs("0000000000\n", w);
    for (int i = 0; i < 2000; i++) fprintf(w, "%05d\n", i % 1000);
    fclose(w);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  FILE *f = NULL;
  long sum = 0, n = 0;
  int x;
  char line[64];
  if (rank == 0) {
    f = fopen(path, "r");
    if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
    while (fscanf(f, "%d", &x) == 1) {
      sum += x; n++;
      if (ftell(f) == 4096) break;
    }
    printf("after %ld numbers sum %ld ftell %ld fd %ld\n", n, sum, ftell(f), (long)lseek(fileno(f), 0, SEEK_CUR));
    if (fflush(f) != 0) MPI_Abort(MPI_COMM_WORLD, 4);
    printf("fflush: ftell %ld fd %ld\n", ftell(f), (long)lseek(fileno(f), 0, SEEK_CUR));
    if (fseek(f, 101, SEEK_SET) != 0) MPI_Abort(MPI_COMM_WORLD, 5);
    printf("fseek 101: ftell %ld fd %ld\n", ftell(f), (long)lseek(fileno(f), 0, SEEK_CUR));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) hz_put(path, 102, "777");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    if (!fgets(line, sizeof line, f)) MPI_Abort(MPI_COMM_WORLD, 6);
    printf("line after: %s", line);
    fclose(f);
  }
  MPI_Finalize();
  return 0;
}
