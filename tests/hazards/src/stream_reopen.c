/* Case 16: a stream's 512-byte records, read where the MT may serve them from a block the
 * PT prefetched (the stream's 4 KiB buffer), while the stream changes under the reads:
 * freopen() gives the same FILE* (and most often the same descriptor) another file in the
 * middle of a block, and later the program rewrites records of the first file through a
 * descriptor of its own before any stream holds them, and reads them back. Each rank checksums the records it read.
 * usage: stream_reopen <a.bin> <b.bin> */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

enum { kRecord = 512, kRecords = 64 };

static uint64_t read_records(FILE *f, long first, long count, uint64_t h) {
  unsigned char rec[kRecord];
  for (long i = first; i < first + count; i++) {
    fseek(f, i * kRecord, SEEK_SET);
    if (fread(rec, kRecord, 1, f) != 1) break;
    h = hz_sum(h, rec, sizeof rec);
  }
  return h;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  uint64_t h = 0;
  /* Records 0-2 of a.bin, then records 3-7 (the same 4 KiB block) of b.bin. */
  h = read_records(f, 0, 3, h);
  if (freopen(argv[2], "rb", f) == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  h = read_records(f, 3, 5, h);
  /* Back to a.bin, record 8 (the second block). Then rank 0 rewrites records 17 and 18
   * (the third block, which no stream holds yet) through a descriptor of its own, and
   * every rank reads records 9 to the end: the rest of the second block, then the new
   * bytes of the third. */
  if (freopen(argv[1], "rb", f) == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  h = read_records(f, 8, 1, h);
  if (rank == 0) {
    int fd = open(argv[1], O_WRONLY);
    unsigned char patch[2 * kRecord];
    memset(patch, 0x5a, sizeof patch);
    if (fd < 0 || pwrite(fd, patch, sizeof patch, 17 * kRecord) != (ssize_t)sizeof patch)
      MPI_Abort(MPI_COMM_WORLD, 1);
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  h = read_records(f, 9, kRecords - 9, h);
  fclose(f);
  char line[96];
  snprintf(line, sizeof line, "rank %d: sum %016llx\n", rank, (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
