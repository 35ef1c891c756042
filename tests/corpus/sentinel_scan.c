/* Pattern: a loop that stops early on a condition on the data read. Each rank visits
 * every nprocs-th 512-byte record (fseek + fread) and stops at the first record whose
 * tag (its first 4 bytes, little-endian) is the sentinel 0xDEADBEEF. Which read is the
 * last is only known once its data is in.
 * usage: sentinel_scan <sentinel.bin> */
#include "corpus.h"

CORPUS_DEFINE_SINK;

enum { kRecordBytes = 512 };
#define SENTINEL_TAG 0xDEADBEEFu

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) {
    if (rank == 0) fprintf(stderr, "usage: sentinel_scan <sentinel.bin>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  FILE *fp = fopen(argv[1], "rb");
  if (fp == NULL) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  unsigned char rec[kRecordBytes];
  uint32_t crc = 0;
  long scanned = 0, stop = -1;
  for (long i = rank;; i += nprocs) {
    fseek(fp, i * kRecordBytes, SEEK_SET);
    if (fread(rec, kRecordBytes, 1, fp) != 1) break;
    uint32_t tag = (uint32_t)rec[0] | (uint32_t)rec[1] << 8 | (uint32_t)rec[2] << 16 |
                   (uint32_t)rec[3] << 24;
    if (tag == SENTINEL_TAG) {
      stop = i;
      break;
    }
    crc = crc32_update(crc, rec, sizeof rec);
    crunch(rec, sizeof rec);
    scanned++;
  }
  fclose(fp);
  char line[128];
  snprintf(line, sizeof line, "rank %d: scanned %ld records crc %08x, sentinel at %ld\n", rank,
           scanned, (unsigned)crc, stop);
  print_ranked(line);
  MPI_Finalize();
  return 0;
}
