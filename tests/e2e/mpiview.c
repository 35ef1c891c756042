/* Reads each rank's part of a file through an MPI file view that skips a header, with
 * MPI_STATUS_IGNORE: a contiguous view (etype and filetype MPI_INT), through the file
 * pointer and through explicit offsets, or an interleaving one (every other int) that
 * must never be served from the cache. Prints one checksum line per rank.
 * usage: mpiview <input> <header-bytes> <chunk-ints> <chunks> contiguous|strided */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 6) {
    if (rank == 0) fprintf(stderr, "usage: mpiview <input> <header> <chunk-ints> <chunks> contiguous|strided\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Offset header = atol(argv[2]);
  int chunk = atoi(argv[3]), chunks = atoi(argv[4]);
  int strided = strcmp(argv[5], "strided") == 0;
  MPI_Offset per_rank = (MPI_Offset)chunk * chunks; /* ints */
  int *buf = malloc((size_t)chunk * sizeof(int));
  uint64_t sums[2] = {FNV_START, FNV_START}, work = 0;

  MPI_File fh;
  MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  MPI_Datatype filetype = MPI_INT;
  if (strided) {
    MPI_Datatype every_other;
    MPI_Type_vector(1, 1, 2, MPI_INT, &every_other);
    MPI_Type_create_resized(every_other, 0, 2 * sizeof(int), &filetype);
    MPI_Type_commit(&filetype);
    MPI_Type_free(&every_other);
  }
  MPI_File_set_view(fh, header, MPI_INT, filetype, "native", MPI_INFO_NULL);
  MPI_File_seek(fh, per_rank * rank, MPI_SEEK_SET);
  for (int i = 0; i < chunks; ++i) {
    MPI_File_read(fh, buf, chunk, MPI_INT, MPI_STATUS_IGNORE);
    sums[0] = fnv1a(sums[0], buf, (size_t)chunk * sizeof(int));
    work += busy_work(buf, (size_t)chunk * sizeof(int), 3);
  }
  MPI_Offset after;
  MPI_File_get_position(fh, &after);
  for (int i = chunks - 1; i >= 0; --i) {
    MPI_File_read_at(fh, per_rank * rank + (MPI_Offset)i * chunk, buf, chunk, MPI_INT,
                     MPI_STATUS_IGNORE);
    sums[1] = fnv1a(sums[1], buf, (size_t)chunk * sizeof(int));
    work += busy_work(buf, (size_t)chunk * sizeof(int), 3);
  }
  MPI_File_close(&fh);
  if (strided) MPI_Type_free(&filetype);

  char line[256];
  snprintf(line, sizeof line, "rank %d view %s sums %016llx %016llx position %lld work %016llx\n",
           rank, argv[5], (unsigned long long)sums[0], (unsigned long long)sums[1], (long long)after,
           (unsigned long long)work);
  print_in_rank_order(line);
  free(buf);
  MPI_Finalize();
  return 0;
}
