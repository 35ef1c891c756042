/* Helpers shared by the hazards programs: a checksum and rank-ordered printing.
 * Plain C99 + MPI. */
#ifndef HZ_H
#define HZ_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64 bits. */
static inline uint64_t hz_sum(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  size_t i;
  if (h == 0) h = 1469598103934665603ULL;
  for (i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* Rank 0 prints every rank's line, in rank order (collective). */
static inline void hz_print_ranked(const char *text) {
  enum { kLine = 256 };
  int rank, nprocs, r;
  char line[kLine];
  char *all;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  memset(line, 0, sizeof line);
  snprintf(line, sizeof line, "%s", text);
  all = rank == 0 ? (char *)malloc((size_t)kLine * (size_t)nprocs) : NULL;
  MPI_Gather(line, kLine, MPI_CHAR, all, kLine, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (r = 0; r < nprocs; ++r) fputs(all + (size_t)r * kLine, stdout);
    fflush(stdout);
    free(all);
  }
}

#endif
