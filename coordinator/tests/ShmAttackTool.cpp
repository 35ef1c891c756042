// What a local attacker (or a stuck process) does to a node-local segment, for the shm
// hardening tests: run as another user (shm_attack.sh) or the same one (shm_fuzz.sh,
// cli_test.sh).
//
//   coordinator_shm_attack TARGET GROUP hold MS       take the segment's lock and keep it
//   coordinator_shm_attack TARGET GROUP forge KIND    write KIND (ShmSlotTable::forge_for_test)
//   coordinator_shm_attack TARGET GROUP fuzz SECONDS  write random bytes at random places
//   coordinator_shm_attack TARGET GROUP squat -       create the name first, mode 0666
//
// GROUP is -1 for the private segment. Exits 0 when the attack could be made, 1 when the
// segment could not be opened (what a private segment must do to another user).
#include "ShmSlotTable.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <random>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s TARGET GROUP hold MS|forge KIND|fuzz SECONDS|squat -\n", argv[0]);
    return 2;
  }
  const std::string target = argv[1], action = argv[3], arg = argv[4];
  const int64_t group = std::atoll(argv[2]);
  // The name a victim uses is owned by the victim's uid: the squatter takes it from VICTIM_UID.
  // Only the predictable name can be computed without the victim's node secret.
  if (action == "squat") {
    std::string name = ppios::ShmSlotTable::predictable_name(target, group);
    if (const char *uid = getenv("VICTIM_UID")) {
      size_t dot = name.find('.');
      size_t next = name.find('.', dot + 1);
      name = name.substr(0, dot + 1) + uid + name.substr(next);
    }
    std::string path = "/dev/shm" + name;
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
    if (fd < 0) return perror(path.c_str()), 1;
    fchmod(fd, 0666);
    if (ftruncate(fd, 4096) != 0) return perror("ftruncate"), 1;
    close(fd);
    printf("%s\n", path.c_str());
    return 0;
  }
  std::string error;
  auto table = ppios::ShmSlotTable::open(target, group, false, 1000, &error);
  if (!table) {
    fprintf(stderr, "cannot open the segment: %s\n", error.empty() ? "it does not exist" : error.c_str());
    return 1;
  }
  if (action == "hold") {
    printf("holding\n");
    fflush(stdout);
    table->hold_lock_for_test(std::atoi(arg.c_str()));
    return 0;
  }
  if (action == "forge") return table->forge_for_test(arg) ? 0 : 2;
  if (action == "fuzz") {
    std::string path = "/dev/shm" + ppios::ShmSlotTable::segment_name(target, group);
    int fd = open(path.c_str(), O_RDWR | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return perror(path.c_str()), 1;
    size_t size = static_cast<size_t>(st.st_size);
    auto *mem = static_cast<unsigned char *>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    if (mem == MAP_FAILED) return perror("mmap"), 1;
    std::mt19937_64 rng{std::random_device{}()};
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(arg.c_str()));
    uint64_t writes = 0;
    while (std::chrono::steady_clock::now() < end) {
      // Bursts of random bytes: mostly in the header and the first entries (where the
      // live state is), sometimes anywhere.
      size_t span = rng() % 4 ? std::min<size_t>(size, 8192) : size;
      size_t at = rng() % span, len = 1 + rng() % 16;
      for (size_t i = 0; i < len && at + i < size; ++i) mem[at + i] = static_cast<unsigned char>(rng());
      ++writes;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    printf("%llu writes\n", static_cast<unsigned long long>(writes));
    return 0;
  }
  fprintf(stderr, "unknown action %s\n", action.c_str());
  return 2;
}
