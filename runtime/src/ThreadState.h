// What the calling thread is, for the interposed calls (__wrap_*), which must decide
// before anything else whether a call may enter the runtime at all.
//
// Everything here is read in signal handlers: plain thread_locals with the initial-exec
// TLS model (libppios is linked at start-up, never dlopen'ed, so no lazy TLS allocation)
// and lock-free atomics only.
#pragma once

#include <atomic>

namespace ppios {

enum class ThreadRole : unsigned char {
  MT,  // any thread of the program's own
  PT,  // the prefetch thread
  WT,  // a waiting thread
  Reader,  // a PT reader (PPIOS_PT_READERS)
};

struct ThreadState {
  ThreadRole role = ThreadRole::MT;
  // >0 while this thread runs runtime code entered through an interposed call or a PT
  // call: a nested interposed call (a signal handler interrupting it) must not re-enter,
  // and a PT fault here is the runtime's own, not the pre-executed slice's.
  int runtime_depth = 0;
  // >0 while this thread runs a program signal handler (through the trampoline).
  int handler_depth = 0;
  // The program's return address of the interposed call being run (null outside one): the
  // trace records it so that ppios-report can name the call's source line.
  const void *call_site = nullptr;
  // The PT's or a WT's: where the read being prefetched is in the program's source
  // ("file:line:col", a string literal ppios-cc emitted; see ppios.h), or null. Set by
  // each ppios_prefetch_* call (and by a WT for its job) and kept until the next one.
  const char *pt_site = nullptr;
};

extern thread_local ThreadState t_thread __attribute__((tls_model("initial-exec")));

// Set in a child forked without exec: it has no PT and may have inherited runtime locks
// held by threads that do not exist in it, so every call passes straight through.
extern std::atomic<bool> g_forked_child;

// True when an interposed call must go straight to the real call: not an MT, already
// inside the runtime, inside a program signal handler, or in a forked child.
inline bool pass_through() {
  const ThreadState &t = t_thread;
  return t.role != ThreadRole::MT || t.runtime_depth > 0 || t.handler_depth > 0 ||
         g_forked_child.load(std::memory_order_relaxed);
}

// Marks the thread as inside the runtime for its lifetime.
class RuntimeScope {
 public:
  // `site`: __builtin_return_address(0) of the interposed call, taken in the __wrap_
  // function the program called (wrappers that forward to another do so as tail calls).
  explicit RuntimeScope(const void *site = nullptr) {
    if (t_thread.runtime_depth++ == 0) t_thread.call_site = site;
  }
  ~RuntimeScope() {
    if (--t_thread.runtime_depth == 0) t_thread.call_site = nullptr;
  }
  RuntimeScope(const RuntimeScope &) = delete;
  RuntimeScope &operator=(const RuntimeScope &) = delete;
};

}  // namespace ppios
