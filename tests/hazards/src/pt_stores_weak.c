/* Case 18: a weak helper replaced at link time. The record layout here is a weak default;
 * pt_stores_plugin.c, linked in, defines the strong one, which counts the records it
 * places. A PT that judged the helper by the weak body and called it would run the strong
 * one, and the count rank 0 prints would change.
 * usage: pt_stores_weak <data.bin> */
#include <fcntl.h>
#include <unistd.h>

#include "hz.h"

#define REC 64

__attribute__((weak)) long record_offset(int i) { return (long)REC * i; }
long records_placed(void);

int main(int argc, char **argv) {
  char rec[REC];
  uint64_t h = 0;
  int rank, fd, i;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  fd = open(argv[1], O_RDONLY);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  usleep(50000);
  if (rank == 0) printf("records placed before: %ld\n", records_placed());
  for (i = 0; i < 64; i++) {
    if (pread(fd, rec, REC, record_offset(i)) != REC) break;
    h = hz_sum(h, rec, REC);
    usleep(2000);
  }
  close(fd);
  if (rank == 0) printf("records placed: %ld sum %016llx\n", records_placed(), (unsigned long long)h);
  MPI_Finalize();
  return 0;
}
