// What the calling thread is, for the interposed calls (__wrap_*), which must decide
// before anything else whether a call may enter the runtime at all.
//
// Everything here is read in signal handlers: plain thread_locals with the initial-exec
// TLS model (libppios is linked at start-up, never dlopen'ed, so no lazy TLS allocation)
// and lock-free atomics only.
#pragma once

#include <atomic>
#include <cstdint>

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
  // Where each of the innermost kHandlerFrames handlers running was delivered (the
  // trampoline's frame, and the alternate stack it ran on, if any): a handler may be left
  // by a jump (siglongjmp) instead of a return, and is then found left by the stack
  // (in_program_handler, Signals.cpp).
  struct HandlerFrame {
    uintptr_t frame = 0;
    uintptr_t alt_low = 0, alt_high = 0;  // both 0: on the thread's own stack
  };
  static constexpr int kHandlerFrames = 8;
  HandlerFrame handler_frames[kHandlerFrames];
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

// Whether the thread still runs a program signal handler (handler_depth > 0): forgets
// those it left by a jump (Signals.cpp). Async-signal-safe.
bool in_program_handler();

// True when an interposed call must go straight to the real call: not an MT, already
// inside the runtime, inside a program signal handler, or in a forked child. The call
// still tells the node's change table what it changes (dispatch, WrapSupport.h).
inline bool pass_through() {
  const ThreadState &t = t_thread;
  if (t.role != ThreadRole::MT || t.runtime_depth > 0 || g_forked_child.load(std::memory_order_relaxed))
    return true;
  return t.handler_depth > 0 && in_program_handler();
}

// Whether a synchronization on this thread is a release or acquire point of the
// coherence rule: on the MT, whether or not it is inside the runtime already (a wrapper's
// own points, as close() releasing record locks or a collective MPI-IO call, run under
// its RuntimeScope); never on the runtime's threads, in a forked child or in a program's
// signal handler, where the runtime is not entered.
inline bool synchronizes_coherence() {
  const ThreadState &t = t_thread;
  if (t.role != ThreadRole::MT || g_forked_child.load(std::memory_order_relaxed)) return false;
  return !(t.handler_depth > 0 && in_program_handler());
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
