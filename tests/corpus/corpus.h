/* Helpers shared by the corpus programs: a CRC-32 (the same as zlib's, so the Python
 * reference can recompute every result), some computation to do between reads, and
 * printing one line per rank in rank order. Plain C11 + MPI, no ppios calls. */
#ifndef CORPUS_H
#define CORPUS_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rounds of extra computation per block read; -DCORPUS_WORK_ROUNDS=n changes it. */
#ifndef CORPUS_WORK_ROUNDS
#define CORPUS_WORK_ROUNDS 32
#endif

static inline uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
  static uint32_t table[256];
  static int ready = 0;
  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = 1;
  }
  const unsigned char *p = (const unsigned char *)data;
  uint32_t c = crc ^ 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* The "science" done on each block: it only burns time (its result goes to a volatile
 * sink), so that a prefetch thread has something to run ahead of. */
extern volatile uint32_t corpus_sink;
static inline void crunch(const void *data, size_t n) {
  uint32_t h = 0;
  for (int r = 0; r < CORPUS_WORK_ROUNDS; ++r) h = crc32_update(h + (uint32_t)r, data, n);
  corpus_sink ^= h;
}
/* One translation unit per program defines the sink. */
#define CORPUS_DEFINE_SINK volatile uint32_t corpus_sink

/* Rank 0 prints every rank's line, in rank order. */
static inline void print_ranked(const char *text) {
  enum { kLine = 256 };
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  char line[kLine];
  memset(line, 0, sizeof line);
  snprintf(line, sizeof line, "%s", text);
  char *all = rank == 0 ? (char *)malloc((size_t)kLine * (size_t)nprocs) : NULL;
  MPI_Gather(line, kLine, MPI_CHAR, all, kLine, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < nprocs; ++r) fputs(all + (size_t)r * kLine, stdout);
    fflush(stdout);
  }
  free(all);
}

#endif
