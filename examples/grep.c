/* GREP: count the occurrences of a 30-byte pattern in a text file (the
 * PPIOS paper, Zhao, Yoshigoe and Xie, 2013, Table 2 and Experiment #1).
 *
 * Each rank reads its share chunk by chunk with stdio (fopen, fseek, fread)
 * and counts the matches that start in each chunk; it reads pattern-1
 * bytes past the chunk so a match crossing the chunk end is still seen.
 * The default pattern spans three lines (see GREP_DEFAULT_PATTERN), which
 * gen-input plants a chosen number of times.
 */
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernel_common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

  struct kernel_options options;
  int exit_status = kernel_parse_args(KERNEL_GREP, argc, argv, &options, rank);
  if (exit_status >= 0) {
    MPI_Finalize();
    return exit_status;
  }

  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();

  char message[512];
  FILE *file = fopen(options.input_path, "rb");
  struct stat info;
  if (file != NULL && stat(options.input_path, &info) != 0) {
    fclose(file);
    file = NULL;
  }
  snprintf(message, sizeof message, "grep: cannot read %s: %s", options.input_path,
           strerror(errno));
  if (kernel_any_rank_failed(file == NULL, message)) {
    MPI_Finalize();
    return 1;
  }
  const int64_t file_size = info.st_size;
  const int64_t pattern_length = (int64_t)options.pattern_length;

  int64_t share_begin, share_end;
  kernel_rank_share(file_size, rank, nprocs, &share_begin, &share_end);
  const int64_t chunks = kernel_chunk_count(share_begin, share_end, options.chunk_bytes);
  char *buffer = malloc(kernel_buffer_size(options.chunk_bytes));
  if (buffer == NULL) {
    fprintf(stderr, "grep: cannot allocate a chunk buffer\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  int64_t matches = 0;
  double read_seconds = 0;
  for (int64_t chunk = 0; chunk < chunks; chunk++) {
    struct chunk_window window = kernel_match_window(share_begin, share_end, options.chunk_bytes,
                                                     chunk, file_size, pattern_length);

    double read_start = MPI_Wtime();
    int sought = fseek(file, (long)window.read_offset, SEEK_SET);
    size_t got = fread(buffer, 1, (size_t)window.read_length, file);
    read_seconds += MPI_Wtime() - read_start;
    if (sought != 0 || got != (size_t)window.read_length) {
      fprintf(stderr, "grep: short or failed read of %s at byte %" PRId64 "\n",
              options.input_path, window.read_offset);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }

    int64_t chunk_matches = 0;
    for (int repeat = 0; repeat < options.compute_factor; repeat++)
      chunk_matches = count_pattern_starts(buffer, &window, options.pattern,
                                           options.pattern_length);
    matches += chunk_matches;
  }
  free(buffer);
  fclose(file);
  double wall_seconds = MPI_Wtime() - start;

  int64_t total_matches = 0;
  MPI_Reduce(&matches, &total_matches, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("GREP result=%" PRId64 "\n", total_matches);
    fflush(stdout);
  }
  kernel_report_time("GREP", options.chunk_bytes, wall_seconds, read_seconds, 0.0);
  MPI_Finalize();
  return 0;
}
