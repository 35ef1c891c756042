/* Pattern: parameters that rank 0 reads and parses (a small "key = value" text file read
 * with fopen + fread, plus the pass count from argv) and broadcasts with MPI_Bcast before
 * the loop; then every rank reads its records with lseek + read, once per pass.
 * usage: bcast_params <params.txt> <data.bin> <passes> */
#include <fcntl.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

struct params {
  long header_bytes, record_bytes, records, passes;
};

/* Parses "key = value  # comment" lines; unknown keys are an error. */
static int parse_params(const char *text, struct params *p) {
  char line[256];
  const char *s = text;
  while (*s) {
    size_t len = strcspn(s, "\n");
    snprintf(line, sizeof line, "%.*s", (int)len, s);
    s += len + (s[len] == '\n');
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char key[64];
    long value;
    if (sscanf(line, " %63[a-z_] = %ld", key, &value) != 2) continue;
    if (strcmp(key, "header_bytes") == 0) p->header_bytes = value;
    else if (strcmp(key, "record_bytes") == 0) p->record_bytes = value;
    else if (strcmp(key, "records") == 0) p->records = value;
    else return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: bcast_params <params.txt> <data.bin> <passes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  struct params p = {0, 0, 0, 0};
  if (rank == 0) {
    char text[4096];
    FILE *fp = fopen(argv[1], "r");
    size_t n = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    if (fp) fclose(fp);
    text[n] = '\0';
    if (n == 0 || parse_params(text, &p) != 0 || p.record_bytes <= 0) {
      fprintf(stderr, "%s: bad parameters\n", argv[1]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    p.passes = atol(argv[3]);
    printf("params: header %ld record %ld records %ld passes %ld\n", p.header_bytes,
           p.record_bytes, p.records, p.passes);
  }
  long wire[4] = {p.header_bytes, p.record_bytes, p.records, p.passes};
  MPI_Bcast(wire, 4, MPI_LONG, 0, MPI_COMM_WORLD);
  p.header_bytes = wire[0];
  p.record_bytes = wire[1];
  p.records = wire[2];
  p.passes = wire[3];

  int fd = open(argv[2], O_RDONLY);
  unsigned char *rec = malloc((size_t)p.record_bytes);
  char line[256];
  int len = snprintf(line, sizeof line, "rank %d:", rank);
  for (long pass = 0; pass < p.passes; ++pass) {
    uint32_t crc = (uint32_t)pass;
    long visited = 0;
    for (long r = rank; r < p.records; r += nprocs) {
      lseek(fd, (off_t)(p.header_bytes + r * p.record_bytes), SEEK_SET);
      ssize_t n = read(fd, rec, (size_t)p.record_bytes);
      if (n <= 0) break;
      crc = crc32_update(crc, rec, (size_t)n);
      crunch(rec, (size_t)n);
      visited++;
    }
    len += snprintf(line + len, sizeof line - (size_t)len, " pass %ld: %ld records crc %08x;",
                    pass, visited, (unsigned)crc);
  }
  snprintf(line + len, sizeof line - (size_t)len, "\n");
  close(fd);
  free(rec);
  print_ranked(line);
  MPI_Finalize();
  return 0;
}
