/* A scan that stops on the data (a record whose first byte is 0, or the last slot):
 * the prefetch thread runs the loop past that exit, up to 16 transfers ahead, so its
 * slot index goes past what the program's ever does. It counts visits per slot in a
 * stack table through a macro and in a heap table (calloc) through a plain subscript and
 * through pointer arithmetic: every one of those stores must stay inside its table (or
 * the PT stop), never land in the PT's frames or the heap the program shares.
 * usage: spec_store_bounds <file> */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define NSLOT 16
#define MAXREC 1024
#define RECSZ 64
#define BUMP(tab, i) ((tab)[(i)] += 1)

static int stop_here(const unsigned char *rec, int k) { return k == NSLOT - 1 || rec[0] == 0; }

int main(int argc, char **argv) {
  int rank, k, done, fd;
  unsigned char rec[RECSZ];
  long stack_seen[NSLOT] = {0};
  long *heap_seen, *heap_more;
  uint64_t h = 0;
  long off;
  char line[160];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  heap_seen = calloc(NSLOT, sizeof *heap_seen);
  heap_more = calloc(NSLOT, sizeof *heap_more);
  fd = open(argc > 1 ? argv[1] : "data.bin", O_RDONLY);
  if (fd < 0 || heap_seen == NULL || heap_more == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  done = 0;
  for (k = 0; !done && k < MAXREC; k++) {
    BUMP(stack_seen, k);
    heap_seen[k] += 2;
    *(heap_more + k) += 3;
    off = (long)RECSZ * (k * 5 + rank + stack_seen[k] + heap_seen[k] + heap_more[k]);
    if (pread(fd, rec, RECSZ, off) != RECSZ) break;
    h = hz_sum(h, rec, RECSZ);
    done = stop_here(rec, k);
  }
  close(fd);
  snprintf(line, sizeof line, "rank %d: %d records sum %016llx\n", rank, k, (unsigned long long)h);
  free(heap_seen);
  free(heap_more);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
