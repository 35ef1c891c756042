/* An MPI-IO name that leads to two files. argv[1]: "ab:cd/f.dat" is that file for Open
 * MPI's OMPIO (names are taken as they are), while cd/f.dat is another; "ufs:g.dat" is
 * g.dat for ROMIO (its prefix "ufs:" names a file system), while a file "ufs:g.dat"
 * exists too. The four files hold a letter each. Each rank opens the name by itself and
 * reads the file in two halves, a while apart (the PT has the second half by then), and
 * prints what it read. No process writes meanwhile. Correct and deterministic. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "hz.h"

enum { kSize = 16384 };

static void make(const char *path, char letter) {
  static char bytes[kSize];
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  memset(bytes, letter, sizeof bytes);
  if (fd < 0 || write(fd, bytes, sizeof bytes) != (ssize_t)sizeof bytes) MPI_Abort(MPI_COMM_WORLD, 1);
  close(fd);
}

int main(int argc, char **argv) {
  int rank;
  char line[256];
  static char buf[kSize];
  MPI_File fh;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    mkdir("ab:cd", 0755);
    mkdir("cd", 0755);
    make("ab:cd/f.dat", 'A');
    make("cd/f.dat", 'Z');
    make("ufs:g.dat", 'L');
    make("g.dat", 'S');
  }
  MPI_Barrier(MPI_COMM_WORLD);
  /* MPI_MODE_CREATE: an open the PT is handed (the file exists already) */
  if (MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
    MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_File_read_at(fh, 0, buf, kSize / 2, MPI_CHAR, MPI_STATUS_IGNORE);
  usleep(200000);
  MPI_File_read_at(fh, kSize / 2, buf + kSize / 2, kSize / 2, MPI_CHAR, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);
  snprintf(line, sizeof line, "%s: %c%c %016llx\n", argv[1], buf[0], buf[kSize - 1],
           (unsigned long long)hz_sum(0, buf, kSize));
  hz_print_ranked(line);
  MPI_Finalize();
  return 0;
}
