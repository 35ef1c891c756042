// What every __wrap_ function decides first: whether the caller is the PT, and whether a
// descriptor the program names is one of the runtime's own.
#pragma once

#include <cerrno>

#include "PtThread.h"
#include "ThreadState.h"

namespace ppios {

inline bool on_pt() { return t_thread.role == ThreadRole::PT; }

// Off the PT: a descriptor of the PT's, or a helper's copy of one, does not exist for the
// program (without ppios that number would not be open): the call fails with EBADF, as
// it would.
inline bool pts_own(int fd) {
  if (!PtResources::get().runtime_owns_fd(fd)) return false;
  errno = EBADF;
  return true;
}

// The one shape of every wrapper (Interpose.cpp declares each call once, with its kind):
// the PT's call does `pt` (on its own handles only); an MT call that must not enter the
// runtime (pass_through) is the real call; any other enters the runtime's version with
// the program's call site (the wrapper's return address).
template <class Pt, class Real, class Mt>
inline auto dispatch(const void *site, Pt &&pt, Real &&real, Mt &&mt) -> decltype(real()) {
  if (on_pt()) return pt();
  if (pass_through()) return real();
  RuntimeScope scope(site);
  return mt();
}

// A regular file behind the program's descriptor `fd` changes from now on at moments the
// runtime does not see (stores through a shared writable mapping, an asynchronous write
// in flight): it is held, node-wide, for the rest of the process (FileChanges.cpp).
// Where the runtime may not be entered the table still learns of it, lock-free.
void hold_for_good(int fd, const void *site);

}  // namespace ppios
