/* SUM: the sum of all integers of a text file (the PPIOS paper, Zhao et al. 2013, Table 2).
 *
 * Each rank reads its share of the file chunk by chunk with POSIX pread and
 * parses the lines that start in each chunk. The sum is exact in 64 bits;
 * beyond that it wraps modulo 2^64 (identically for every rank count).
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel_common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

  struct kernel_options options;
  int exit_status = kernel_parse_args(KERNEL_SUM, argc, argv, &options, rank);
  if (exit_status >= 0) {
    MPI_Finalize();
    return exit_status;
  }

  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();

  char message[512];
  int fd = open(options.input_path, O_RDONLY);
  struct stat info;
  if (fd >= 0 && fstat(fd, &info) != 0) {
    close(fd);
    fd = -1;
  }
  snprintf(message, sizeof message, "sum: cannot read %s: %s", options.input_path,
           strerror(errno));
  if (kernel_any_rank_failed(fd < 0, message)) {
    MPI_Finalize();
    return 1;
  }
  const int64_t file_size = info.st_size;

  int64_t share_begin, share_end;
  kernel_rank_share(file_size, rank, nprocs, &share_begin, &share_end);
  const int64_t chunks = kernel_chunk_count(share_begin, share_end, options.chunk_bytes);
  char *buffer = malloc(kernel_buffer_size(options.chunk_bytes));
  if (buffer == NULL)
    kernel_abort_io("sum", "cannot allocate a chunk buffer for", options.input_path, ENOMEM);

  uint64_t sum = 0; /* unsigned: wrapping is defined and order-independent */
  int64_t items = 0;
  double read_seconds = 0;
  for (int64_t chunk = 0; chunk < chunks; chunk++) {
    struct chunk_window window =
        kernel_line_window(share_begin, share_end, options.chunk_bytes, chunk, file_size);

    double read_start = MPI_Wtime();
    ssize_t got = pread(fd, buffer, (size_t)window.read_length, window.read_offset);
    read_seconds += MPI_Wtime() - read_start;
    if (got != window.read_length)
      kernel_abort_io("sum", got < 0 ? "cannot read" : "short read from", options.input_path,
                      got < 0 ? errno : EIO);

    sum_chunk("sum", options.input_path, buffer, &window, file_size, options.compute_factor,
              &sum, &items);
  }
  free(buffer);
  close(fd);
  double wall_seconds = MPI_Wtime() - start;

  uint64_t total_sum = 0;
  int64_t total_items = 0;
  MPI_Reduce(&sum, &total_sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&items, &total_items, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("SUM result=%" PRId64 " items=%" PRId64 "\n", (int64_t)total_sum, total_items);
    fflush(stdout);
  }
  kernel_report_time("SUM", options.chunk_bytes, wall_seconds, read_seconds, 0.0);
  MPI_Finalize();
  return 0;
}
