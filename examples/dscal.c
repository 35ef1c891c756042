/* DSCAL: multiply every integer of a text file by a scalar and write the
 * results as a text file (the PPIOS paper, Zhao, Yoshigoe and Xie, 2013,
 * Table 2; the read, compute, write sequence of Fig. 4).
 *
 * Input is read with open + lseek + read, output written with pwrite. The
 * result of the input line at bytes [o, o+L) goes to the output bytes
 * [3o, 3(o+L)), right-aligned in 3L-1 blanks and digits plus a newline. So
 * every rank knows where its results go without knowing how long anyone
 * else's are, and the output is byte-identical for any rank count and chunk
 * size. It is again one integer per line: SUM can read it.
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
  int exit_status = kernel_parse_args(KERNEL_DSCAL, argc, argv, &options, rank);
  if (exit_status >= 0) {
    MPI_Finalize();
    return exit_status;
  }

  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();

  char message[1024];
  int fd = open(options.input_path, O_RDONLY);
  struct stat info;
  if (fd >= 0 && fstat(fd, &info) != 0) {
    close(fd);
    fd = -1;
  }
  snprintf(message, sizeof message, "dscal: cannot read %s: %s", options.input_path,
           strerror(errno));
  if (kernel_any_rank_failed(fd < 0, message)) {
    MPI_Finalize();
    return 1;
  }
  const int64_t file_size = info.st_size;

  /* Rank 0 creates the output at its final size before anyone writes, so no
   * stale bytes of an older, longer file survive. Truncating the input
   * itself would destroy the data the other ranks are about to read. */
  int created = 1;
  if (rank == 0) {
    struct stat existing;
    if (stat(options.output_path, &existing) == 0 && existing.st_dev == info.st_dev &&
        existing.st_ino == info.st_ino) {
      snprintf(message, sizeof message, "dscal: output %s is the input file",
               options.output_path);
      created = 0;
    }
  }
  if (kernel_any_rank_failed(!created, message)) {
    close(fd);
    MPI_Finalize();
    return 1;
  }
  if (rank == 0) {
    int out = open(options.output_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    created = out >= 0 && ftruncate(out, DSCAL_WIDTH_FACTOR * file_size) == 0;
    snprintf(message, sizeof message, "dscal: cannot create %s: %s", options.output_path,
             strerror(errno));
    if (out >= 0)
      close(out);
  }
  if (kernel_any_rank_failed(!created, message)) {
    close(fd);
    MPI_Finalize();
    return 1;
  }
  int out_fd = open(options.output_path, O_WRONLY);
  snprintf(message, sizeof message, "dscal: cannot open %s: %s", options.output_path,
           strerror(errno));
  if (kernel_any_rank_failed(out_fd < 0, message)) {
    close(fd);
    MPI_Finalize();
    return 1;
  }

  int64_t share_begin, share_end;
  kernel_rank_share(file_size, rank, nprocs, &share_begin, &share_end);
  const int64_t chunks = kernel_chunk_count(share_begin, share_end, options.chunk_bytes);
  const size_t buffer_size = kernel_buffer_size(options.chunk_bytes);
  char *buffer = malloc(buffer_size);
  char *output = malloc(DSCAL_WIDTH_FACTOR * buffer_size);
  if (buffer == NULL || output == NULL)
    kernel_abort_io("dscal", "cannot allocate chunk buffers for", options.input_path, ENOMEM);

  int64_t items = 0;
  uint64_t checksum = 0;
  double read_seconds = 0, write_seconds = 0;
  for (int64_t chunk = 0; chunk < chunks; chunk++) {
    struct chunk_window window =
        kernel_line_window(share_begin, share_end, options.chunk_bytes, chunk, file_size);

    double read_start = MPI_Wtime();
    off_t where = lseek(fd, window.read_offset, SEEK_SET);
    ssize_t got = read(fd, buffer, (size_t)window.read_length);
    read_seconds += MPI_Wtime() - read_start;
    if (where != window.read_offset || got != window.read_length)
      kernel_abort_io("dscal", got < 0 || where < 0 ? "cannot read" : "short read from",
                      options.input_path, got < 0 || where < 0 ? errno : EIO);

    /* Owned lines are contiguous, so their results form one output range. */
    int64_t first_offset = -1, end_offset = -1;
    int64_t chunk_items = 0;
    uint64_t chunk_checksum = 0;
    for (int repeat = 0; repeat < options.compute_factor; repeat++) {
      first_offset = end_offset = -1;
      chunk_items = 0;
      chunk_checksum = 0;
      struct line_cursor cursor;
      struct line_item item;
      int more;
      line_cursor_init(&cursor, buffer, &window, file_size);
      while ((more = line_cursor_next(&cursor, &item)) > 0) {
        int64_t product;
        if (first_offset < 0)
          first_offset = item.offset;
        end_offset = item.offset + item.length;
        if (__builtin_mul_overflow(item.value, options.scalar, &product))
          kernel_abort_bad_input("dscal", options.input_path,
                                 "scaled value does not fit in 64 bits", item.offset);
        char *line = output + DSCAL_WIDTH_FACTOR * (item.offset - first_offset);
        /* Cannot fail: 3L-1 columns hold any product of a valid line and a
         * scalar of at most 3 digits (see kernel_common.h). */
        format_padded_line(line, DSCAL_WIDTH_FACTOR * item.length - 1, product);
        chunk_items++;
        chunk_checksum += dscal_value_digest(product);
      }
      if (more < 0)
        kernel_abort_bad_input("dscal", options.input_path, cursor.error, cursor.error_offset);
    }
    items += chunk_items;
    checksum += chunk_checksum;

    if (first_offset >= 0) {
      size_t length = (size_t)(DSCAL_WIDTH_FACTOR * (end_offset - first_offset));
      double write_start = MPI_Wtime();
      ssize_t written = pwrite(out_fd, output, length, DSCAL_WIDTH_FACTOR * first_offset);
      write_seconds += MPI_Wtime() - write_start;
      if (written != (ssize_t)length)
        kernel_abort_io("dscal", "cannot write", options.output_path,
                        written < 0 ? errno : EIO);
    }
  }
  free(output);
  free(buffer);
  close(fd);
  if (close(out_fd) != 0)
    kernel_abort_io("dscal", "cannot write", options.output_path, errno);
  double wall_seconds = MPI_Wtime() - start;

  int64_t total_items = 0;
  uint64_t total_checksum = 0;
  MPI_Reduce(&items, &total_items, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&checksum, &total_checksum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("DSCAL result=%" PRId64 " checksum=%016" PRIx64 "\n", total_items, total_checksum);
    fflush(stdout);
  }
  kernel_report_time("DSCAL", options.chunk_bytes, wall_seconds, read_seconds, write_seconds);
  MPI_Finalize();
  return 0;
}
