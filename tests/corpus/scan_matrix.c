/* Pattern: a text matrix read with fscanf, as matrix-market readers do. Every rank reads
 * all of scan.txt: a header "rows cols nnz" into local variables (the loop bound), then
 * nnz triplets "i j v" into locals, working on its own share of them (k % nprocs ==
 * rank); then values "%lf" straight into a malloc'd array until the scan fails.
 * usage: scan_matrix <scan.txt> */
#include <math.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) {
    if (rank == 0) fprintf(stderr, "usage: scan_matrix <scan.txt>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  FILE *in = fopen(argv[1], "r");
  if (in == NULL) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rows, cols, nnz;
  if (fscanf(in, "%d %d %d", &rows, &cols, &nnz) != 3) {
    fprintf(stderr, "%s: no header\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  long mine = 0, sum = 0, read = 0;
  for (int k = 0; k < nnz; k++) {
    int i, j;
    double v;
    if (fscanf(in, "%d %d %lf", &i, &j, &v) != 3) break;
    read++;
    if (k % nprocs == rank) {
      mine++;
      sum += llround(v * 1000) * (i + 2 * j);
      crunch(&v, sizeof v);
    }
  }

  size_t cap = 1 << 16, count = 0;
  double *values = malloc(cap * sizeof *values);
  while (count < cap && fscanf(in, "%lf", &values[count]) == 1) count++;
  long value_sum = 0;
  for (size_t n = rank; n < count; n += nprocs) {
    value_sum += llround(values[n] * 1000);
    crunch(&values[n], sizeof values[n]);
  }
  free(values);
  fclose(in);

  char out[256];
  snprintf(out, sizeof out, "rank %d: rows %d cols %d nnz %d read %ld mine %ld sum %ld; values %zu sum %ld\n",
           rank, rows, cols, nnz, read, mine, sum, count, value_sum);
  print_ranked(out);
  MPI_Finalize();
  return 0;
}
