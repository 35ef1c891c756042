/* A stream glibc reads its own way (fopen "rm": mapped; "r+": read-write) reads as without
 * prefetching: the runtime stands in for no refill of such a stream. Mixed getc, fread,
 * fgets, fseek. usage: coherence_stream_mode <mode-string> */
#define _POSIX_C_SOURCE 200809L
#include "hz_files.h"

static void show(const char *what, const char *buf, size_t n, FILE *f) {
  printf("%s n=%zu sum=%016llx pos=%ld eof=%d\n", what, n, (unsigned long long)hz_sum(0, buf, n), ftell(f), feof(f));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *mode = argc > 1 ? argv[1] : "rm";
  if (rank == 0) {
    FILE *w = fopen("data.txt", "w");
    for (int i = 0; i < 3000; i++) fprintf(w, "line %05d %s\n", i, (i % 7) ? "abc" : "defghij");
    fclose(w);
    FILE *f = fopen("data.txt", mode);
    if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
    char buf[20000];
    size_t n;
    n = fread(buf, 1, 100, f); show("fread100", buf, n, f);
    int c = getc(f); printf("getc %d\n", c);
    n = fread(buf, 1, 5000, f); show("fread5000", buf, n, f);
    if (fgets(buf, sizeof buf, f)) show("fgets", buf, strlen(buf), f);
    n = fread(buf, 1, 333, f); show("fread333", buf, n, f);
    c = getc(f); printf("getc %d\n", c);
    n = fread(buf, 1, 9000, f); show("fread9000", buf, n, f);
    fseek(f, 12345, SEEK_SET);
    n = fread(buf, 1, 700, f); show("seek+fread700", buf, n, f);
    fseek(f, 100, SEEK_SET);
    for (int i = 0; i < 5; i++) { if (fgets(buf, sizeof buf, f)) show("fgets", buf, strlen(buf), f); }
    n = fread(buf, 1, 20000, f); show("freadall", buf, n, f);
    fclose(f);
  }
  MPI_Finalize();
  return 0;
}
