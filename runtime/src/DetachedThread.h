// Starting the runtime's own threads (the PT, waiting threads, PT readers).
//
// The system may refuse a thread: under an address-space limit (ulimit -v) a thread's
// stack is address space the program needs, and a thread limit may be reached. A refused
// thread is never the program's error, so the runtime goes on without it: no PT, and the
// program runs unprefetched; no waiting thread, and its prefetch is dropped; no reader,
// and the PT fills the prefetch itself. std::thread throws there instead, and an
// exception out of the runtime ends the program.
//
// Threads that run only runtime code (waiting threads, readers) take a small stack, so
// that under ulimit -v they cost the program little address space; the PT runs the
// program's code (its slice) and takes the default stack, as the program's own threads do.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <functional>

namespace ppios {

// A stack for threads that run runtime code only: their deepest path is a coordinator
// call (hiredis, the shm futexes) under a trace event, a few KiB.
constexpr size_t kHelperThreadStack = 512 * 1024;

// Runs body on a new detached thread with a stack of stack_bytes (0: the default).
// Returns false, and runs nothing, if the system refused the thread; never throws. The
// thread inherits the caller's signal mask. *id, if given, is the thread's when it returns
// true (body may already be running: a caller that shares it with body locks around both).
bool start_detached_thread(std::function<void()> body, size_t stack_bytes, pthread_t *id = nullptr);

}  // namespace ppios
