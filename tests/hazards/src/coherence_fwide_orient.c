/* A byte read sets a stream's orientation (C11 7.21.2p4: a byte input function applied to
 * a stream without orientation makes it byte-oriented); fwide(f, 0) reports it, and a wide
 * read on a byte-oriented stream fails. usage: coherence_fwide_orient <fgets|fread|fscanf|getline> */
#define _POSIX_C_SOURCE 200809L
#include <wchar.h>
#include "hz_files.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *how = argc > 1 ? argv[1] : "fgets";
  if (rank == 0) {
    hz_numbered_lines("data.txt", "line", 3000);
    FILE *f = fopen("data.txt", "r");
    if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
    char buf[256];
    printf("fwide before: %d\n", fwide(f, 0));
    if (strcmp(how, "fgets") == 0) { if (fgets(buf, sizeof buf, f)) fputs(buf, stdout); }
    else if (strcmp(how, "fread") == 0) { size_t n = fread(buf, 1, 11, f); printf("fread %zu\n", n); }
    else if (strcmp(how, "fscanf") == 0) { int x; int r = fscanf(f, "line %d", &x); printf("fscanf %d %d\n", r, x); }
    else { char *l = NULL; size_t n = 0; ssize_t r = getline(&l, &n, f); printf("getline %zd\n", r); free(l); }
    printf("fwide after: %d\n", fwide(f, 0));
    wint_t wc = fgetwc(f);
    printf("fgetwc: %ld\n", (long)(wc == WEOF ? -1 : (long)wc));
    printf("fwide end: %d\n", fwide(f, 0));
    fclose(f);
  }
  MPI_Finalize();
  return 0;
}
