/* Pattern: data-dependent offsets. Every rank first reads an index file (fopen + fread:
 * an 8-byte header "INDX" + count, then count entries of {u64 offset, u32 length,
 * u32 key}, in no particular order), then preads its share of the variable-length
 * records at the offsets and lengths the index gives.
 * usage: indexed_records <index.bin> <records.bin> */
#include <fcntl.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

struct entry {
  uint64_t offset;
  uint32_t length, key;
};

static uint64_t le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: indexed_records <index.bin> <records.bin>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  FILE *ix = fopen(argv[1], "rb");
  unsigned char head[8];
  if (ix == NULL || fread(head, 1, 8, ix) != 8 || memcmp(head, "INDX", 4) != 0) {
    fprintf(stderr, "%s: not an index\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  uint32_t count = (uint32_t)le(head + 4, 4);
  unsigned char *raw = malloc((size_t)count * 16);
  if (fread(raw, 16, count, ix) != count) {
    fprintf(stderr, "%s: short index\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  fclose(ix);
  struct entry *entries = malloc(count * sizeof *entries);
  uint32_t longest = 0;
  for (uint32_t e = 0; e < count; ++e) {
    entries[e].offset = le(raw + 16 * e, 8);
    entries[e].length = (uint32_t)le(raw + 16 * e + 8, 4);
    entries[e].key = (uint32_t)le(raw + 16 * e + 12, 4);
    if (entries[e].length > longest) longest = entries[e].length;
  }
  free(raw);

  int fd = open(argv[2], O_RDONLY);
  unsigned char *rec = malloc(longest);
  uint32_t crc = 0, mix = 0;
  long bytes = 0, nrec = 0;
  for (uint32_t e = (uint32_t)rank; e < count; e += (uint32_t)nprocs) {
    ssize_t n = pread(fd, rec, entries[e].length, (off_t)entries[e].offset);
    if (n != (ssize_t)entries[e].length) {
      fprintf(stderr, "rank %d: short record %u\n", rank, e);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    uint32_t rc = crc32_update(0, rec, (size_t)n);
    crc = crc32_update(crc, rec, (size_t)n);
    mix ^= rc ^ entries[e].key;
    crunch(rec, (size_t)n);
    bytes += n;
    nrec++;
  }
  close(fd);
  char line[160];
  snprintf(line, sizeof line, "rank %d: records %ld bytes %ld crc %08x mix %08x\n", rank, nrec,
           bytes, (unsigned)crc, (unsigned)mix);
  print_ranked(line);
  free(rec);
  free(entries);
  MPI_Finalize();
  return 0;
}
