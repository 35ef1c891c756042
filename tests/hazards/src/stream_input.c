/* Case 6: input from a FIFO, /dev/stdin or a pipe. Rank 0 reads the stream named by
 * argv[1] (a FIFO the job's launcher feeds, or /dev/stdin) to its end, with read() or
 * with stdio (argv[2] = read|stdio), in fixed-size records, and broadcasts what it got;
 * every rank then checksums its share of the records.
 * usage: stream_input <path> read|stdio */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define REC 100
#define MAXBYTES (1 << 20)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  char *data = malloc(MAXBYTES);
  long total = 0;
  if (rank == 0) {
    if (strcmp(argv[2], "stdio") == 0) {
      FILE *f = fopen(argv[1], "rb");
      if (!f) {
        perror(argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      size_t n;
      while (total < MAXBYTES && (n = fread(data + total, 1, REC, f)) > 0) total += (long)n;
      fclose(f);
    } else {
      int fd = open(argv[1], O_RDONLY);
      if (fd < 0) {
        perror(argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      for (;;) {
        ssize_t n = read(fd, data + total, total + REC <= MAXBYTES ? REC : MAXBYTES - total);
        if (n <= 0) break;
        total += n;
      }
      close(fd);
    }
  }
  MPI_Bcast(&total, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  MPI_Bcast(data, (int)total, MPI_CHAR, 0, MPI_COMM_WORLD);
  uint64_t h = 0;
  long recs = 0;
  for (long off = (long)rank * REC; off < total; off += (long)nprocs * REC) {
    long len = total - off < REC ? total - off : REC;
    h = hz_sum(h, data + off, (size_t)len);
    recs++;
  }
  char line[128];
  snprintf(line, sizeof line, "rank %d: %ld of %ld bytes, %ld records, sum %016llx\n", rank,
           total, total, recs, (unsigned long long)h);
  hz_print_ranked(line);
  free(data);
  MPI_Finalize();
  return 0;
}
