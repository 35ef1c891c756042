/* For the coherence programs: a change of a file through a descriptor of its own.
 * Include after defining _POSIX_C_SOURCE 200809L (pwrite). */
#ifndef HZ_FILES_H
#define HZ_FILES_H

#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

/* Writes `s` at `at` of `path`; aborts the job if that fails. */
static inline void hz_put(const char *path, off_t at, const char *s) {
  int fd = open(path, O_WRONLY);
  if (fd < 0 || pwrite(fd, s, strlen(s), at) != (ssize_t)strlen(s) || close(fd) != 0)
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Writes `count` numbered lines "<word> 00000\n", "<word> 00001\n", ... to `path`. */
static inline void hz_numbered_lines(const char *path, const char *word, int count) {
  FILE *w = fopen(path, "w");
  if (w == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int i = 0; i < count; i++) fprintf(w, "%s %05d\n", word, i);
  if (fclose(w) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
}

#endif
