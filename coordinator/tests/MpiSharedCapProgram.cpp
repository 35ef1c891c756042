// One MPI job of the multi-job test: every rank runs two threads that take PT slots from
// the coordinator and count themselves in a file mapped by every rank of every job, so the
// test sees whether all jobs together stayed within one cap.
//
// usage: mpi_shared_cap COORDINATOR TARGET THRESHOLD COUNTER_FILE SECONDS
#include "ppios/Coordinator.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

struct Counters {
  std::atomic<int> inflight;
  std::atomic<int> max_inflight;
  std::atomic<long> grants;
};

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 6) {
    if (rank == 0) fprintf(stderr, "usage: %s COORDINATOR TARGET THRESHOLD COUNTER_FILE SECONDS\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  ppios::CoordinatorOptions o;
  o.address = argv[1];
  o.target = argv[2];
  o.threshold = atoll(argv[3]);
  // The node backend's test runs each job as a simulated node of its own.
  if (const char *node = getenv("PPIOS_SIM_NODE")) o.sim_node = node;
  double seconds = atof(argv[5]);
  int fd = open(argv[4], O_RDWR);
  if (fd < 0) {
    perror(argv[4]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  auto *c = static_cast<Counters *>(mmap(nullptr, sizeof(Counters), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  std::string err;
  auto coord = ppios::make_coordinator(o, &err);
  if (!coord) {
    fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long mine = 0;
  auto work = [&] {
    long n = 0;
    while (std::chrono::steady_clock::now() < until) {
      ppios::SlotTicket t = coord->acquire(ppios::IoClass::PT, 1 + rank);
      int now = c->inflight.fetch_add(1) + 1;
      int prev = c->max_inflight.load();
      while (now > prev && !c->max_inflight.compare_exchange_weak(prev, now)) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      c->inflight.fetch_sub(1);
      coord->release(t);
      c->grants.fetch_add(1);
      ++n;
    }
    return n;
  };
  long other_n = 0;
  std::thread other([&] { other_n = work(); });
  mine = work();
  other.join();
  mine += other_n;
  coord.reset();
  long total = 0;
  MPI_Reduce(&mine, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("job grants %ld\n", total);
  MPI_Finalize();
  return 0;
}
