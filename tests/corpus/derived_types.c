/* Pattern: MPI-IO reads with derived datatypes, as programs describe a record or a row
 * once and read "1 row" at a time. All types are built and committed at the top of main.
 *  A: each rank reads every nprocs-th row of the file with MPI_File_read_at(..., 1, row),
 *     a row being MPI_Type_contiguous(block/4, MPI_INT), and computes on it;
 *  B: a view whose etype and filetype are the row type, after a 3-byte header: offsets
 *     count rows;
 *  C: records of 16 ints read from the individual file pointer until a short count (the
 *     last 8 rows and the tail, from byte 3 on so that the tail is whole records), the
 *     count taken with MPI_Get_count and MPI_Get_elements on the record type;
 *  D: a strided memory type (MPI_Type_vector: every other int) — not contiguous, so
 *     never served from the cache, and still read right;
 *  E: the row type freed and made again half as long (its handle may be reused).
 * usage: derived_types <shapes.bin> <block-bytes> */
#include "corpus.h"

CORPUS_DEFINE_SINK;

enum { kViewRows = 8, kRecInts = 16, kTailRows = 8, kStrided = 4, kHalfRows = 8 };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: derived_types <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int block = atoi(argv[2]);
  MPI_Datatype row, rec, strided;
  MPI_Type_contiguous(block / 4, MPI_INT, &row);
  MPI_Type_commit(&row);
  MPI_Type_contiguous(kRecInts, MPI_INT, &rec);
  MPI_Type_commit(&rec);
  MPI_Type_vector(block / 8, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);

  MPI_File fh, view_fh;
  if (block <= 0 || block % 64 != 0 ||
      MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS ||
      MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &view_fh) != MPI_SUCCESS) {
    fprintf(stderr, "derived_types: cannot read %s in blocks of %s\n", argv[1], argv[2]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Offset size;
  MPI_File_get_size(fh, &size);
  long rows = (long)(size / block);
  unsigned char *buf = malloc((size_t)block);
  MPI_Status status;

  uint32_t crc_a = 0;
  long rows_a = 0;
  for (long r = rank; r < rows; r += nprocs) {
    MPI_File_read_at(fh, (MPI_Offset)r * block, buf, 1, row, &status);
    crc_a = crc32_update(crc_a, buf, (size_t)block);
    crunch(buf, (size_t)block);
    rows_a++;
  }

  MPI_File_set_view(view_fh, 3, row, row, "native", MPI_INFO_NULL);
  uint32_t crc_b = 0;
  for (long i = 0; i < kViewRows; i++) {
    MPI_File_read_at(view_fh, (MPI_Offset)(rank + i * nprocs), buf, 1, row, MPI_STATUS_IGNORE);
    crc_b = crc32_update(crc_b, buf, (size_t)block);
    crunch(buf, (size_t)block);
  }

  const int per_read = block / (kRecInts * 4);
  int items = 0, elements = 0, bytes = 0;
  long items_c = 0, elements_c = 0, reads_c = 0;
  uint32_t crc_c = 0;
  MPI_File_seek(fh, (MPI_Offset)(rows - kTailRows) * block + 3, MPI_SEEK_SET);
  do {
    MPI_File_read(fh, buf, per_read, rec, &status);
    MPI_Get_count(&status, rec, &items);
    MPI_Get_elements(&status, rec, &elements);
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    crc_c = crc32_update(crc_c, buf, (size_t)bytes);
    crunch(buf, (size_t)bytes);
    if (items != MPI_UNDEFINED) items_c += items;
    if (elements != MPI_UNDEFINED) elements_c += elements;
    reads_c++;
  } while (items == per_read);

  uint32_t crc_d = 0;
  for (int i = 0; i < kStrided; i++) {
    memset(buf, 0x5A, (size_t)block);
    MPI_File_read_at(fh, (MPI_Offset)(rank * kStrided + i) * block, buf, 1, strided, &status);
    crc_d = crc32_update(crc_d, buf, (size_t)block);
  }

  MPI_Type_free(&row);
  MPI_Type_contiguous(block / 8, MPI_INT, &row);
  MPI_Type_commit(&row);
  uint32_t crc_e = 0;
  for (int i = 0; i < kHalfRows; i++) {
    MPI_File_read_at(fh, (MPI_Offset)(rank * kHalfRows + i) * (block / 2), buf, 1, row, &status);
    crc_e = crc32_update(crc_e, buf, (size_t)block / 2);
  }

  MPI_File_close(&view_fh);
  MPI_File_close(&fh);
  MPI_Type_free(&row);
  MPI_Type_free(&rec);
  MPI_Type_free(&strided);
  free(buf);
  char line[256];
  snprintf(line, sizeof line,
           "rank %d: rows %ld crc %08x; view crc %08x; records %ld elements %ld in %ld reads "
           "crc %08x; strided crc %08x; half rows crc %08x\n",
           rank, rows_a, (unsigned)crc_a, (unsigned)crc_b, items_c, elements_c, reads_c,
           (unsigned)crc_c, (unsigned)crc_d, (unsigned)crc_e);
  print_ranked(line);
  MPI_Finalize();
  return 0;
}
