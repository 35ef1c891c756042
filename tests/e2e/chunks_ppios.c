/* chunks.c as ppios-cc turns it into its prefetching build (written by hand until the
 * transformer exists): the MT's I/O calls go through ppios_*, and a prefetch thread
 * pre-executes the reads' slice with its own descriptors, numbering each data transfer
 * as the MT will. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "ppios/ppios.h"

/* Built with -DPPIOS_WRAPPED, the MT's calls are the program's own, as ppios-cc now
 * leaves them: the link (-Wl,--wrap for every call of ppios/interpose.def) routes them to
 * the runtime. */
#ifdef PPIOS_WRAPPED
#define ppios_open open
#define ppios_close close
#define ppios_pread pread
#define ppios_read read
#define ppios_lseek lseek
#define ppios_fopen fopen
#define ppios_fclose fclose
#define ppios_fread fread
#define ppios_fseek fseek
#define ppios_ftell ftell
#define ppios_MPI_File_open MPI_File_open
#define ppios_MPI_File_close MPI_File_close
#define ppios_MPI_File_read MPI_File_read
#define ppios_MPI_File_read_at MPI_File_read_at
#define ppios_MPI_File_seek MPI_File_seek
#define ppios_MPI_Finalize MPI_Finalize
#endif

/* Built with -DPT_GUESSES_WRONG, the PT prefetches the wrong bytes under the wrong
 * sequence numbers, as a PT whose slice went wrong would: the MT must still get the
 * right bytes, never wait on the PT, and the cache must stay within its bound. */
#ifdef PT_GUESSES_WRONG
#define GUESS_OFFSET(off) ((off) + 4097)
#define GUESS_SEQ(seq) ((seq) * 3 + 1000)
#else
#define GUESS_OFFSET(off) (off)
#define GUESS_SEQ(seq) (seq)
#endif

struct pt_ctx {
  const char *path;
  size_t chunk, begin, end, size;
};

static void prefetch_thread(void *arg) {
  struct pt_ctx *c = arg;
  ppios_seq_t seq = 0;
  int fd = ppios_pt_open(c->path, O_RDONLY);
  for (size_t off = c->begin; off < c->end; off += c->chunk)
    ppios_prefetch_pread(fd, min_size(c->chunk, c->end - off), (off_t)GUESS_OFFSET(off), GUESS_SEQ(++seq), 0, NULL);

  lseek(fd, (off_t)c->begin, SEEK_SET);
  size_t pos = c->begin;
  ssize_t n;
  while (pos < c->end && (n = ppios_prefetch_read(fd, min_size(c->chunk, c->end - pos), GUESS_SEQ(++seq), 0, NULL)) > 0)
    pos += (size_t)n;

  FILE *fp = ppios_pt_fopen(c->path, "rb");
  fseek(fp, (long)c->begin, SEEK_SET);
  for (size_t off = c->begin; off < c->end; off += c->chunk)
    ppios_prefetch_fread(1, min_size(c->chunk, c->end - off), fp, GUESS_SEQ(++seq), 0, NULL);

  ppios_pt_mpi_file fh;
  ppios_pt_MPI_File_open(c->path, MPI_MODE_RDONLY, &fh);
  for (size_t off = c->begin; off < c->end; off += c->chunk)
    ppios_prefetch_MPI_File_read_at(fh, (MPI_Offset)GUESS_OFFSET(off), (int)min_size(c->chunk, c->end - off), MPI_BYTE, MPI_STATUS_IGNORE, GUESS_SEQ(++seq), 0, NULL);
  ppios_pt_MPI_File_seek(fh, (MPI_Offset)c->begin, MPI_SEEK_SET);
  for (size_t off = c->begin; off < c->end; off += c->chunk)
    ppios_prefetch_MPI_File_read(fh, (int)min_size(c->chunk, c->end - off), MPI_BYTE, MPI_STATUS_IGNORE, GUESS_SEQ(++seq), 0, NULL);
  ppios_pt_MPI_File_close(&fh);

  ppios_prefetch_pread(fd, c->chunk, (off_t)(c->size > 5 ? c->size - 5 : 0), GUESS_SEQ(++seq), 0, NULL);
  ppios_prefetch_pread(fd, c->chunk, (off_t)c->size + 10, GUESS_SEQ(++seq), 0, NULL);
  fseek(fp, (long)(c->size > 3 ? c->size - 3 : 0), SEEK_SET);
  ppios_prefetch_fread(2, 4, fp, GUESS_SEQ(++seq), 0, NULL);
  ppios_pt_fclose(fp);
  ppios_pt_close(fd);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: chunks <input> <chunk-bytes> <work-rounds>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *path = argv[1];
  size_t chunk = (size_t)atol(argv[2]);
  int rounds = atoi(argv[3]);
  struct stat st;
  stat(path, &st);
  size_t size = (size_t)st.st_size;
  size_t part = (size + nprocs - 1) / nprocs;
  size_t begin = min_size(size, part * rank), end = min_size(size, begin + part);
  {
    struct pt_ctx ctx = {path, chunk, begin, end, size};
    ppios_pt_start(prefetch_thread, &ctx, sizeof ctx);
  }
  char *buf = malloc(chunk);
  uint64_t sums[5] = {FNV_START, FNV_START, FNV_START, FNV_START, FNV_START};
  uint64_t work = 0;

  int fd = ppios_open(path, O_RDONLY);
  for (size_t off = begin; off < end; off += chunk) {
    ssize_t n = ppios_pread(fd, buf, min_size(chunk, end - off), (off_t)off);
    sums[0] = fnv1a(sums[0], buf, (size_t)n);
    work += busy_work(buf, (size_t)n, rounds);
  }

  ppios_lseek(fd, (off_t)begin, SEEK_SET);
  size_t pos = begin;
  ssize_t n;
  while (pos < end && (n = ppios_read(fd, buf, min_size(chunk, end - pos))) > 0) {
    sums[1] = fnv1a(sums[1], buf, (size_t)n);
    work += busy_work(buf, (size_t)n, rounds);
    pos += (size_t)n;
  }
  off_t after_read = ppios_lseek(fd, 0, SEEK_CUR);

  FILE *fp = ppios_fopen(path, "rb");
  ppios_fseek(fp, (long)begin, SEEK_SET);
  for (size_t off = begin; off < end; off += chunk) {
    size_t items = ppios_fread(buf, 1, min_size(chunk, end - off), fp);
    sums[2] = fnv1a(sums[2], buf, items);
    work += busy_work(buf, items, rounds);
  }
  long after_fread = ppios_ftell(fp);

  MPI_File fh;
  ppios_MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  for (size_t off = begin; off < end; off += chunk) {
    MPI_Status status;
    int count;
    ppios_MPI_File_read_at(fh, (MPI_Offset)off, buf, (int)min_size(chunk, end - off), MPI_BYTE, &status);
    MPI_Get_count(&status, MPI_BYTE, &count);
    sums[3] = fnv1a(sums[3], buf, (size_t)count);
    work += busy_work(buf, (size_t)count, rounds);
  }
  ppios_MPI_File_seek(fh, (MPI_Offset)begin, MPI_SEEK_SET);
  for (size_t off = begin; off < end; off += chunk) {
    MPI_Status status;
    int count;
    ppios_MPI_File_read(fh, buf, (int)min_size(chunk, end - off), MPI_BYTE, &status);
    MPI_Get_count(&status, MPI_BYTE, &count);
    sums[4] = fnv1a(sums[4], buf, (size_t)count);
    work += busy_work(buf, (size_t)count, rounds);
  }
  MPI_Offset after_mpi;
  MPI_File_get_position(fh, &after_mpi);
  ppios_MPI_File_close(&fh);

  ssize_t short_read = ppios_pread(fd, buf, chunk, (off_t)(size > 5 ? size - 5 : 0));
  ssize_t past_end = ppios_pread(fd, buf, chunk, (off_t)size + 10);
  ppios_fseek(fp, (long)(size > 3 ? size - 3 : 0), SEEK_SET);
  size_t tail_items = ppios_fread(buf, 2, 4, fp);
  int tail_eof = feof(fp);
  long tail_pos = ppios_ftell(fp);
  ppios_fclose(fp);
  ppios_close(fd);

  char line[512];
  snprintf(line, sizeof line,
           "rank %d: pread %016llx read %016llx fread %016llx read_at %016llx mpi_read %016llx"
           " | pos read=%lld fread=%ld mpi=%lld | short=%zd past=%zd tail_items=%zu eof=%d tail_pos=%ld"
           " | work %d\n",
           rank, (unsigned long long)sums[0], (unsigned long long)sums[1],
           (unsigned long long)sums[2], (unsigned long long)sums[3], (unsigned long long)sums[4],
           (long long)after_read, after_fread, (long long)after_mpi, short_read, past_end,
           tail_items, tail_eof != 0, tail_pos, work != 0);
  print_in_rank_order(line);
  free(buf);
  ppios_MPI_Finalize();
  return 0;
}
