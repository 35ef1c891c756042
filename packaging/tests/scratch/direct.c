/* A program that calls the ppios runtime's main-thread functions itself (ppios/ppios.h),
 * linked with the installed libppios: through ppios::runtime (CMake) or `pkg-config
 * --cflags --libs ppios` (make). Prints the file's size as read through ppios_read. */
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include <ppios/ppios.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 2) {
    fprintf(stderr, "usage: direct FILE\n");
    MPI_Finalize();
    return 2;
  }
  int fd = ppios_open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  static char buf[1 << 16];
  uint64_t bytes = 0;
  ssize_t n;
  while ((n = ppios_read(fd, buf, sizeof buf)) > 0)
    bytes += (uint64_t)n;
  ppios_close(fd);
  printf("direct: bytes=%" PRIu64 " last=%zd\n", bytes, n);
  MPI_Finalize();
  return n == 0 ? 0 : 1;
}
