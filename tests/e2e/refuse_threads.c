/* LD_PRELOAD'ed into a prefetching build: pthread_create refuses (EAGAIN, as under a
 * thread limit or an address-space limit) the threads libppios itself starts, the ones
 * REFUSE_THREADS names:
 *   pt       the PT (the one runtime thread with the default stack);
 *   helpers  waiting threads and PT readers (the runtime's 512 KiB stacks);
 *   all      both.
 * Every other thread (MPI's, the coordinator's through std::thread in libstdc++) starts
 * as ever: only the runtime's own reaction to a refusal is under test. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

enum { kHelperStack = 512 * 1024 };  /* DetachedThread.h's kHelperThreadStack */

/* Whether the call comes from libppios (any build of it: libppios.so, libppios_mpich.so). */
static int from_runtime(const void *caller) {
  Dl_info info;
  if (dladdr(caller, &info) == 0 || info.dli_fname == NULL) return 0;
  const char *base = strrchr(info.dli_fname, '/');
  return strncmp(base != NULL ? base + 1 : info.dli_fname, "libppios", 8) == 0;
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
  static create_fn real;
  if (real == NULL) real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
  const char *which = getenv("REFUSE_THREADS");
  if (which != NULL && from_runtime(__builtin_return_address(0))) {
    size_t stack = 0;
    if (attr != NULL) pthread_attr_getstacksize(attr, &stack);
    const int helper = stack == kHelperStack;
    if (strcmp(which, "all") == 0 || strcmp(which, helper ? "helpers" : "pt") == 0) return EAGAIN;
  }
  return real(thread, attr, start, arg);
}
