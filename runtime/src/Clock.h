#pragma once

#include <cstdint>
#include <ctime>

namespace ppios {

// Monotonic nanoseconds; every duration and trace timestamp in the runtime uses it.
inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace ppios
