/* safety.c with a prefetch thread, as ppios-cc now builds programs: the MT's calls are
 * the program's own (linked with -Wl,--wrap for interpose.def), the PT is written by hand
 * and goes wrong in the way the scenario names. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "ppios/ppios.h"

struct safety;
static void start_pt(struct safety *s);
#define SAFETY_PT 1
#define START_PT(s) start_pt(s)
static void await_pt_fault(const struct safety *s);
#define AWAIT_PT_FAULT(s) await_pt_fault(s)
#include "safety.c"

/* Set by the PT right before the end it is meant to come to (a fault, ppios_pt_exit, an
 * index out of bounds, an allocation over the budget). */
static volatile sig_atomic_t g_pt_ending;

/* Prefetches `count` chunks of the input under the MT's sequence numbers for its read()s
 * (the first transfers of the default scenarios). */
static void prefetch_chunks(struct safety *s, int count) {
  int fd = ppios_pt_open(s->path, O_RDONLY);
  ppios_seq_t seq = ppios_mt_seq();
  for (int i = 0; i < count && (size_t)i * s->chunk < s->size; ++i) {
    ppios_pt_poll();
    ppios_prefetch_pread(fd, s->chunk, (off_t)((size_t)i * s->chunk), ++seq, 0, NULL);
  }
  ppios_pt_close(fd);
}

static void prefetch_thread(void *arg) {
  struct safety *s = arg;
  if (is(s->scenario, "segv")) {
    prefetch_chunks(s, 1);
    g_pt_ending = 1;
    volatile int *null = NULL;
    *null = 1;
  } else if (is(s->scenario, "fpe")) {
    prefetch_chunks(s, 1);
    g_pt_ending = 1;
    volatile int zero = 0, one = 1;
    volatile int x = one / zero;
    (void)x;
  } else if (is(s->scenario, "abort")) {
    /* A library's failed check: abort() raises SIGABRT on the PT's own thread. */
    prefetch_chunks(s, 1);
    g_pt_ending = 1;
    abort();
  } else if (is(s->scenario, "abort_free")) {
    /* libc's free() of a pointer the allocator never returned: glibc's heap check prints
     * its line and aborts (before it takes any lock of the allocator's). */
    prefetch_chunks(s, 1);
    char *block = malloc(64);
    volatile size_t inside = 1;  /* not at compile time: the compiler would warn */
    g_pt_ending = 1;
    free(block + inside);
  } else if (is(s->scenario, "exit")) {
    prefetch_chunks(s, 4);
    g_pt_ending = 1;
    ppios_pt_exit();
  } else if (is(s->scenario, "bounds")) {
    long long table[4] = {0, 1, 2, 3};
    g_pt_ending = 1;
    for (long long i = 0;; ++i) table[ppios_pt_index(i, 4)] += i;
  } else if (is(s->scenario, "budget")) {
    /* Small tables fit; one larger than PPIOS_CACHE_MB stops the PT quietly. */
    char *a = ppios_pt_malloc(1000);
    int *b = ppios_pt_calloc(100, sizeof(int));
    a = ppios_pt_realloc(a, 5000);
    a[4999] = (char)b[99];
    ppios_pt_free(b);
    prefetch_chunks(s, 2);
    g_pt_ending = 1;
    char *huge = ppios_pt_malloc((size_t)64 << 20);
    huge[0] = 1;  /* never reached */
  } else if (is(s->scenario, "stuck")) {
    for (;;) {
      ppios_pt_poll();
      usleep(100);  /* stuck, but leaving the cores to the MTs: the test times the exit */
    }
  } else if (is(s->scenario, "stuck_nopoll")) {
    /* Never polls and never calls the runtime: nothing tells it the run is over, and
     * shutdown waits for it at most its grace time before the process exits. */
    for (;;) usleep(100);
  } else if (is(s->scenario, "foreign")) {
    /* The PT's slice got hold of the MT's descriptor, stream and stdin: every call on
     * them must be refused, or the MT's checksums and positions change. */
    char buf[4096];
    for (int i = 0; i < 200; ++i) {
      lseek(s->mt_fd, 12345, SEEK_SET);
      read(s->mt_fd, buf, sizeof buf);
      fseek(s->mt_stream, 777, SEEK_SET);
      fread(buf, 1, sizeof buf, s->mt_stream);
      read(STDIN_FILENO, buf, sizeof buf);
      ppios_prefetch_read_copy(s->mt_fd, buf, sizeof buf, 1, 0, NULL);
      ppios_prefetch_read_copy(STDIN_FILENO, buf, sizeof buf, 1, 0, NULL);
      usleep(500);
    }
    close(s->mt_fd);
    fclose(s->mt_stream);
    close(STDIN_FILENO);
  } else if (is(s->scenario, "fifo")) {
    /* Opening a FIFO, /dev/stdin or a tty must fail at once and read nothing. */
    char buf[4096];
    for (int i = 0; i < 50; ++i) {
      int fd = ppios_pt_open(s->path, O_RDONLY);
      if (fd >= 0) ppios_prefetch_read_copy(fd, buf, sizeof buf, 1, 0, NULL);
      int in = ppios_pt_open("/dev/stdin", O_RDONLY);
      if (in >= 0) ppios_prefetch_read_copy(in, buf, sizeof buf, 1, 0, NULL);
      FILE *fp = ppios_pt_fopen("/dev/stdin", "r");
      if (fp != NULL) ppios_prefetch_fread_copy(buf, 1, sizeof buf, fp, 1, 0, NULL);
      FILE *plain = fopen(s->path, "r");  /* the wrapper makes it the PT's own open */
      if (plain != NULL) fread(buf, 1, sizeof buf, plain);
      usleep(20000);
    }
  } else if (is(s->scenario, "signal") || is(s->scenario, "fork") || !strncmp(s->scenario, "mt_", 3)) {
    /* prefetch the MT's preads, pass after pass */
    int fd = ppios_pt_open(s->path, O_RDONLY);
    ppios_seq_t seq = ppios_mt_seq();
    for (int pass = 0; pass < 25; ++pass) {
      for (size_t off = 0; off < s->size; off += s->chunk) {
        ppios_pt_poll();
        ppios_prefetch_pread(fd, s->chunk, (off_t)off, ++seq, 0, NULL);
      }
    }
  }
}

static void start_pt(struct safety *s) { ppios_pt_start(prefetch_thread, s, sizeof *s); }

/* On a loaded machine the MT could read everything and shut the runtime down before the
 * PT reaches the end its scenario makes (the test then sees pt_stop "stopped"; seen for
 * fpe and exit): there the MT waits, at most 60 s, until the PT is about to end, and a
 * little more for the end to be recorded. */
static void await_pt_fault(const struct safety *s) {
  if (!is(s->scenario, "segv") && !is(s->scenario, "fpe") && !is(s->scenario, "abort") &&
      !is(s->scenario, "abort_free") && !is(s->scenario, "exit") && !is(s->scenario, "bounds") &&
      !is(s->scenario, "budget"))
    return;
  const char *mode = getenv("PPIOS_MODE");
  if (mode != NULL && is(mode, "off")) return;  /* no PT */
  for (int i = 0; i < 60000 && !g_pt_ending; ++i) usleep(1000);
  usleep(50000);
}
