// What several of the runtime's files share, and nothing outside them: the calling
// thread's trace id and its CPU clock. Hidden, so that the library exports no more
// symbols than when they were file-local.
#pragma once

#include <time.h>

#include <cstdint>

#include "Trace.h"

namespace ppios {
#pragma GCC visibility push(hidden)

// The trace's thread id of the calling thread: the MT's unless the thread is the PT, a
// waiting thread or a PT reader, each of which sets its own when it starts.
inline thread_local int t_trace_tid = kTraceMT;

// CPU time of the calling thread, 0 if unknown.
inline uint64_t thread_cpu_ns() {
  struct timespec cpu{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) != 0) return 0;
  return static_cast<uint64_t>(cpu.tv_sec) * 1000000000u + static_cast<uint64_t>(cpu.tv_nsec);
}

#pragma GCC visibility pop
}  // namespace ppios
