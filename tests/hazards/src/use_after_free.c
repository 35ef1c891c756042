/* Case 3: a heap table freed after an early stop. The offsets of the blocks to read come
 * from a global table (malloc'd, loaded from an index file) through a helper. The ranks
 * stop early when all of them agree they have seen enough (MPI_Allreduce); the table is
 * freed then, and the program goes on with other work (a sequential scan of a trailer).
 * usage: use_after_free <index.bin> <data.bin> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hz.h"

#define BS 512
#define NOFF (1 << 16) /* 512 KiB of offsets: an mmap'd allocation, unmapped by free */

static int64_t *g_offsets;
static long g_noffsets;
static int g_done;

static off_t block_offset(long i, long nblocks) {
  return (off_t)((g_offsets[i % g_noffsets] % nblocks) * BS);
}

static void load_offsets(const char *path) {
  int fd = open(path, O_RDONLY);
  size_t want = NOFF * sizeof *g_offsets, got = 0;
  g_offsets = malloc(want);
  if (fd < 0 || !g_offsets) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  while (got < want) {
    ssize_t n = read(fd, (char *)g_offsets + got, want - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  g_noffsets = (long)(got / sizeof *g_offsets);
  {
    long i;
    for (i = 0; i < g_noffsets; i++)
      if (g_offsets[i] < 0) g_offsets[i] = -g_offsets[i];
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  load_offsets(argv[1]);
  int fd = open(argv[2], O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  long nblocks = (long)(st.st_size / BS) / 2; /* the first half: blocks; the second: trailer */

  unsigned char buf[BS];
  uint64_t h = 0;
  long used = 0;
  for (long i = 0; i < nblocks; i++) {
    ssize_t n = pread(fd, buf, BS, block_offset(i, nblocks));
    if (n <= 0) break;
    h = hz_sum(h, buf, (size_t)n);
    used++;
    if (used % 16 == 0) {
      int mine = (h & 7) == (uint64_t)(rank & 7) || used >= 200, all = 0;
      MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
      if (all) {
        free(g_offsets);
        g_done = 1;
        break;
      }
    }
  }

  /* Something else: a sequential scan of the second half, then the blocks a still
   * loaded table would name (none once it is freed). */
  uint64_t h2 = 0;
  long tail = 0;
  lseek(fd, (off_t)nblocks * BS, SEEK_SET);
  for (;;) {
    ssize_t n = read(fd, buf, BS);
    if (n <= 0) break;
    h2 = hz_sum(h2, buf, (size_t)n);
    tail += n;
  }
  for (long i = 0; i < 8; i++) {
    if (g_done) break;
    ssize_t n = pread(fd, buf, BS, block_offset(i, nblocks));
    if (n > 0) h2 = hz_sum(h2, buf, (size_t)n);
  }
  close(fd);
  char line[160];
  snprintf(line, sizeof line, "rank %d: blocks %ld sum %016llx tail %ld sum %016llx\n", rank,
           used, (unsigned long long)h, tail, (unsigned long long)h2);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
