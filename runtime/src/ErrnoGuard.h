// Keeps errno across the runtime's own probes and bookkeeping: a call the program made
// must report the original call's errno, never one of ours.
#pragma once

#include <cerrno>

namespace ppios {

class ErrnoGuard {
 public:
  ErrnoGuard() : saved_(errno) {}
  ~ErrnoGuard() { errno = saved_; }
  ErrnoGuard(const ErrnoGuard &) = delete;
  ErrnoGuard &operator=(const ErrnoGuard &) = delete;

 private:
  int saved_;
};

}  // namespace ppios
