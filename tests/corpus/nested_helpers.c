/* Patterns: reads inside helper functions called from loops in other functions, three
 * levels below main (process_grid -> process_tile -> load_row -> read_span), with offsets
 * built from the rank and size, loop counters, function arguments, a global (the data
 * start) and struct fields (row length, tile height).
 * The file is a grid: a 64-byte header (magic, rows, cols, tile_rows), then rows of
 * cols bytes. Tiles of tile_rows rows go round-robin to the ranks; for each tile a rank
 * also reads a "halo": the first 256 bytes of the row after the tile.
 * usage: nested_helpers <grid.bin> */
#include <fcntl.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

enum { kHeaderBytes = 64, kHaloBytes = 256 };

/* Where the rows start: set from the header. */
static long g_data_start;

struct grid {
  int fd;
  int rows, cols, tile_rows;
  long row_bytes;
};

struct result {
  uint32_t rows_crc, halo_crc;
  long rows_read, halos_read;
};

static ssize_t read_span(int fd, void *buf, size_t len, long offset) {
  return pread(fd, buf, len, (off_t)offset);
}

static long load_row(const struct grid *g, int row, unsigned char *buf, long first_col, long ncols) {
  return (long)read_span(g->fd, buf, (size_t)ncols, g_data_start + row * g->row_bytes + first_col);
}

static void process_tile(const struct grid *g, int tile, unsigned char *buf, struct result *res) {
  int first = tile * g->tile_rows;
  for (int r = 0; r < g->tile_rows && first + r < g->rows; ++r) {
    long n = load_row(g, first + r, buf, 0, g->cols);
    res->rows_crc = crc32_update(res->rows_crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    res->rows_read++;
  }
  int halo_row = first + g->tile_rows;
  if (halo_row < g->rows) {
    long n = load_row(g, halo_row, buf, 0, kHaloBytes);
    res->halo_crc = crc32_update(res->halo_crc, buf, (size_t)n);
    res->halos_read++;
  }
}

static void process_grid(const struct grid *g, int rank, int nprocs, struct result *res) {
  int ntiles = (g->rows + g->tile_rows - 1) / g->tile_rows;
  unsigned char *buf = malloc((size_t)g->row_bytes);
  for (int t = rank; t < ntiles; t += nprocs) process_tile(g, t, buf, res);
  free(buf);
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) {
    if (rank == 0) fprintf(stderr, "usage: nested_helpers <grid.bin>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  struct grid g;
  g.fd = open(argv[1], O_RDONLY);
  unsigned char header[kHeaderBytes];
  if (g.fd < 0 || pread(g.fd, header, sizeof header, 0) != kHeaderBytes ||
      memcmp(header, "GRID", 4) != 0) {
    fprintf(stderr, "%s: not a grid file\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  g.rows = (int)le32(header + 4);
  g.cols = (int)le32(header + 8);
  g.tile_rows = (int)le32(header + 12);
  g.row_bytes = g.cols;
  g_data_start = kHeaderBytes;

  struct result res = {0, 0, 0, 0};
  process_grid(&g, rank, nprocs, &res);
  close(g.fd);

  char line[160];
  snprintf(line, sizeof line, "rank %d: rows %ld crc %08x halos %ld crc %08x\n", rank,
           res.rows_read, (unsigned)res.rows_crc, res.halos_read, (unsigned)res.halo_crc);
  print_ranked(line);
  if (rank == 0) printf("grid %d x %d, tiles of %d rows\n", g.rows, g.cols, g.tile_rows);
  MPI_Finalize();
  return 0;
}
