// start_detached_thread: a thread runs the body with the stack asked for, and a thread the
// system refuses is a false return, never an exception (std::thread would end the program).
#include "DetachedThread.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>

namespace ppios {
namespace {

TEST(DetachedThread, RunsTheBodyOnAThreadWithTheStackAskedFor) {
  std::mutex mu;
  std::condition_variable cv;
  bool ran = false;
  pid_t tid = 0;
  size_t stack = 0;
  pthread_t id{};
  ASSERT_TRUE(start_detached_thread(
      [&] {
        pthread_attr_t attr;
        size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
          pthread_attr_getstacksize(&attr, &size);
          pthread_attr_destroy(&attr);
        }
        std::lock_guard<std::mutex> lock(mu);
        tid = gettid();
        stack = size;
        ran = true;
        cv.notify_all();
      },
      kHelperThreadStack, &id));
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return ran; }));
  EXPECT_NE(tid, gettid());
  EXPECT_GE(stack, kHelperThreadStack);
  EXPECT_LT(stack, 2 * kHelperThreadStack) << "not the default stack";
}

// Virtual memory of this process now, in bytes (/proc/self/statm's first field).
size_t address_space_in_use() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Under an address-space limit with 4 MiB to spare, a default stack (8 MiB) cannot be
// had: the call says so, in a child process that the limit is set in.
TEST(DetachedThread, ARefusedThreadIsAFalseReturn) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a sanitizer's shadow memory does not run under an address-space limit";
#endif
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const size_t in_use = address_space_in_use();
    if (in_use == 0) _exit(3);
    struct rlimit limit = {in_use + (4u << 20), in_use + (4u << 20)};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
    bool ran = false;
    const bool started = start_detached_thread([&] { ran = true; }, 0);
    _exit(started ? 1 : ran ? 2 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the thread was started under the limit; 2: the body ran; "
                                       "3, 4: the limit could not be set";
}

}  // namespace
}  // namespace ppios
