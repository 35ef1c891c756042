/* linesum: each rank scans every nprocs-th chunk of a text file with fseek + fread.
 * usage: linesum <file.txt> */
#include <mpi.h>

#include "scan.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  FILE *f = argc == 2 ? fopen(argv[1], "rb") : NULL;
  if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
  char buf[CHUNK];
  struct stats s = {0, 0, 0};
  for (long i = rank;; i += nprocs) {
    if (fseek(f, i * CHUNK, SEEK_SET) != 0) break;
    size_t n = fread(buf, 1, CHUNK, f);
    if (n == 0) break;
    scan_chunk(buf, n, &s);
  }
  fclose(f);
  long mine[3] = {s.lines, s.bytes, s.digits}, all[3];
  MPI_Reduce(mine, all, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("lines %ld bytes %ld digits %ld\n", all[0], all[1], all[2]);
  MPI_Finalize();
  return 0;
}
