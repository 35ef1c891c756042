/* AVG: the average of all integers of a text file (the PPIOS paper, Zhao et al. 2013, Table 2).
 *
 * Each rank reads its share chunk by chunk with independent MPI-IO
 * (MPI_File_read_at, default file view). The average is printed with six
 * decimals, computed from the exact 64-bit sum and count.
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernel_common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

  struct kernel_options options;
  int exit_status = kernel_parse_args(KERNEL_AVG, argc, argv, &options, rank);
  if (exit_status >= 0) {
    MPI_Finalize();
    return exit_status;
  }

  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();

  /* File errors return codes by default (MPI_ERRORS_RETURN on files). */
  MPI_File file;
  MPI_Offset size = 0;
  int rc = MPI_File_open(MPI_COMM_WORLD, options.input_path, MPI_MODE_RDONLY, MPI_INFO_NULL,
                         &file);
  if (rc == MPI_SUCCESS)
    rc = MPI_File_get_size(file, &size);
  char reason[MPI_MAX_ERROR_STRING] = "";
  int reason_length = 0;
  if (rc != MPI_SUCCESS)
    MPI_Error_string(rc, reason, &reason_length);
  char message[512 + MPI_MAX_ERROR_STRING];
  snprintf(message, sizeof message, "avg: cannot read %s: %s", options.input_path, reason);
  if (kernel_any_rank_failed(rc != MPI_SUCCESS, message)) {
    MPI_Finalize();
    return 1;
  }
  const int64_t file_size = size;

  int64_t share_begin, share_end;
  kernel_rank_share(file_size, rank, nprocs, &share_begin, &share_end);
  const int64_t chunks = kernel_chunk_count(share_begin, share_end, options.chunk_bytes);
  char *buffer = malloc(kernel_buffer_size(options.chunk_bytes));
  if (buffer == NULL) {
    fprintf(stderr, "avg: cannot allocate a chunk buffer\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  uint64_t sum = 0; /* unsigned: wrapping is defined and order-independent */
  int64_t items = 0;
  double read_seconds = 0;
  for (int64_t chunk = 0; chunk < chunks; chunk++) {
    struct chunk_window window =
        kernel_line_window(share_begin, share_end, options.chunk_bytes, chunk, file_size);

    MPI_Status status;
    double read_start = MPI_Wtime();
    rc = MPI_File_read_at(file, window.read_offset, buffer, (int)window.read_length, MPI_BYTE,
                          &status);
    read_seconds += MPI_Wtime() - read_start;
    int got = 0;
    if (rc == MPI_SUCCESS)
      MPI_Get_count(&status, MPI_BYTE, &got);
    if (rc != MPI_SUCCESS || got != window.read_length) {
      fprintf(stderr, "avg: short or failed read of %s at byte %" PRId64 "\n",
              options.input_path, window.read_offset);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }

    sum_chunk("avg", options.input_path, buffer, &window, file_size, options.compute_factor,
              &sum, &items);
  }
  free(buffer);
  MPI_File_close(&file);
  double wall_seconds = MPI_Wtime() - start;

  uint64_t total_sum = 0;
  int64_t total_items = 0;
  MPI_Reduce(&sum, &total_sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&items, &total_items, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    char average[64];
    format_exact_average(average, sizeof average, (int64_t)total_sum, total_items);
    printf("AVG result=%s items=%" PRId64 "\n", average, total_items);
    fflush(stdout);
  }
  kernel_report_time("AVG", options.chunk_bytes, wall_seconds, read_seconds, 0.0);
  MPI_Finalize();
  return 0;
}
