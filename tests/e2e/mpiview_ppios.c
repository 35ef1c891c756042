/* mpiview.c's prefetching build, written by hand; the MT's calls are the program's own,
 * linked with --wrap. With the contiguous view the PT reopens the MT's handle, which
 * carries the view (its offsets count ints from the header on). With the interleaving
 * view the PT guesses a contiguous one (ppios_pt_MPI_File_set_view) and prefetches bytes
 * the MT's reads do not return: the MT must never be served them. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "ppios/ppios.h"

struct pt_ctx {
  ppios_pt_mpi_file fh;  /* the MT's handle reopened for the PT (contiguous view) */
  ppios_seq_t seq;
  const char *path;
  MPI_Offset header, per_rank;
  int chunk, chunks, rank, strided;
};

static void prefetch_thread(void *arg) {
  struct pt_ctx *c = arg;
  ppios_seq_t seq = c->seq;
  ppios_pt_mpi_file fh = c->fh;
  if (c->strided) {
    ppios_pt_MPI_File_open(c->path, MPI_MODE_RDONLY, &fh);
    ppios_pt_MPI_File_set_view(fh, c->header, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
  }
  ppios_pt_MPI_File_seek(fh, c->per_rank * c->rank, MPI_SEEK_SET);
  for (int i = 0; i < c->chunks; ++i) ppios_prefetch_MPI_File_read(fh, c->chunk, MPI_INT, MPI_STATUS_IGNORE, ++seq, 0, NULL);
  for (int i = c->chunks - 1; i >= 0; --i)
    ppios_prefetch_MPI_File_read_at(fh, c->per_rank * c->rank + (MPI_Offset)i * c->chunk, c->chunk,
                                    MPI_INT, MPI_STATUS_IGNORE, ++seq, 0, NULL);
  ppios_pt_MPI_File_close(&fh);
}

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
  {
    /* The start block: the MT reopens its handle for the PT (an MPI call the PT may not
     * make), with the view it has. */
    struct pt_ctx ctx = {strided ? NULL : ppios_pt_reopen_MPI_File(fh), ppios_mt_seq(), argv[1],
                         header, per_rank, chunk, chunks, rank, strided};
    ppios_pt_start(prefetch_thread, &ctx, sizeof ctx);
  }
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
