/* Shape (issue 9, 5): a `const struct plan *` passed down to the helpers that read. main
 * fills the plan; run_plan walks it and load_block reads one block with pread at an
 * offset computed from the plan's fields. Each rank reads every nprocs-th block and prints
 * a CRC of what it read.
 * usage: struct_plan <shapes.bin> <block-bytes> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

struct plan {
  const char *path;
  long block;
  long nblocks;
  int first, stride;
};

struct tally {
  uint32_t crc;
  long blocks, bytes;
};

static long load_block(int fd, const struct plan *p, long i, unsigned char *buf) {
  return (long)pread(fd, buf, (size_t)p->block, (off_t)(i * p->block));
}

static void run_plan(const struct plan *p, struct tally *t) {
  int fd = open(p->path, O_RDONLY);
  if (fd < 0) {
    perror(p->path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  unsigned char *buf = malloc((size_t)p->block);
  for (long i = p->first; i < p->nblocks; i += p->stride) {
    long n = load_block(fd, p, i, buf);
    if (n <= 0) break;
    t->crc = crc32_update(t->crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    t->bytes += n;
    t->blocks++;
  }
  free(buf);
  close(fd);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: struct_plan <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  struct stat st;
  if (stat(argv[1], &st) != 0) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct plan plan;
  plan.path = argv[1];
  plan.block = atol(argv[2]);
  plan.nblocks = ((long)st.st_size + plan.block - 1) / plan.block;
  plan.first = rank;
  plan.stride = nprocs;
  struct tally t = {0, 0, 0};
  run_plan(&plan, &t);

  char line[128];
  snprintf(line, sizeof line, "rank %d: blocks %ld bytes %ld crc %08x\n", rank, t.blocks,
           t.bytes, (unsigned)t.crc);
  print_ranked(line);
  long total = 0;
  MPI_Reduce(&t.bytes, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("total bytes %ld of %ld\n", total, (long)st.st_size);
  MPI_Finalize();
  return 0;
}
