/* Cost of the runtime on the main thread's read path, per call, on a file in the page
 * cache (no storage latency to hide, so any difference is pure overhead).
 *
 * In one process it alternates two passes over the same reads, R times each: the plain
 * libc call, and the runtime's wrapper of it (ppios_read, ppios_pread, ppios_fread), and
 * prints the median time per call of each and their ratio. What the wrapper does depends
 * on the environment and the flags:
 *   PPIOS_MODE=off          the wrapper passes the call through, counting it;
 *   PPIOS_MODE=ppios        nothing is prefetched: every call looks at what it reaches
 *                           and takes a coordinator slot;
 *   --idle-pt               a prefetch thread runs that has nothing to do;
 *   --served                a prefetch thread fetches every wrapped pass's reads before
 *                           the pass (read and pread only), so that each call is served
 *                           from the cache; the hit ratio is in PPIOS_STATS.
 *
 * usage: ppios-overhead [--idle-pt | --served] <file> <read|pread|fread> <bytes> <calls> <reps> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ppios/ppios.h"

enum api { API_READ, API_PREAD, API_FREAD };

struct pass {
  enum api api;
  const char *path;
  size_t bytes;  /* per call */
  long calls;    /* per pass */
  int reps;
};

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

static void fail(const char *what) {
  perror(what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One pass: `calls` reads of `bytes` from the start of the file, through the wrapper or
 * not. Returns a checksum of what was read. */
static unsigned one_pass(const struct pass *p, int fd, FILE *stream, char *buf, int wrapped) {
  unsigned sum = 0;
  if (p->api == API_READ && lseek(fd, 0, SEEK_SET) != 0) fail("lseek");
  if (p->api == API_FREAD && fseek(stream, 0, SEEK_SET) != 0) fail("fseek");
  for (long i = 0; i < p->calls; ++i) {
    ssize_t n;
    off_t at = (off_t)i * (off_t)p->bytes;
    switch (p->api) {
    case API_READ:
      n = wrapped ? ppios_read(fd, buf, p->bytes) : read(fd, buf, p->bytes);
      break;
    case API_PREAD:
      n = wrapped ? ppios_pread(fd, buf, p->bytes, at) : pread(fd, buf, p->bytes, at);
      break;
    default:
      n = (ssize_t)(wrapped ? ppios_fread(buf, 1, p->bytes, stream) : fread(buf, 1, p->bytes, stream));
      break;
    }
    if (n != (ssize_t)p->bytes) {
      fprintf(stderr, "ppios-overhead: short read at call %ld (the file is too small)\n", i);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    sum += (unsigned char)buf[n - 1];
  }
  return sum;
}

/* --served: the prefetch thread fetches the reads of every wrapped pass, in the order the
 * MT makes them (its sequence numbers count the MT's wrapped calls only). */
struct served_ctx {
  int fd;            /* the PT's own descriptor of the file */
  ppios_seq_t seq0;  /* the MT's transfer count when the PT starts */
  struct pass p;
};

static void serving_thread(void *arg) {
  const struct served_ctx *ctx = arg;
  ppios_seq_t seq = ctx->seq0;
  for (int r = 0; r < ctx->p.reps; ++r)
    for (long i = 0; i < ctx->p.calls; ++i, ppios_pt_poll())
      ppios_prefetch_pread(ctx->fd, ctx->p.bytes, (off_t)i * (off_t)ctx->p.bytes, ++seq, 0, "overhead");
  ppios_pt_close(ctx->fd);
}

static void idle_thread(void *ctx) { (void)ctx; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int idle_pt = 0, served = 0, a = 1;
  for (; a < argc && strncmp(argv[a], "--", 2) == 0; ++a) {
    if (strcmp(argv[a], "--idle-pt") == 0) idle_pt = 1;
    else if (strcmp(argv[a], "--served") == 0) served = 1;
    else break;
  }
  const char *usage = "usage: ppios-overhead [--idle-pt | --served] <file> <read|pread|fread> <bytes> <calls> <reps>\n";
  if (argc - a != 5 || (idle_pt && served)) {
    fputs(usage, stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  struct pass p = {API_READ, argv[a], (size_t)atol(argv[a + 2]), atol(argv[a + 3]), atoi(argv[a + 4])};
  if (strcmp(argv[a + 1], "pread") == 0) p.api = API_PREAD;
  else if (strcmp(argv[a + 1], "fread") == 0) p.api = API_FREAD;
  else if (strcmp(argv[a + 1], "read") != 0) {
    fputs(usage, stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (p.bytes == 0 || p.calls <= 0 || p.reps <= 0 || (served && p.api == API_FREAD)) {
    fprintf(stderr, "ppios-overhead: bytes, calls and reps must be positive; --served is for read and pread\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int fd = open(p.path, O_RDONLY);
  FILE *stream = fopen(p.path, "r");
  struct stat st;
  if (fd < 0 || stream == NULL || fstat(fd, &st) != 0) fail(p.path);
  if ((off_t)p.bytes * p.calls > st.st_size) {
    fprintf(stderr, "ppios-overhead: %s holds fewer than %ld x %zu bytes\n", p.path, p.calls, p.bytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char *buf = malloc(p.bytes);
  unsigned sum = one_pass(&p, fd, stream, buf, 0); /* warm the page cache */
  if (idle_pt) ppios_pt_start(idle_thread, NULL, 0);
  if (served) {
    struct served_ctx ctx = {ppios_pt_reopen_fd(fd), ppios_mt_seq(), p};
    ppios_pt_start(serving_thread, &ctx, sizeof ctx);
    sleep(2); /* the thread fetches ahead of the first wrapped pass */
  }
  double *plain = malloc(sizeof(double) * (size_t)p.reps), *wrapped = malloc(sizeof(double) * (size_t)p.reps);
  for (int r = 0; r < p.reps; ++r) {
    /* Alternate which pass goes first, so drift on a noisy machine hits both alike. */
    for (int k = 0; k < 2; ++k) {
      int through = (k + r) % 2;
      double t = now_s();
      sum += one_pass(&p, fd, stream, buf, through);
      (through ? wrapped : plain)[r] = (now_s() - t) / (double)p.calls;
    }
  }
  const char *mode = getenv("PPIOS_MODE") ? getenv("PPIOS_MODE") : "ppios";
  double pl = median(plain, p.reps), w = median(wrapped, p.reps);
  printf("api=%s bytes=%zu mode=%s pt=%s calls=%ld reps=%d plain_ns=%.0f ppios_ns=%.0f ratio=%.3f (checksum %u)\n",
         argv[a + 1], p.bytes, mode, served ? "served" : idle_pt ? "idle" : "none", p.calls, p.reps, pl * 1e9,
         w * 1e9, w / pl, sum);
  free(plain);
  free(wrapped);
  free(buf);
  fclose(stream);
  close(fd);
  ppios_MPI_Finalize();
  return 0;
}
