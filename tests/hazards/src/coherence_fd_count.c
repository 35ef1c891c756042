/* Cache coherence 6: the program's view of its own descriptors. The program opens its
 * input, reads it to the end in 16 KiB blocks, closes it, and lists /proc/self/fd at
 * four points (after the open, halfway through the reads, at the end of the file, after
 * the close), counting the descriptors that name its input (readlink). A descriptor the
 * runtime opens on the file for its own reads (the PT's, a reader's copy) is one the
 * program never opened: it must not see it.
 * Deterministic under mpicc: one rank; the only descriptor on the input is the one it
 * opened (MPI's own descriptors never name it). It prints the four counts and a
 * checksum of what it read.
 * usage: coherence_fd_count <data.bin> */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "hz.h"

enum { kBlock = 16384 };

/* How many open descriptors of this process name `path` (an absolute path). */
static int descriptors_on(const char *path) {
  DIR *dir = opendir("/proc/self/fd");
  if (dir == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    char link[300], target[PATH_MAX];
    if (e->d_name[0] == '.') continue;
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    if (strcmp(target, path) == 0) n++;
  }
  closedir(dir);
  return n;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  char path[PATH_MAX];
  if (realpath(argv[1], path) == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  int opened = descriptors_on(path), halfway = -1;
  static unsigned char block[kBlock];
  uint64_t h = 0;
  long bytes = 0, reads = 0;
  ssize_t n;
  /* Until the end of the file, or a block that starts with 8 zero bytes (none does):
   * an end the PT cannot know in advance, so it stays a few reads ahead. */
  while ((n = read(fd, block, kBlock)) > 0) {
    if (memcmp(block, "\0\0\0\0\0\0\0\0", 8) == 0) break;
    h = hz_sum(h, block, (size_t)n);
    bytes += n;
    if (++reads == 32) halfway = descriptors_on(path);
  }
  int at_end = descriptors_on(path);
  close(fd);
  int closed = descriptors_on(path);
  printf("descriptors on the input: %d after open, %d halfway, %d at the end, %d after close\n",
         opened, halfway, at_end, closed);
  printf("read %ld bytes, sum %016llx\n", bytes, (unsigned long long)h);
  MPI_Finalize();
  return 0;
}
