/* Case 5: writes through a shared mapping, read back with pread/read. Each rank maps its
 * own 64 KiB region of the file MAP_SHARED, and for each 4 KiB page: reads it with pread,
 * updates it through the mapping (msync on every other page), reads it again with pread
 * and, at the end, the whole region with lseek + read. The file itself is compared too.
 * usage: mmap_shared <data.bin> */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hz.h"

#define PAGE 4096
#define REGION (16 * PAGE)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int fd = open(argv[1], O_RDWR);
  if (fd < 0) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  off_t base = (off_t)rank * REGION;
  unsigned char *map = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
  if (map == MAP_FAILED) {
    perror("mmap");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  unsigned char buf[PAGE];
  uint64_t before = 0, after = 0, whole = 0;
  for (int p = 0; p < REGION / PAGE; p++) {
    ssize_t n = pread(fd, buf, PAGE, base + (off_t)p * PAGE);
    before = hz_sum(before, buf, (size_t)n);
    for (int j = 0; j < PAGE; j += 8) map[p * PAGE + j] ^= (unsigned char)(p + 1);
    if (p % 2) msync(map + p * PAGE, PAGE, MS_SYNC);
    n = pread(fd, buf, PAGE, base + (off_t)p * PAGE);
    after = hz_sum(after, buf, (size_t)n);
  }
  lseek(fd, base, SEEK_SET);
  long total = 0;
  while (total < REGION) {
    ssize_t n = read(fd, buf, PAGE);
    if (n <= 0) break;
    whole = hz_sum(whole, buf, (size_t)n);
    total += n;
  }
  munmap(map, REGION);
  close(fd);
  char line[160];
  snprintf(line, sizeof line, "rank %d: before %016llx after %016llx whole %016llx (%ld)\n",
           rank, (unsigned long long)before, (unsigned long long)after,
           (unsigned long long)whole, total);
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
