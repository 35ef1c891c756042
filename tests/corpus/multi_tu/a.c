/* Pattern: several translation units. a.c holds main and the loops; every read is in
 * b.c, reached through calls across the unit boundary. Built as `cc -c a.c`, `cc -c b.c`,
 * `cc a.o b.o -o multi_tu`. Each rank reads its part of second.bin chunk by chunk twice:
 * forwards through stdio, then every other chunk backwards through MPI-IO.
 * usage: multi_tu <second.bin> <chunk-bytes> */
#include "b.h"
#include "corpus.h"

CORPUS_DEFINE_SINK;

static uint32_t forward_pass(struct reader *r, long chunks, unsigned char *buf) {
  uint32_t crc = 0;
  for (long i = 0; i < chunks; ++i) {
    long n = reader_fread_chunk(r, i, buf);
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
  }
  return crc;
}

static uint32_t backward_pass(struct reader *r, long chunks, unsigned char *buf) {
  uint32_t crc = 0;
  for (long i = chunks - 1; i >= 0; i -= 2) {
    long n = reader_mpi_chunk(r, i, buf);
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
  }
  return crc;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: multi_tu <second.bin> <chunk-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long chunk = atol(argv[2]);
  MPI_Offset size = 0;
  MPI_File probe;
  MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &probe);
  MPI_File_get_size(probe, &size);
  MPI_File_close(&probe);
  long part = (long)size / nprocs;
  long chunks = (part + chunk - 1) / chunk;

  struct reader r;
  if (reader_open(&r, argv[1], chunk, part * rank) != 0) {
    fprintf(stderr, "rank %d: cannot open %s\n", rank, argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  unsigned char *buf = malloc((size_t)chunk);
  uint32_t fwd = forward_pass(&r, chunks, buf);
  uint32_t bwd = backward_pass(&r, chunks, buf);
  reader_close(&r);

  char line[128];
  snprintf(line, sizeof line, "rank %d: %ld chunks forward %08x backward %08x\n", rank, chunks,
           (unsigned)fwd, (unsigned)bwd);
  print_ranked(line);
  free(buf);
  MPI_Finalize();
  return 0;
}
