/* late.c's prefetching build, written by hand with a PT that is always late: before each
 * prefetch it waits until the MT has started that very transfer (as a PT whose slice
 * computes slower than the MT would). Every prefetch is then useless; the runtime must
 * notice and back the file off (pt_backoff_late, pt_backoff_skips), and the program's
 * output stays the plain build's. The MT's calls are the program's own, linked with
 * --wrap. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "ppios/ppios.h"

struct pt_ctx {
  const char *path;
  size_t chunk, begin, end;
  ppios_seq_t seq;
};

static void prefetch_thread(void *arg) {
  struct pt_ctx *c = arg;
  ppios_seq_t seq = c->seq;
  int fd = ppios_pt_open(c->path, O_RDONLY);
  for (size_t off = c->begin; off < c->end; off += c->chunk) {
    ++seq;
    while (ppios_mt_seq() < seq) {  /* late on purpose; polls so that it never outlives the run */
      struct timespec pause = {0, 100000};
      nanosleep(&pause, NULL);
      ppios_pt_poll();
    }
    ppios_prefetch_pread(fd, min_size(c->chunk, c->end - off), (off_t)off, seq, 0, NULL);
  }
  ppios_pt_close(fd);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: late <input> <chunk-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t chunk = (size_t)atol(argv[2]);
  struct stat st;
  stat(argv[1], &st);
  size_t size = (size_t)st.st_size;
  size_t part = (size + nprocs - 1) / nprocs;
  size_t begin = min_size(size, part * rank), end = min_size(size, begin + part);
  {
    struct pt_ctx ctx = {argv[1], chunk, begin, end, ppios_mt_seq()};
    ppios_pt_start(prefetch_thread, &ctx, sizeof ctx);
  }
  char *buf = malloc(chunk);
  uint64_t sum = FNV_START;
  int fd = open(argv[1], O_RDONLY);
  for (size_t off = begin; off < end; off += chunk) {
    ssize_t n = pread(fd, buf, min_size(chunk, end - off), (off_t)off);
    sum = fnv1a(sum, buf, (size_t)n);
    /* A little work per chunk, so that the PT sees every transfer start. */
    struct timespec pause = {0, 300000};
    nanosleep(&pause, NULL);
  }
  close(fd);
  char line[128];
  snprintf(line, sizeof line, "rank %d sum %016llx\n", rank, (unsigned long long)sum);
  print_in_rank_order(line);
  free(buf);
  MPI_Finalize();
  return 0;
}
