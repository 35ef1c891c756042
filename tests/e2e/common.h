/* Helpers shared by the end-to-end test programs (plain and hand-transformed alike). */
#ifndef PPIOS_TEST_COMMON_H
#define PPIOS_TEST_COMMON_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* FNV-1a over a buffer: the "computation" the programs do on what they read. */
static inline uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
#define FNV_START 14695981039346656037ull

/* Extra computation per chunk, so the prefetch thread has time to run ahead. */
static inline uint64_t busy_work(const void *data, size_t n, int rounds) {
  uint64_t h = FNV_START;
  for (int r = 0; r < rounds; ++r) h = fnv1a(h, data, n);
  return h;
}

static inline size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Prints one line per rank, in rank order, from rank 0. */
static inline void print_in_rank_order(const char *text) {
  enum { kLine = 512 };
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  char line[kLine];
  snprintf(line, sizeof line, "%s", text);
  char *all = rank == 0 ? (char *)malloc((size_t)kLine * (size_t)nprocs) : NULL;
  MPI_Gather(line, kLine, MPI_CHAR, all, kLine, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < nprocs; ++r) fputs(all + (size_t)r * kLine, stdout);
  free(all);
}

/* With E2E_EXIT_STAMP=PREFIX set, writes the CLOCK_MONOTONIC time in seconds into
 * PREFIX.<rank>: called right before MPI_Finalize, it marks where the run's exit begins
 * (run_e2e.py --exit-delay times from there to the end of mpirun). */
static inline void stamp_exit(int rank) {
  const char *prefix = getenv("E2E_EXIT_STAMP");
  if (prefix == NULL) return;
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", prefix, rank);
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  FILE *f = fopen(path, "w");
  if (f == NULL) return;
  fprintf(f, "%lld.%09ld\n", (long long)now.tv_sec, now.tv_nsec);
  fclose(f);
}

#endif
