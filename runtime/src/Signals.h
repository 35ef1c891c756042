// The program's signal handlers, installed behind the runtime's trampoline, and the
// fault net of the prefetch thread.
//
// A handler may interrupt the MT anywhere, also inside the runtime with a lock held; if
// the handler's own I/O then entered the runtime it could wait for that lock forever.
// So the program's handlers (sigaction/signal through __wrap_*) run behind a trampoline
// that marks the thread as inside a handler, and every interposed call made there goes
// straight to the real call. The program sees only its own handlers: the old action it
// is told about is the one it installed, never the trampoline.
//
// The fault net (SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT, installed when the PT starts)
// turns a fault of the PT's slice, or an abort() there (a library's failed check, glibc's
// heap checks), into an escape; any other such signal goes where it would without ppios:
// to the program's handler, the handler that was there before the net, or the default
// action. Only a signal a thread brought on itself (a fault, or one it raised: abort()
// raises SIGABRT on its own thread) can be the slice's; one sent to the process is the
// program's, whichever thread the kernel gave it to. The runtime's threads leave SIGABRT
// unblocked for the PT's own abort(), so a SIGABRT sent to the process may reach them: they
// send it to the process again and block it, and one of the program's threads takes it.
//
// Everything read in a handler is an atomic; no locks.
#pragma once

#include <atomic>
#include <csignal>
#include <cstdint>

namespace ppios {

class SignalTable {
 public:
  static SignalTable &get();

  // sigaction() as the program asked for it.
  int program_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
  // Once per process; later calls do nothing.
  void install_fault_net();

 private:
  struct ProgramAction {
    std::atomic<uintptr_t> handler{0};
    std::atomic<int> flags{0};
    std::atomic<bool> set{false};   // the program installed an action through us
    struct sigaction full{};        // the whole action, to report as the old one
  };

  static void trampoline(int sig, siginfo_t *info, void *context);
  static void fault_handler(int sig, siginfo_t *info, void *context);
  static bool ours(const struct sigaction &action);
  // Runs `handler` (SIG_DFL/SIG_IGN or a function with `flags`) as the kernel would have.
  static void deliver(int sig, uintptr_t handler, int flags, siginfo_t *info, void *context);
  static bool fault_signal(int sig);
  // A SIGABRT sent to the process that reached a runtime thread: sent to the process again
  // and blocked on this thread once the handler returns. False, with nothing done, if it
  // could not be sent.
  static bool pass_to_program_threads(int sig, siginfo_t *info, void *context);

  ProgramAction actions_[NSIG];
  struct sigaction before_net_[NSIG] = {};
  std::atomic<bool> net_[NSIG] = {};
  std::atomic<bool> net_installed_{false};
};

}  // namespace ppios
