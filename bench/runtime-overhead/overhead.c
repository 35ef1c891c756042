/* Cost of the runtime on the main thread's read path, on a file in the page cache (no
 * storage latency to hide, so any difference is pure overhead).
 *
 * In one process it alternates two loops over the same file, R times each: plain pread
 * calls and ppios_pread calls, in reads of B KiB, and prints the median time per read of
 * each and their ratio. What ppios_pread does depends on the environment:
 * PPIOS_MODE=off passes through; PPIOS_MODE=ppios with --idle-pt also starts a prefetch
 * thread that has nothing to do, so every read looks in the cache, misses, takes the I/O
 * token and a coordinator slot, and reads.
 *
 * usage: ppios-overhead [--idle-pt] <file> <read-kib> <repetitions> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ppios/ppios.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void idle_prefetch_thread(void *ctx) { (void)ctx; }

/* Reads the whole file once; returns the number of reads. */
static long read_all(int fd, char *buf, size_t block, off_t size, int through_ppios, unsigned *sum) {
  long reads = 0;
  for (off_t off = 0; off < size; off += (off_t)block) {
    ssize_t n = through_ppios ? ppios_pread(fd, buf, block, off) : pread(fd, buf, block, off);
    if (n <= 0) {
      perror("pread");
      exit(1);
    }
    *sum += (unsigned char)buf[n - 1];
    ++reads;
  }
  return reads;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int idle_pt = argc > 1 && strcmp(argv[1], "--idle-pt") == 0;
  if (argc != 4 + idle_pt) {
    fprintf(stderr, "usage: ppios-overhead [--idle-pt] <file> <read-kib> <repetitions>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *path = argv[1 + idle_pt];
  size_t block = (size_t)atol(argv[2 + idle_pt]) << 10;
  int reps = atoi(argv[3 + idle_pt]);
  if (block == 0 || reps <= 0) {
    fprintf(stderr, "ppios-overhead: read size and repetitions must be positive\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (idle_pt) ppios_pt_start(idle_prefetch_thread, NULL, 0);
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char *buf = malloc(block);
  unsigned sum = 0;
  read_all(fd, buf, block, st.st_size, 0, &sum); /* warm the page cache */
  double *plain = malloc(sizeof(double) * (size_t)reps), *wrapped = malloc(sizeof(double) * (size_t)reps);
  long reads = 0;
  for (int r = 0; r < reps; ++r) {
    /* Alternate which loop goes first, so drift on a noisy machine hits both alike. */
    for (int k = 0; k < 2; ++k) {
      int through = (k + r) % 2;
      double t = now_s();
      reads = read_all(fd, buf, block, st.st_size, through, &sum);
      (through ? wrapped : plain)[r] = (now_s() - t) / (double)reads;
    }
  }
  const char *mode = getenv("PPIOS_MODE") ? getenv("PPIOS_MODE") : "ppios";
  double p = median(plain, reps), w = median(wrapped, reps);
  printf("mode=%s idle_pt=%d read_kib=%zu reads_per_rep=%ld reps=%d plain_us=%.2f ppios_us=%.2f ratio=%.4f (checksum %u)\n",
         mode, idle_pt, block >> 10, reads, reps, p * 1e6, w * 1e6, w / p, sum);
  free(plain);
  free(wrapped);
  free(buf);
  close(fd);
  ppios_MPI_Finalize();
  return 0;
}
