/* Shape (issue 9, 2): the program creates the file it reads, and builds its name with
 * snprintf after the prefetch thread could start. Each rank copies every nprocs-th block
 * of the input into its own file (open with O_CREAT, write), then reads that file back
 * block by block with pread, computing on each block, and prints CRCs of both passes.
 * usage: created_file <shapes.bin> <block-bytes> */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: created_file <shapes.bin> <block-bytes>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long block = atol(argv[2]);
  char path[64];
  snprintf(path, sizeof path, "copy.%d.bin", rank);
  int in = open(argv[1], O_RDONLY);
  int out = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || out < 0) {
    perror(in < 0 ? argv[1] : path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct stat st;
  fstat(in, &st);
  long nblocks = ((long)st.st_size + block - 1) / block;
  unsigned char *buf = malloc((size_t)block);
  uint32_t copy_crc = 0;
  long copied = 0;
  for (long i = rank; i < nblocks; i += nprocs) {
    ssize_t n = pread(in, buf, (size_t)block, (off_t)(i * block));
    if (n <= 0) break;
    copy_crc = crc32_update(copy_crc, buf, (size_t)n);
    if (write(out, buf, (size_t)n) != n) {
      perror(path);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    copied += n;
  }
  close(in);

  uint32_t crc = 0;
  long bytes = 0, blocks = 0;
  for (long off = 0; off < copied; off += block) {
    ssize_t n = pread(out, buf, (size_t)block, (off_t)off);
    if (n <= 0) break;
    crc = crc32_update(crc, buf, (size_t)n);
    crunch(buf, (size_t)n);
    bytes += n;
    blocks++;
  }
  close(out);

  char line[160];
  snprintf(line, sizeof line, "rank %d: copied %ld bytes crc %08x; read back %ld blocks crc %08x\n",
           rank, copied, (unsigned)copy_crc, blocks, (unsigned)crc);
  print_ranked(line);
  free(buf);
  MPI_Finalize();
  return 0;
}
