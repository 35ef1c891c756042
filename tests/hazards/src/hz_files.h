/* For the coherence programs: a change of a file through a descriptor of its own.
 * Include after defining _POSIX_C_SOURCE 200809L (pwrite). */
#ifndef HZ_FILES_H
#define HZ_FILES_H

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
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

/* Makes `path` a file of `size` bytes `c`; aborts the job if that fails. */
static inline void hz_fill(const char *path, char c, size_t size) {
  char block[4096];
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  memset(block, c, sizeof block);
  for (size_t done = 0; fd >= 0 && done < size;) {
    size_t n = size - done < sizeof block ? size - done : sizeof block;
    if (write(fd, block, n) != (ssize_t)n) MPI_Abort(MPI_COMM_WORLD, 1);
    done += n;
  }
  if (fd < 0 || close(fd) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Maps `size` bytes of `path` shared and writable (*fd: its descriptor, still open);
 * aborts the job if that fails. */
static inline char *hz_map_shared(const char *path, size_t size, int *fd) {
  char *m;
  *fd = open(path, O_RDWR);
  m = *fd < 0 ? MAP_FAILED : (char *)mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (m == MAP_FAILED) MPI_Abort(MPI_COMM_WORLD, 3);
  return m;
}

/* Describes the two halves of `buf` (`size` bytes) read from a file another process
 * changed between them: each half's first and last byte and its checksum. */
static inline void hz_describe_halves(char *line, size_t n, const char *buf, size_t size) {
  const size_t half = size / 2;
  snprintf(line, n, "first read: %c%c %016llx\nsecond read: %c%c %016llx\n", buf[0], buf[half - 1],
           (unsigned long long)hz_sum(0, buf, half), buf[half], buf[size - 1],
           (unsigned long long)hz_sum(0, buf + half, half));
}

#endif
