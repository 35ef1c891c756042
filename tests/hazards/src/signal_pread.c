/* Case 9: pread in a signal handler. A 1 ms interval timer's SIGALRM handler preads the
 * file's 32-byte header and checks it against the copy main read at the start, while the
 * main loop reads the file with pread (and computes). Timing decides how often the
 * handler runs; the output only says whether it ran and whether it ever saw wrong bytes.
 * usage: signal_pread <data.bin> */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "hz.h"

#define BS 4096

static int g_fd;
static unsigned char g_header[32];
static volatile sig_atomic_t g_ticks, g_bad;

static void on_alarm(int sig) {
  unsigned char h[32];
  int saved = errno;
  (void)sig;
  if (pread(g_fd, h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h, g_header, sizeof h) != 0)
    g_bad = 1;
  g_ticks++;
  errno = saved;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  g_fd = open(argv[1], O_RDONLY);
  if (g_fd < 0 || pread(g_fd, g_header, sizeof g_header, 0) != (ssize_t)sizeof g_header) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct stat st;
  fstat(g_fd, &st);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 1000}, {0, 1000}};
  setitimer(ITIMER_REAL, &it, NULL);

  unsigned char buf[BS];
  uint64_t h = 0;
  long bytes = 0;
  for (int pass = 0; pass < 3; pass++) {
    for (long off = 0; off < st.st_size; off += BS) {
      ssize_t n = pread(g_fd, buf, BS, off);
      if (n < 0 && errno == EINTR) {
        off -= BS;
        continue;
      }
      if (n <= 0) break;
      h = hz_sum(h, buf, (size_t)n);
      for (int r = 0; r < 4; r++) h = hz_sum(h, buf, (size_t)n);
      bytes += n;
    }
  }
  while (g_ticks < 5) usleep(1000); /* let the handler run a few times at least */
  struct itimerval stop = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &stop, NULL);
  close(g_fd);
  char line[160];
  snprintf(line, sizeof line, "rank %d: bytes %ld sum %016llx; handler ran: %s; wrong bytes: %s\n",
           rank, bytes, (unsigned long long)h, g_ticks > 0 ? "yes" : "no", g_bad ? "yes" : "no");
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
