/* Cache coherence 7: a stdio stream's buffer. glibc's stream holds one block of the
 * file (st_blksize) and answers getc, an fseek inside it and the reads after from that
 * block, whatever the file became meanwhile; its next block comes from the file. A
 * prefetching stream must hold exactly that block: no more (bytes the original reads
 * later, after a change), no less (an fseek inside it must return the block's old bytes).
 * Rank 0 reads the first lines of a text file with fgets, then "ZZZZ" is written into
 * the file through another descriptor, and rank 0 reads on, by <how>:
 *   rewind      (np 1) rank 0 writes at 0 itself, rewinds and reads a line: glibc's first
 *               seek reads the file again, so the new bytes
 *   getc_flag   (np 2) rank 1 writes at 5000 after a barrier and then creates <file>.flag;
 *               rank 0 polls for the flag (a synchronization ppios does not see) and reads
 *               on with getc past its block: the new bytes
 *   getc_child  (np 1) a forked child writes at 5000 and says so through a pipe; rank 0
 *               reads on with getc past its block: the new bytes
 *   seek_back   (np 2) rank 0 seeks to 100 (now glibc knows its offset) and reads a line;
 *               rank 1 writes at 100 between two barriers; rank 0 seeks to 100 again,
 *               inside its block: the OLD bytes; then out of the block and back: the new
 * Deterministic under mpicc: each change is ordered before the reads that may see it.
 * usage: coherence_stream_buffer <text> <rewind|getc_flag|getc_child|seek_back> */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hz_files.h"

static void read_line(FILE *f, const char *what) {
  char line[256];
  if (fgets(line, sizeof line, f) == NULL) strcpy(line, "(none)\n");
  printf("%s: %s", what, line);
}

/* getc from the stream's position through byte 5010, printing bytes 4995..5009. */
static void getc_through(FILE *f) {
  long pos = ftell(f);
  int c;
  printf("bytes 4995..5009: ");
  while (pos < 5010 && (c = getc(f)) != EOF) {
    if (pos >= 4995) putchar(c);
    pos++;
  }
  putchar('\n');
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) MPI_Abort(MPI_COMM_WORLD, 2);
  const char *path = argv[1], *how = argv[2];
  const int two = strcmp(how, "getc_flag") == 0 || strcmp(how, "seek_back") == 0;
  if (nprocs != (two ? 2 : 1)) MPI_Abort(MPI_COMM_WORLD, 2);
  char flag[4096];
  snprintf(flag, sizeof flag, "%s.flag", path);
  FILE *f = NULL;
  if (rank == 0) {
    f = fopen(path, "r");
    if (f == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    read_line(f, "first");
  }
  if (strcmp(how, "rewind") == 0) {
    hz_put(path, 0, "ZZZZ");
    rewind(f);
    read_line(f, "after rewind");
  } else if (strcmp(how, "getc_flag") == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
      hz_put(path, 5000, "ZZZZ");
      close(open(flag, O_CREAT | O_WRONLY, 0600));
    } else {
      struct stat st;
      struct timespec ms = {0, 1000000};
      while (stat(flag, &st) != 0) nanosleep(&ms, NULL);
      getc_through(f);
    }
  } else if (strcmp(how, "getc_child") == 0) {
    int p[2];
    char x;
    if (pipe(p) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    pid_t child = fork();
    if (child == 0) {
      hz_put(path, 5000, "ZZZZ");
      if (write(p[1], "x", 1) != 1) _exit(1);
      _exit(0);
    }
    if (child < 0 || read(p[0], &x, 1) != 1) MPI_Abort(MPI_COMM_WORLD, 1);
    getc_through(f);
    waitpid(child, NULL, 0);
  } else if (strcmp(how, "seek_back") == 0) {
    if (rank == 0) {
      fseek(f, 100, SEEK_SET);
      read_line(f, "at 100");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) hz_put(path, 100, "ZZZZ");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      fseek(f, 100, SEEK_SET);
      read_line(f, "at 100 again, inside the block");
      fseek(f, 9000, SEEK_SET);
      read_line(f, "at 9000");
      fseek(f, 100, SEEK_SET);
      read_line(f, "at 100 from outside the block");
    }
  } else {
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0) fclose(f);
  MPI_Finalize();
  return 0;
}
