/* Rank 0 runs this program again (fork + exec) as a plain reader whose stdin is a
 * descriptor it shares with rank 0 (one open file description). The reader takes one
 * record from stdin through stdio and exits with exit(): glibc's exit gives a used
 * stream's unread buffered bytes back (libio's _IO_unbuffer_all -> setbuf -> sync: lseek
 * back to the stream's position). Rank 0, after waitpid, reads on from the shared offset.
 * usage: coherence_exec_offset <fgets|fread|fscanf|getline> */
#define _POSIX_C_SOURCE 200809L
#include <sys/wait.h>
#include "hz_files.h"

static int reader(const char *how) {
  char line[64];
  int x = 0;
  if (strcmp(how, "fgets") == 0) { if (!fgets(line, sizeof line, stdin)) return 3; }
  else if (strcmp(how, "fread") == 0) { if (fread(line, 1, 20, stdin) != 20) return 3; }
  else if (strcmp(how, "fscanf") == 0) { if (fscanf(stdin, "record %d", &x) != 1) return 3; }
  else { char *l = NULL; size_t n = 0; if (getline(&l, &n, stdin) < 0) return 3; free(l); }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "reader") == 0) exit(reader(argv[2]));
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *how = argc > 1 ? argv[1] : "fgets";
  if (rank == 0) {
    hz_numbered_lines("data.txt", "record", 2000);
    int fd = open("data.txt", O_RDONLY);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fd, 0);
      char *args[] = {argv[0], (char *)"reader", (char *)how, NULL};
      execv(argv[0], args);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("reader status %d\n", status);
    printf("shared offset after the reader: %ld\n", (long)lseek(fd, 0, SEEK_CUR));
    char buf[32] = "";
    ssize_t n = read(fd, buf, 13);
    printf("rank 0 reads %zd: %.12s\n", n, buf);
    close(fd);
  }
  MPI_Finalize();
  return 0;
}
