/* Shape (issue 9, 7): read until a sentinel in the data. Each rank reads its contiguous
 * part of the file sequentially with read() in a `while (!stop && (n = read(...)) > 0)`
 * loop, scans every block byte by byte for the marker "STOPSTOP" and stops after the
 * block that holds it. Prints a CRC of what it read and whether it stopped.
 * usage: stop_flag <shapes.bin> <block-bytes> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

static int holds_marker(const unsigned char *p, long n) {
  static const char marker[] = "STOPSTOP";
  for (long i = 0; i + 8 <= n; ++i)
    if (memcmp(p + i, marker, 8) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: stop_flag <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct stat st;
  fstat(fd, &st);
  /* Parts are whole blocks; the last rank's part ends at the end of the file. */
  long part = ((long)st.st_size / nprocs + block - 1) / block * block;
  long begin = rank * part, left = rank == nprocs - 1 ? (long)st.st_size - begin : part;
  lseek(fd, (off_t)begin, SEEK_SET);
  unsigned char *buf = malloc((size_t)block);
  uint32_t crc = 0;
  long bytes = 0, blocks = 0;
  int stop = 0;
  ssize_t n;
  while (!stop && left > 0 && (n = read(fd, buf, (size_t)(left < block ? left : block))) > 0) {
    if (holds_marker(buf, (long)n)) stop = 1;
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    bytes += n;
    left -= n;
    blocks++;
  }
  close(fd);

  char line[128];
  snprintf(line, sizeof line, "rank %d: blocks %ld bytes %ld crc %08x%s\n", rank, blocks, bytes,
           (unsigned)crc, stop ? " stopped at the marker" : "");
  print_ranked(line);
  free(buf);
  MPI_Finalize();
  return 0;
}
