/* Case 1 (variant): the same as barrier_index through MPI-IO and stdio. Rank 1 writes the
 * index with MPI_File_write_at; after MPI_Barrier rank 0 reads it with MPI_File_read_at
 * and reads the records it names (table[idx[i]]) with fseek + fread.
 * usage: barrier_index_mpiio <index.bin> <records.bin> */
#include "hz.h"

#define NIDS 256
#define NIDX 96
#define RECSZ 128

static long table[NIDS];

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int i = 0; i < NIDS; i++) table[i] = (long)((i * 91) % NIDS) * RECSZ;

  if (rank == 1) {
    int32_t idx[NIDX];
    for (int i = 0; i < NIDX; i++) idx[i] = (int32_t)((i * 13 + 7) % NIDS);
    MPI_File fh;
    MPI_Status st;
    MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write_at(fh, 0, idx, (int)sizeof idx, MPI_BYTE, &st);
    MPI_File_close(&fh);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == 0) {
    int32_t idx[NIDX];
    MPI_File fh;
    MPI_Status st;
    int got = 0;
    MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    MPI_File_read_at(fh, 0, idx, (int)sizeof idx, MPI_BYTE, &st);
    MPI_Get_count(&st, MPI_BYTE, &got);
    MPI_File_close(&fh);
    if (got != (int)sizeof idx) {
      fprintf(stderr, "short index (%d bytes)\n", got);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    FILE *f = fopen(argv[2], "rb");
    unsigned char rec[RECSZ];
    uint64_t h = 0;
    long bytes = 0;
    for (int i = 0; i < NIDX; i++) {
      if (fseek(f, table[idx[i]], SEEK_SET) != 0) break;
      size_t n = fread(rec, 1, RECSZ, f);
      if (n == 0) break;
      h = hz_sum(h, rec, n);
      bytes += (long)n;
    }
    fclose(f);
    printf("records %d bytes %ld sum %016llx\n", NIDX, bytes, (unsigned long long)h);
  }
  MPI_Finalize();
  return 0;
}
