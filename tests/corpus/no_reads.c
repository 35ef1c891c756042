/* Pattern: a program with no reads at all (ppios-cc must compile it unchanged). Each rank
 * counts integer lattice points of a pseudo-random sample (a 64-bit LCG seeded from the
 * rank) that fall inside a quarter circle; rank 0 reduces the counts, prints the estimate
 * of pi and writes it to pi.txt.
 * usage: no_reads <samples-per-rank> */
#include "corpus.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  long samples = argc > 1 ? atol(argv[1]) : 100000;
  uint64_t state = 0x9E3779B97F4A7C15ull * (uint64_t)(rank + 1);
  const uint64_t scale = 1u << 20;
  long inside = 0;
  for (long i = 0; i < samples; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t x = (state >> 33) % scale;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t y = (state >> 33) % scale;
    if (x * x + y * y < scale * scale) inside++;
  }
  long counts[2] = {inside, samples}, totals[2] = {0, 0};
  MPI_Reduce(counts, totals, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    char text[128];
    snprintf(text, sizeof text, "inside %ld of %ld: pi ~ %.6f\n", totals[0], totals[1],
             4.0 * (double)totals[0] / (double)totals[1]);
    fputs(text, stdout);
    FILE *out = fopen("pi.txt", "w");
    fputs(text, out);
    fclose(out);
  }
  MPI_Finalize();
  return 0;
}
