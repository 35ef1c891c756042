/* Pattern: a text file read line by line, as most programs read their text inputs. Every
 * rank reads the whole of lines.txt twice: with fgets into a 256-byte array (a longer
 * line comes in pieces), parsing "<id> <value> <label>" and working on its own share of
 * the lines (id % nprocs == rank); then, after a rewind, with getline, counting every
 * line's bytes.
 * usage: text_lines <lines.txt> */
#include "corpus.h"

CORPUS_DEFINE_SINK;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) {
    if (rank == 0) fprintf(stderr, "usage: text_lines <lines.txt>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  FILE *in = fopen(argv[1], "r");
  if (in == NULL) {
    perror(argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  char line[256];
  long pieces = 0, mine = 0, sum = 0;
  uint32_t crc = 0;
  while (fgets(line, sizeof line, in) != NULL) {
    pieces++;
    char *end;
    long id = strtol(line, &end, 10);
    long value = strtol(end, NULL, 10);
    if (id % nprocs == rank) {
      mine++;
      sum += value;
      crc = crc32_update(crc, line, strlen(line));
      crunch(line, strlen(line));
    }
  }

  rewind(in);
  char *text = NULL;
  size_t cap = 0;
  ssize_t n;
  long lines = 0, bytes = 0, longest = 0;
  while ((n = getline(&text, &cap, in)) > 0) {
    lines++;
    bytes += n;
    if (n > longest) longest = n;
    if (lines % nprocs == rank) crunch(text, (size_t)n);
  }
  free(text);
  fclose(in);

  char out[256];
  snprintf(out, sizeof out, "rank %d: pieces %ld mine %ld sum %ld crc %08x; lines %ld bytes %ld longest %ld\n",
           rank, pieces, mine, sum, (unsigned)crc, lines, bytes, longest);
  print_ranked(out);
  MPI_Finalize();
  return 0;
}
