/* Case 18: stores the prefetch thread must not make. Each loop computes its read's offset
 * with a store into the program's memory that no assignment of main() shows: a helper
 * that re-points its pointer parameter at a shared cursor, one that re-points it at a
 * constant pointer to a global, snprintf's %n into a heap int, __atomic_fetch_add on a
 * heap cursor, C11 atomic_fetch_add in a helper, and a call in the size of a
 * variable-length array type under sizeof (which counts, and prints once on rank 0). A PT that ran
 * any of them would change what rank 0 prints after each loop.
 * usage: pt_stores <data.bin> */
#include <fcntl.h>
#include <stdatomic.h>
#include <unistd.h>

#include "hz.h"

#define REC 64
#define N 32

static long counter;
static long *const counter_slot = &counter;
static int ncols_queries;
static int world_rank;

/* Advances a cursor; when a shared cursor is given, that one instead. */
static long advance(long *cursor, long *shared, long step) {
  if (shared != NULL) cursor = shared;
  *cursor += step;
  return *cursor - step;
}

/* The offset of record i; counts into the slot, whatever the caller passes. */
static long compute(long *acc, int i) {
  acc = counter_slot;
  *acc += 1;
  return (long)i * REC;
}

/* Claims the next record of a queue. */
static long claim(atomic_long *queue) { return atomic_fetch_add(queue, REC); }

/* The row width, in doubles; counts how often it is asked. */
static int ncols(void) {
  if (ncols_queries++ == 0 && world_rank == 0) printf("row width: %d doubles\n", REC / 8);
  return REC / 8;
}

static void show(int rank, const char *what, long value, uint64_t h) {
  if (rank == 0) printf("%s %ld sum %016llx\n", what, value, (unsigned long long)h);
  fflush(stdout);
}

int main(int argc, char **argv) {
  long *shared = calloc(1, sizeof *shared);
  int *tag_len = calloc(1, sizeof *tag_len);
  long *next = calloc(1, sizeof *next);
  atomic_long *queue = malloc(sizeof *queue);
  long mine = 0, tmp = 0, off1, off3, off4, off5, off6;
  char rec[REC], tag[32];
  uint64_t h;
  int rank, fd, i;
  atomic_init(queue, 0);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  world_rank = rank;
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  fd = open(argv[1], O_RDONLY);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);

  h = 0;
  for (i = 0; i < N; i++) {
    off1 = advance(&mine, shared, REC);
    if (pread(fd, rec, REC, off1) != REC) break;
    h = hz_sum(h, rec, REC);
    usleep(2000);
  }
  show(rank, "shared", *shared, h);

  h = 0;
  for (i = 0; i < N; i++) {
    if (pread(fd, rec, REC, compute(&tmp, i)) != REC) break;
    h = hz_sum(h, rec, REC);
    usleep(2000);
  }
  show(rank, "counter", counter, h);

  h = 0;
  for (i = 0; i < N; i++) {
    off3 = REC * (long)snprintf(tag, sizeof tag, "%ld%n", (long)i * i, tag_len);
    if (pread(fd, rec, REC, off3 + REC * (long)i) != REC) break;
    h = hz_sum(h, rec, REC);
    usleep(2000);
  }
  show(rank, "tag_len", *tag_len, h);

  h = 0;
  for (i = 0; i < N; i++) {
    off4 = __atomic_fetch_add(next, REC, __ATOMIC_RELAXED);
    if (pread(fd, rec, REC, off4) != REC) break;
    h = hz_sum(h, rec, REC);
    usleep(2000);
  }
  show(rank, "next", *next, h);

  h = 0;
  for (i = 0; i < N; i++) {
    off5 = claim(queue);
    if (pread(fd, rec, REC, off5) != REC) break;
    h = hz_sum(h, rec, REC);
    usleep(2000);
  }
  show(rank, "queue", (long)atomic_load(queue), h);

  h = 0;
  for (i = 0; i < N; i++) {
    off6 = (long)i * (long)sizeof(double[ncols()]);
    if (pread(fd, rec, REC, off6) != REC) break;
    h = hz_sum(h, rec, REC);
    usleep(2000);
  }
  show(rank, "ncols queries", ncols_queries, h);

  close(fd);
  free(shared);
  free(tag_len);
  free(next);
  free(queue);
  MPI_Finalize();
  return 0;
}
