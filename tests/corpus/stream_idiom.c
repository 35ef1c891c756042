/* Patterns: the `while ((n = read(fd, buf, BS)) > 0)` idiom over a file of the rank's own
 * (its path built from the rank; its size is not a multiple of BS, so the last read is
 * short), then a loop that stops early on a counter: fread of fixed chunks of a shared
 * file, stopping after a rank-dependent number of chunks.
 * usage: stream_idiom <part-prefix> <data.bin> <chunk-limit> */
#include <fcntl.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

#define BS 8192

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: stream_idiom <part-prefix> <data.bin> <chunk-limit>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s.%d.bin", argv[1], rank);
  int limit = atoi(argv[3]) + 7 * rank;

  char buf[BS];
  ssize_t n;
  long streamed = 0, reads = 0;
  uint32_t stream_crc = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  while ((n = read(fd, buf, BS)) > 0) {
    stream_crc = crc32_update(stream_crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    streamed += n;
    reads++;
  }
  close(fd);

  FILE *fp = fopen(argv[2], "rb");
  fseek(fp, (long)rank * 4 * BS, SEEK_SET);
  uint32_t chunk_crc = 0;
  int chunks = 0;
  for (;;) {
    size_t got = fread(buf, 1, BS / 2, fp);
    if (got == 0) break;
    chunk_crc = crc32_update(chunk_crc, buf, got);
    crunch(buf, got);
    if (++chunks == limit) break;
  }
  long pos = ftell(fp);
  fclose(fp);

  char line[200];
  snprintf(line, sizeof line, "rank %d: streamed %ld bytes in %ld reads crc %08x; %d chunks crc %08x pos %ld\n",
           rank, streamed, reads, (unsigned)stream_crc, chunks, (unsigned)chunk_crc, pos);
  print_ranked(line);
  MPI_Finalize();
  return 0;
}
