/* Case 11b: an MPI-IO read loop that stops on an empty read. Each rank opens the file
 * (MPI_COMM_SELF), seeks to its part and reads with MPI_File_read until MPI_Get_count says
 * 0 bytes, then checksums what it read.
 * usage: read_until_empty <data.bin> */
#include "hz.h"

#define N 10000

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_File fh;
  if (MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
    MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Offset size;
  MPI_File_get_size(fh, &size);
  MPI_File_seek(fh, size / nprocs * rank, MPI_SEEK_SET);
  char buf[N];
  uint64_t h = 0;
  long bytes = 0, calls = 0;
  for (;;) {
    MPI_Status st;
    int n;
    MPI_File_read(fh, buf, N, MPI_BYTE, &st);
    MPI_Get_count(&st, MPI_BYTE, &n);
    if (n == 0) break;
    h = hz_sum(h, buf, (size_t)n);
    bytes += n;
    calls++;
  }
  MPI_File_close(&fh);
  char line[128];
  snprintf(line, sizeof line, "rank %d: %ld reads, %ld bytes, sum %016llx\n", rank, calls, bytes,
           (unsigned long long)h);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
