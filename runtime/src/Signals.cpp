#include "Signals.h"

#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>

#include "ErrnoGuard.h"
#include "PtThread.h"
#include "ThreadState.h"

namespace ppios {

SignalTable &SignalTable::get() {
  static SignalTable *table = new SignalTable;  // never destroyed: handlers may run at exit
  return *table;
}

bool SignalTable::fault_signal(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL;
}

namespace {
// The signals of the fault net.
constexpr int kNetSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
}  // namespace

bool SignalTable::ours(const struct sigaction &action) {
  return (action.sa_flags & SA_SIGINFO) &&
         (action.sa_sigaction == &trampoline || action.sa_sigaction == &fault_handler);
}

namespace {
uintptr_t handler_of(const struct sigaction &action) {
  return (action.sa_flags & SA_SIGINFO) ? reinterpret_cast<uintptr_t>(action.sa_sigaction)
                                        : reinterpret_cast<uintptr_t>(action.sa_handler);
}
bool is_function(uintptr_t handler) {
  return handler != reinterpret_cast<uintptr_t>(SIG_DFL) &&
         handler != reinterpret_cast<uintptr_t>(SIG_IGN);
}
}  // namespace

int SignalTable::program_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  if (sig <= 0 || sig >= NSIG) return sigaction(sig, act, old);  // EINVAL, as without us
  ProgramAction &mine = actions_[sig];
  // What the program is told it had: its own action wherever ours is installed.
  auto reported = [&](const struct sigaction &real) {
    if (!ours(real)) return real;
    if (mine.set.load(std::memory_order_acquire)) return mine.full;
    return before_net_[sig];
  };
  struct sigaction real_old{};
  if (act == nullptr || net_[sig].load(std::memory_order_acquire)) {
    // A query; or a fault signal under the net, which stays installed and chains to the
    // program's action from now on.
    if (sigaction(sig, nullptr, &real_old) != 0) return -1;
    struct sigaction before = reported(real_old);
    if (act != nullptr) {
      if (sig == SIGKILL || sig == SIGSTOP) {
        errno = EINVAL;
        return -1;
      }
      mine.full = *act;
      mine.handler.store(handler_of(*act), std::memory_order_relaxed);
      mine.flags.store(act->sa_flags, std::memory_order_relaxed);
      mine.set.store(true, std::memory_order_release);
    }
    if (old != nullptr) *old = before;
    return 0;
  }
  const uintptr_t handler = handler_of(*act);
  struct sigaction install = *act;
  const bool was_set = mine.set.load(std::memory_order_acquire);
  const uintptr_t was_handler = mine.handler.load(std::memory_order_relaxed);
  const int was_flags = mine.flags.load(std::memory_order_relaxed);
  const struct sigaction was_full = mine.full;
  if (is_function(handler)) {
    install.sa_sigaction = &trampoline;
    install.sa_flags |= SA_SIGINFO;
    // Published before the trampoline is installed, so it never runs without it.
    mine.handler.store(handler, std::memory_order_relaxed);
    mine.flags.store(act->sa_flags, std::memory_order_relaxed);
    mine.set.store(true, std::memory_order_release);
  }
  if (sigaction(sig, &install, &real_old) != 0) {  // SIGKILL, SIGSTOP, a bad mask...
    mine.handler.store(was_handler, std::memory_order_relaxed);
    mine.flags.store(was_flags, std::memory_order_relaxed);
    mine.set.store(was_set, std::memory_order_release);
    return -1;
  }
  if (is_function(handler)) {
    mine.full = *act;
  } else {
    mine.set.store(false, std::memory_order_release);
  }
  if (old != nullptr) {
    if (!ours(real_old)) *old = real_old;
    else if (was_set) *old = was_full;
    else *old = before_net_[sig];
  }
  return 0;
}

// A program handler may leave by a jump (siglongjmp, longjmp) instead of returning, past
// the decrement below; the thread would then count as inside a handler (every call passed
// straight through, nothing prefetched or served) for the rest of its life. So each
// delivery records where it runs: the trampoline's frame, and the alternate stack if the
// kernel switched to one (SA_ONSTACK). The handler and everything it calls run below that
// frame (on the same stack) or inside that alternate stack; a jump that leaves the handler
// goes to a frame of the interrupted code, above the kernel's signal frame (over a KiB),
// hence above the recorded one by more than a wrapped call's own frames, or off the
// alternate stack. So a wrapped call that finds itself above the innermost recorded frame
// (or off its alternate stack) is past that handler: in_program_handler forgets it.
// Wrapping siglongjmp instead would miss jumps made by libraries, and its target (in a
// mangled jmp_buf) cannot be read to tell a jump inside the handler from one out of it.
// (A handler that switches to a stack of its own, swapcontext to a coroutine's, is taken
// as left while it runs there if that stack lies above.)
// A jump out of a handler that interrupted the runtime itself leaves runtime_depth as it
// is: the runtime's locks may be held by the abandoned frames, so the thread stays out of
// the runtime (pass-through still tells the change table every change, WrapSupport.h).
__attribute__((noinline)) void SignalTable::deliver(int sig, uintptr_t handler, int flags, siginfo_t *info,
                                                    void *context) {
  if (is_function(handler)) {
    ThreadState &t = t_thread;
    const int depth = t.handler_depth;
    if (depth < ThreadState::kHandlerFrames) {
      ThreadState::HandlerFrame &frame = t.handler_frames[depth];
      frame.frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
      frame.alt_low = frame.alt_high = 0;
      stack_t alt{};
      if (sigaltstack(nullptr, &alt) == 0 && (alt.ss_flags & SS_ONSTACK)) {
        frame.alt_low = reinterpret_cast<uintptr_t>(alt.ss_sp);
        frame.alt_high = frame.alt_low + alt.ss_size;
      }
    }
    t.handler_depth = depth + 1;
    if (flags & SA_SIGINFO)
      reinterpret_cast<void (*)(int, siginfo_t *, void *)>(handler)(sig, info, context);
    else
      reinterpret_cast<void (*)(int)>(handler)(sig);
    t.handler_depth = depth;
    return;
  }
  const bool sent = info == nullptr || info->si_code <= 0;  // kill/raise, not a fault
  if (handler == reinterpret_cast<uintptr_t>(SIG_IGN) && (sent || !fault_signal(sig))) return;
  // The default action: reinstall it and let the signal come again, which the kernel
  // does by itself for a fault (the instruction runs again) and we do for a sent one.
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  if (sent) raise(sig);
}

void SignalTable::trampoline(int sig, siginfo_t *info, void *context) {
  SignalTable &table = get();
  ProgramAction &mine = table.actions_[sig];
  uintptr_t handler = mine.handler.load(std::memory_order_acquire);
  int flags = mine.flags.load(std::memory_order_relaxed);
  if (!mine.set.load(std::memory_order_acquire)) {
    handler = reinterpret_cast<uintptr_t>(SIG_DFL);
    flags = 0;
  }
  deliver(sig, handler, flags, info, context);
}

bool SignalTable::pass_to_program_threads(int sig, siginfo_t *info, void *context) {
  if (info == nullptr || context == nullptr) return false;
  // With its siginfo where the kernel allows it (sigqueue()'s); one from kill() the kernel
  // lets only the main thread queue again, so that one is sent anew, the process its sender.
  if (syscall(SYS_rt_sigqueueinfo, getpid(), sig, info) != 0 && kill(getpid(), sig) != 0) return false;
  // The mask the kernel restores when the handler returns: blocked from then on, so the
  // signal goes to a thread of the program's (or waits, as it would, if they all block it).
  sigaddset(&static_cast<ucontext_t *>(context)->uc_sigmask, sig);
  return true;
}

void SignalTable::fault_handler(int sig, siginfo_t *info, void *context) {
  // A fault (si_code > 0: the kernel's) or a signal this thread raised itself.
  const bool own = info != nullptr && (info->si_code > 0 || (info->si_code == SI_TKILL && info->si_pid == getpid()));
  if (own) pt_fault_escape(sig, info);  // returns if not the PT's slice
  ErrnoGuard errno_guard;  // a handler that returns must leave errno alone (not before the
                           // escape: its siglongjmp would skip the destructor)
  if (!own && sig == SIGABRT && t_thread.role != ThreadRole::MT && pass_to_program_threads(sig, info, context))
    return;
  SignalTable &table = get();
  ProgramAction &mine = table.actions_[sig];
  if (mine.set.load(std::memory_order_acquire)) {
    deliver(sig, mine.handler.load(std::memory_order_relaxed),
            mine.flags.load(std::memory_order_relaxed), info, context);
  } else {
    const struct sigaction &before = table.before_net_[sig];
    uintptr_t handler = handler_of(before);
    // A handler installed before the net (by MPI, say) runs as the kernel would run it,
    // not as a program handler: calls it makes are none of ours.
    if (is_function(handler)) {
      if (before.sa_flags & SA_SIGINFO)
        reinterpret_cast<void (*)(int, siginfo_t *, void *)>(handler)(sig, info, context);
      else
        reinterpret_cast<void (*)(int)>(handler)(sig);
    } else {
      deliver(sig, handler, before.sa_flags, info, context);
    }
  }
}

void SignalTable::install_fault_net() {
  if (net_installed_.exchange(true)) return;
  for (int sig : kNetSignals) {
    struct sigaction net{};
    net.sa_sigaction = &fault_handler;
    net.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&net.sa_mask);
    if (sigaction(sig, &net, &before_net_[sig]) == 0) net_[sig].store(true, std::memory_order_release);
  }
}

__attribute__((noinline)) bool in_program_handler() {
  ThreadState &t = t_thread;
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  while (t.handler_depth > 0 && t.handler_depth <= ThreadState::kHandlerFrames) {
    const ThreadState::HandlerFrame &frame = t.handler_frames[t.handler_depth - 1];
    const bool on_alt = frame.alt_high != 0;
    const bool inside = on_alt ? here >= frame.alt_low && here < frame.alt_high && here < frame.frame
                               : here < frame.frame;
    // Off its alternate stack, a handler delivered there is left; on the thread's stack,
    // a nested handler running on an alternate one is checked first (it is innermost).
    if (inside) return true;
    --t.handler_depth;
  }
  return t.handler_depth > 0;
}

}  // namespace ppios
