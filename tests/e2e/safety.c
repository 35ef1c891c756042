/* One program per way a prefetch thread can go wrong, for the PT-safety tests: whatever
 * the PT does, the program must print exactly what it prints without ppios, exit the
 * same way and never hang. The MT reads the input chunk by chunk with plain POSIX/stdio
 * calls (a wrapped build routes them to the runtime) and prints checksums.
 *
 * usage: safety <scenario> <input> <chunk-bytes>
 *   scenarios: segv fpe abort abort_free exit bounds budget stuck stuck_nopoll
 *                        (the PT fails; the MT reads the input)
 *              foreign   the PT reads/seeks/closes the MT's descriptor, stream and stdin
 *              fifo      the MT reads a FIFO a thread of its own writes, and stdin
 *              signal    handlers that read with pread interrupt the MT's reads
 *              fork      children forked while the PT prefetches read the input
 *              mt_segv   the MT dereferences NULL while the PT prefetches: the process
 *                        dies as it would without ppios
 *              mt_segv_handler  the same with a SIGSEGV handler of the program's,
 *                        installed after the PT started: it runs, and exits 3
 *              mt_abort, mt_abort_handler  the same with abort() (SIGABRT)
 *              pipeslot  rank 0 blocks reading a FIFO whose writer waits until rank 1
 *                        has read its input (under a cap of one storage access: the
 *                        blocked read must not hold the slot)
 *
 * safety_ppios.c adds the PT (SAFETY_PT defined): it includes this file. */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <stdint.h>
#include <unistd.h>

#include "common.h"

struct safety {
  const char *scenario;
  const char *path;
  size_t chunk, size;
  int mt_fd;
  FILE *mt_stream;
};

#ifndef SAFETY_PT
#define START_PT(s) ((void)0)
#define AWAIT_PT_FAULT(s) ((void)0)
#endif

static int is(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* Sequential read() of the whole input: a moved offset changes the checksum. */
static uint64_t read_all(int fd, size_t chunk, int rounds) {
  char *buf = malloc(chunk);
  uint64_t sum = FNV_START, work = 0;
  ssize_t n;
  while ((n = read(fd, buf, chunk)) > 0) {
    sum = fnv1a(sum, buf, (size_t)n);
    work += busy_work(buf, (size_t)n, rounds);
  }
  free(buf);
  return sum ^ (work & 0);
}

static uint64_t pread_all(int fd, size_t size, size_t chunk, int rounds) {
  char *buf = malloc(chunk);
  uint64_t sum = FNV_START, work = 0;
  for (size_t off = 0; off < size; off += chunk) {
    ssize_t n;
    do n = pread(fd, buf, min_size(chunk, size - off), (off_t)off);
    while (n < 0 && errno == EINTR);
    sum = fnv1a(sum, buf, n > 0 ? (size_t)n : 0);
    work += busy_work(buf, n > 0 ? (size_t)n : 0, rounds);
  }
  free(buf);
  return sum ^ (work & 0);
}

/* ---------------------------------------------------------------- fifo */
struct fifo_writer {
  const char *path;
  size_t bytes;
  const char *wait_for;  /* a file to wait for before writing, or NULL */
};

static void *write_fifo(void *arg) {
  struct fifo_writer *w = arg;
  int fd = open(w->path, O_WRONLY);
  struct stat flag;
  while (w->wait_for != NULL && stat(w->wait_for, &flag) != 0) usleep(1000);
  char block[4096];
  for (size_t done = 0; done < w->bytes;) {
    size_t n = min_size(sizeof block, w->bytes - done);
    for (size_t i = 0; i < n; ++i) block[i] = (char)((done + i) * 7 + 3);
    ssize_t k = write(fd, block, n);
    if (k <= 0) break;
    done += (size_t)k;
  }
  close(fd);
  return NULL;
}

/* stdin as a pipe a thread of ours writes (mpirun's own stdin forwarding is not what is
 * tested here, and has crashed mpirun itself). */
static void *write_stdin(void *arg) {
  int fd = (int)(intptr_t)arg;
  char block[4096];
  for (size_t done = 0; done < (1u << 20); done += sizeof block) {
    for (size_t i = 0; i < sizeof block; ++i) block[i] = (char)((done + i) * 13 + 5);
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block) break;
  }
  close(fd);
  return NULL;
}

static pthread_t pipe_into_stdin(void) {
  int p[2];
  pthread_t writer;
  pipe(p);
  dup2(p[0], STDIN_FILENO);
  close(p[0]);
  pthread_create(&writer, NULL, write_stdin, (void *)(intptr_t)p[1]);
  return writer;
}

/* ---------------------------------------------------------------- signal */
static int g_signal_fd = -1;
static volatile sig_atomic_t g_handler_reads, g_handler_bad;
static uint64_t g_first_sum;

static void read_in_handler(void) {
  char buf[512];
  int saved = errno;
  ssize_t n = pread(g_signal_fd, buf, sizeof buf, 0);
  if (n != (ssize_t)sizeof buf || fnv1a(FNV_START, buf, sizeof buf) != g_first_sum) g_handler_bad = 1;
  g_handler_reads++;
  errno = saved;
}
static void on_alarm(int sig) { (void)sig; read_in_handler(); }
static void on_usr1(int sig, siginfo_t *info, void *ctx) { (void)sig; (void)info; (void)ctx; read_in_handler(); }
static void other_handler(int sig) { (void)sig; }
static void on_fatal(int sig) {
  static const char segv[] = "the program's SIGSEGV handler ran\n";
  static const char abrt[] = "the program's SIGABRT handler ran\n";
  if (sig == SIGABRT) write(STDOUT_FILENO, abrt, sizeof abrt - 1);
  else write(STDOUT_FILENO, segv, sizeof segv - 1);
  _exit(3);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: safety <scenario> <input> <chunk-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  struct safety s = {argv[1], argv[2], (size_t)atol(argv[3]), 0, -1, NULL};
  struct stat st;
  stat(s.path, &st);
  s.size = (size_t)st.st_size;
  char line[512];

  if (is(s.scenario, "fifo")) {
    /* A FIFO the MT reads while a thread writes it, and whatever stdin holds (rank 0). */
    char fifo[64];
    snprintf(fifo, sizeof fifo, "fifo.%d", rank);
    mkfifo(fifo, 0600);
    s.path = fifo;
    pthread_t stdin_writer = pipe_into_stdin();
    START_PT(&s);  /* before the writer exists: an open that blocked would hang the PT */
    usleep(100000);
    struct fifo_writer w = {fifo, 3u << 20, NULL};
    pthread_t writer;
    pthread_create(&writer, NULL, write_fifo, &w);
    int fd = open(fifo, O_RDONLY);
    uint64_t fifo_sum = read_all(fd, s.chunk, 1);
    close(fd);
    pthread_join(writer, NULL);
    unlink(fifo);
    uint64_t stdin_sum = read_all(STDIN_FILENO, s.chunk, 1);
    pthread_join(stdin_writer, NULL);
    snprintf(line, sizeof line, "rank %d: fifo %016llx stdin %016llx\n", rank,
             (unsigned long long)fifo_sum, (unsigned long long)stdin_sum);
  } else if (!strncmp(s.scenario, "mt_segv", 7) || !strncmp(s.scenario, "mt_abort", 8)) {
    int aborts = !strncmp(s.scenario, "mt_abort", 8);
    s.mt_fd = open(s.path, O_RDONLY);
    START_PT(&s);
    if (strstr(s.scenario, "_handler") != NULL) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_fatal;
      sigemptyset(&sa.sa_mask);
      sigaction(aborts ? SIGABRT : SIGSEGV, &sa, NULL);
    }
    uint64_t sum = pread_all(s.mt_fd, s.size / 2, s.chunk, 2);
    printf("rank %d: sum %016llx\n", rank, (unsigned long long)sum);
    fflush(stdout);
    if (aborts) abort();
    volatile int *null = NULL;
    *null = (int)sum;
    snprintf(line, sizeof line, "rank %d: not reached\n", rank);
  } else if (is(s.scenario, "pipeslot")) {
    uint64_t sum = 0;
    if (rank == 0) {
      mkfifo("slot.fifo", 0600);
      struct fifo_writer w = {"slot.fifo", 65536, "done.flag"};
      pthread_t writer;
      pthread_create(&writer, NULL, write_fifo, &w);
      int fd = open("slot.fifo", O_RDONLY);
      sum = read_all(fd, s.chunk, 0);
      close(fd);
      pthread_join(writer, NULL);
      unlink("slot.fifo");
    } else if (rank == 1) {
      usleep(300000);  /* rank 0 is blocked in its read by now */
      int fd = open(s.path, O_RDONLY);
      sum = read_all(fd, s.chunk, 0);
      close(fd);
      close(open("done.flag.tmp", O_WRONLY | O_CREAT, 0600));
      rename("done.flag.tmp", "done.flag");
    }
    snprintf(line, sizeof line, "rank %d: sum %016llx\n", rank, (unsigned long long)sum);
  } else if (is(s.scenario, "signal")) {
    s.mt_fd = g_signal_fd = open(s.path, O_RDONLY);
    char first[512];
    pread(g_signal_fd, first, sizeof first, 0);
    g_first_sum = fnv1a(FNV_START, first, sizeof first);
    /* The program sees its own handlers as the old ones, never the runtime's. */
    signal(SIGALRM, other_handler);
    int old_is_ours = signal(SIGALRM, on_alarm) == other_handler;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR1, NULL, &old);
    int query_is_ours = (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_usr1;
    START_PT(&s);
    /* SIGALRM every 200 us, always to this thread (MPI's threads would take a process
     * signal too). */
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGALRM;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    timer_t timer;
    timer_create(CLOCK_MONOTONIC, &ev, &timer);
    struct itimerspec every = {{0, 200000}, {0, 200000}};
    timer_settime(timer, 0, &every, NULL);
    uint64_t sum = 0;
    for (int pass = 0; pass < 4; ++pass) {
      sum ^= pread_all(g_signal_fd, s.size, s.chunk, 1);
      raise(SIGUSR1);
    }
    timer_delete(timer);
    signal(SIGALRM, SIG_IGN);
    close(g_signal_fd);
    snprintf(line, sizeof line, "rank %d: sum %016llx handler reads %s, bad %d, old %d %d\n", rank,
             (unsigned long long)sum, g_handler_reads > 4 ? "many" : "few", (int)g_handler_bad,
             old_is_ours, query_is_ours);
  } else if (is(s.scenario, "fork")) {
    s.mt_fd = open(s.path, O_RDONLY);
    START_PT(&s);
    uint64_t expected = pread_all(s.mt_fd, s.size, s.chunk, 0);
    int children_ok = 0, children = 0;
    for (int i = 0; i < 20; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        /* The child reads through the runtime's wrappers (no PT there) and through stdio. */
        int fd = open(s.path, O_RDONLY);
        int ok = pread_all(fd, s.size, s.chunk, 0) == expected && read_all(fd, s.chunk, 0) == expected;
        close(fd);
        FILE *fp = fopen(s.path, "rb");
        char b[100];
        ok = ok && fp && fread(b, 1, sizeof b, fp) == min_size(sizeof b, s.size);
        if (fp) fclose(fp);
        exit(ok ? 0 : 1);  /* exit, not _exit: the child must not write the parent's stats */
      }
      int status = 0;
      ++children;
      if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        ++children_ok;
      pread_all(s.mt_fd, s.size, s.chunk, 0);
    }
    close(s.mt_fd);
    snprintf(line, sizeof line, "rank %d: sum %016llx children %d ok %d\n", rank,
             (unsigned long long)expected, children, children_ok);
  } else {
    /* The PT fails (or meddles) while the MT reads: sequential read() through one
     * descriptor, then fread through one stream, then stdin (rank 0). */
    int foreign = is(s.scenario, "foreign");
    pthread_t stdin_writer = (pthread_t)0;
    if (foreign) stdin_writer = pipe_into_stdin();
    s.mt_fd = open(s.path, O_RDONLY);
    s.mt_stream = fopen(s.path, "rb");
    START_PT(&s);
    uint64_t sum = read_all(s.mt_fd, s.chunk, 16);
    off_t end = lseek(s.mt_fd, 0, SEEK_CUR);
    char *buf = malloc(s.chunk);
    uint64_t fsum = FNV_START;
    size_t n;
    while ((n = fread(buf, 1, s.chunk, s.mt_stream)) > 0) fsum = fnv1a(fsum, buf, n);
    long fend = ftell(s.mt_stream);
    free(buf);
    int closed_ok = close(s.mt_fd) == 0 && fclose(s.mt_stream) == 0;
    uint64_t stdin_sum = 0;
    if (foreign) {
      stdin_sum = read_all(STDIN_FILENO, s.chunk, 0);
      pthread_join(stdin_writer, NULL);
    }
    snprintf(line, sizeof line, "rank %d: read %016llx at %lld fread %016llx at %ld closed %d stdin %016llx\n",
             rank, (unsigned long long)sum, (long long)end, (unsigned long long)fsum, fend, closed_ok,
             (unsigned long long)stdin_sum);
  }
  AWAIT_PT_FAULT(&s);  /* a PT meant to fault gets there before the MT finishes */
  print_in_rank_order(line);
  stamp_exit(rank);
  MPI_Finalize();
  return 0;
}
