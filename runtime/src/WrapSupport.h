// What every __wrap_ function decides first: whether the caller is the PT, and whether a
// descriptor the program names is one of the runtime's own.
#pragma once

#include <cerrno>
#include <type_traits>

#include "ErrnoGuard.h"
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

// What a call changes in files, told to the node's change table where the runtime may not
// be entered (a signal handler, a forked child, a call the runtime itself made): before()
// runs before the real call, after(result) after it. Everything an effect does is
// lock-free and async-signal-safe (fstat, fcntl, atomics in the shared table and in
// StreamHolds), and keeps errno. Holds and bumps are the node's, not the runtime's: a call
// that passes straight through still holds what it makes writable and bumps what it
// changed, so other processes never serve its file stale (docs/design/coherence.md).
struct NoEffect {
  void before() {}
  template <class R>
  void after(const R &) {}
};

// The one shape of every wrapper (Interpose.cpp declares each call once, with its kind):
// the PT's call does `pt` (on its own handles only); an MT call that must not enter the
// runtime (pass_through) is the real call with its `effect` on the change table; any
// other enters the runtime's version with the program's call site (the wrapper's return
// address), which does the same and also keeps this process's cache.
template <class Pt, class Real, class Mt, class Effect = NoEffect>
inline auto dispatch(const void *site, Pt &&pt, Real &&real, Mt &&mt, Effect &&effect = Effect{})
    -> decltype(real()) {
  if (on_pt()) return pt();
  if (pass_through()) {
    effect.before();
    if constexpr (std::is_void_v<decltype(real())>) {
      real();
      ErrnoGuard errno_guard;
      effect.after(0);
    } else {
      auto result = real();
      ErrnoGuard errno_guard;
      effect.after(result);
      return result;
    }
  } else {
    RuntimeScope scope(site);
    return mt();
  }
}

// Where a coherence step does not go through dispatch: `step(entered)` with entered
// false where the runtime may not be entered (the change table alone is told), else
// inside the runtime. errno is kept.
template <class Step>
inline void coherence_effect(const void *site, Step &&step) {
  ErrnoGuard errno_guard;
  if (pass_through()) return step(false);
  RuntimeScope scope(site);
  step(true);
}

// Descriptor `fd` may lead elsewhere now (a dup onto it, an open or a close): a standard
// stream's hold follows its descriptor (StreamHolds).
void fd_repointed(int fd, bool entered);

// A regular file behind the program's descriptor `fd` changes from now on at moments the
// runtime does not see (stores through a shared writable mapping, an asynchronous write
// in flight): it is held, node-wide, for the rest of the process (FileChanges.cpp).
// Where the runtime may not be entered the table still learns of it, lock-free.
void hold_for_good(int fd, const void *site);

}  // namespace ppios
