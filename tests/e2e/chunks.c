/* Reads each rank's part of one file through every interface ppios wraps (POSIX pread,
 * lseek + read, stdio fseek + fread, MPI-IO read_at and seek + read), chunk by chunk,
 * computing a checksum per interface; then reads at and past the end of the file.
 * usage: chunks <input> <chunk-bytes> <work-rounds> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

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
  char *buf = malloc(chunk);
  uint64_t sums[5] = {FNV_START, FNV_START, FNV_START, FNV_START, FNV_START};
  uint64_t work = 0;

  int fd = open(path, O_RDONLY);
  for (size_t off = begin; off < end; off += chunk) {
    ssize_t n = pread(fd, buf, min_size(chunk, end - off), (off_t)off);
    sums[0] = fnv1a(sums[0], buf, (size_t)n);
    work += busy_work(buf, (size_t)n, rounds);
  }

  lseek(fd, (off_t)begin, SEEK_SET);
  size_t pos = begin;
  ssize_t n;
  while (pos < end && (n = read(fd, buf, min_size(chunk, end - pos))) > 0) {
    sums[1] = fnv1a(sums[1], buf, (size_t)n);
    work += busy_work(buf, (size_t)n, rounds);
    pos += (size_t)n;
  }
  off_t after_read = lseek(fd, 0, SEEK_CUR);

  FILE *fp = fopen(path, "rb");
  fseek(fp, (long)begin, SEEK_SET);
  for (size_t off = begin; off < end; off += chunk) {
    size_t items = fread(buf, 1, min_size(chunk, end - off), fp);
    sums[2] = fnv1a(sums[2], buf, items);
    work += busy_work(buf, items, rounds);
  }
  long after_fread = ftell(fp);

  MPI_File fh;
  MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  for (size_t off = begin; off < end; off += chunk) {
    MPI_Status status;
    int count;
    MPI_File_read_at(fh, (MPI_Offset)off, buf, (int)min_size(chunk, end - off), MPI_BYTE, &status);
    MPI_Get_count(&status, MPI_BYTE, &count);
    sums[3] = fnv1a(sums[3], buf, (size_t)count);
    work += busy_work(buf, (size_t)count, rounds);
  }
  MPI_File_seek(fh, (MPI_Offset)begin, MPI_SEEK_SET);
  for (size_t off = begin; off < end; off += chunk) {
    MPI_Status status;
    int count;
    MPI_File_read(fh, buf, (int)min_size(chunk, end - off), MPI_BYTE, &status);
    MPI_Get_count(&status, MPI_BYTE, &count);
    sums[4] = fnv1a(sums[4], buf, (size_t)count);
    work += busy_work(buf, (size_t)count, rounds);
  }
  MPI_Offset after_mpi;
  MPI_File_get_position(fh, &after_mpi);
  MPI_File_close(&fh);

  /* The end of the file: a short read, a read past it, and fread's EOF flag. */
  ssize_t short_read = pread(fd, buf, chunk, (off_t)(size > 5 ? size - 5 : 0));
  ssize_t past_end = pread(fd, buf, chunk, (off_t)size + 10);
  fseek(fp, (long)(size > 3 ? size - 3 : 0), SEEK_SET);
  size_t tail_items = fread(buf, 2, 4, fp);
  int tail_eof = feof(fp);
  long tail_pos = ftell(fp);
  fclose(fp);
  close(fd);

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
  MPI_Finalize();
  return 0;
}
