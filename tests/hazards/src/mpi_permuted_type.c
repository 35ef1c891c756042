/* A datatype without holes whose elements are not in memory order is not contiguous: an
 * MPI read through it scatters each item by its typemap, which the cache must not copy in
 * file order. Here MPI_Type_indexed with displacements {1, 0} (two ints, swapped):
 * size == extent == true_extent and lb == 0, yet the first file int lands in buf[1].
 * argv[1]: input file; argv[2]: part (mem, view, all). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hz.h"

int main(int argc, char **argv) {
  int rank, nprocs, i;
  MPI_File fh;
  MPI_Datatype swap2;
  int bl[2] = {1, 1};
  int disp[2] = {1, 0};
  int buf[256];
  MPI_Status st;
  uint64_t h = 0;
  char line[200];
  const char *part;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  part = argv[2];
  MPI_Type_indexed(2, bl, disp, MPI_INT, &swap2);
  MPI_Type_commit(&swap2);
  MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  if (strcmp(part, "view") == 0)
    MPI_File_set_view(fh, 0, MPI_INT, swap2, "native", MPI_INFO_NULL);
  for (i = 0; i < 16; i++) {
    MPI_Offset off = (MPI_Offset)(rank * 16 + i) * 1024;
    if (strcmp(part, "mem") == 0) {
      MPI_File_read_at(fh, off, buf, 128, swap2, &st);
    } else if (strcmp(part, "view") == 0) {
      MPI_File_read_at(fh, off / 4, buf, 256, MPI_INT, &st);
    } else {
      MPI_File_read_at_all(fh, off, buf, 128, swap2, &st);
    }
    h = hz_sum(h, buf, sizeof buf);
    if (i == 0) {
      snprintf(line, sizeof line, "rank %d first ints %d %d %d %d\n", rank, buf[0], buf[1], buf[2], buf[3]);
      hz_print_ranked(line);
    }
  }
  snprintf(line, sizeof line, "rank %d part %s sum %016llx\n", rank, part, (unsigned long long)h);
  hz_print_ranked(line);
  MPI_File_close(&fh);
  MPI_Type_free(&swap2);
  MPI_Finalize();
  return 0;
}
