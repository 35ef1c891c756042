// The PT's handles, the pass-through decision and the signal trampolines, in one process
// linked with libppios (no MPI needed; PPIOS_MODE=pp keeps the coordinator out).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <string>
#include <thread>

#include "ChangeGenerations.h"
#include "FileProbe.h"
#include "PtThread.h"
#include "Runtime.h"
#include "Signals.h"
#include "SyncPoints.h"
#include "ThreadState.h"
#include "ppios/ppios.h"

extern "C" {
int __wrap_sigaction(int, const struct sigaction *, struct sigaction *);
sighandler_t __wrap_signal(int, sighandler_t);
ssize_t __wrap_read(int, void *, size_t);
int __wrap_close(int);
}

using namespace ppios;

namespace {

std::string temp_path(const char *name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/ppios-pt-safety-" + std::to_string(getpid()) + "-" + name;
}

std::string make_file(const char *name, size_t bytes) {
  std::string path = temp_path(name);
  FILE *f = std::fopen(path.c_str(), "wb");
  for (size_t i = 0; i < bytes; ++i) std::fputc(static_cast<int>(i * 7 + 3) & 0xff, f);
  std::fclose(f);
  return path;
}

}  // namespace

TEST(PtSafetyTest, PtOpensOnlyRegularFilesAndOwnsThem) {
  std::string file = make_file("regular", 1000);
  int fd = ppios_pt_open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(PtResources::get().owns_fd(fd));
  EXPECT_EQ(fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY);
  // A high number: the program's next open() gets the number it gets without ppios.
  EXPECT_GE(fd, PtResources::high_fd_base());
  int next = open(file.c_str(), O_RDONLY);
  EXPECT_LT(next, 64);
  close(next);
  // Off the PT, the PT's descriptor does not exist for the program's calls.
  char byte;
  errno = 0;
  EXPECT_EQ(__wrap_read(fd, &byte, 1), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(__wrap_close(fd), -1);
  EXPECT_TRUE(PtResources::get().owns_fd(fd));
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1000);  // never truncated
  EXPECT_EQ(ppios_pt_close(fd), 0);
  EXPECT_FALSE(PtResources::get().owns_fd(fd));

  // A FIFO without a writer: refused at once (never blocks), as are devices and dirs.
  std::string fifo = temp_path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const char *path : {fifo.c_str(), "/dev/null", "/dev/stdin", "/tmp"}) {
    errno = 0;
    EXPECT_EQ(ppios_pt_open(path, O_RDONLY), -1) << path;
    EXPECT_EQ(ppios_pt_fopen(path, "r"), nullptr) << path;
  }
  ppios_pt_mpi_file token = reinterpret_cast<ppios_pt_mpi_file>(1);
  EXPECT_NE(ppios_pt_MPI_File_open(fifo.c_str(), 0, &token), MPI_SUCCESS);
  EXPECT_EQ(token, nullptr);
  unlink(fifo.c_str());
  unlink(file.c_str());
}

// A waiting thread's or reader's copy of a PT descriptor does not exist for the program
// either: a program that closes numbers it never opened (or reads them) gets EBADF, as
// without ppios, and cannot close the copy under the job. The PT's end (release_all)
// leaves it to its job, which gives it back.
TEST(PtSafetyTest, HelperCopiesAreTheRuntimesUntilGivenBack) {
  std::string file = make_file("helper", 1000);
  int fd = ppios_pt_open(file.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  int copy = PtResources::get().dup_for_helper(fd);
  ASSERT_GE(copy, PtResources::high_fd_base());
  EXPECT_FALSE(PtResources::get().owns_fd(copy)) << "not the PT's: PT calls on it are refused";
  EXPECT_TRUE(PtResources::get().runtime_owns_fd(copy));
  char byte;
  errno = 0;
  EXPECT_EQ(__wrap_read(copy, &byte, 1), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(__wrap_close(copy), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(ppios_pt_close(fd), 0);
  EXPECT_EQ(pread(copy, &byte, 1, 10), 1) << "the copy outlives the PT's descriptor";
  EXPECT_EQ(static_cast<unsigned char>(byte), (10 * 7 + 3) & 0xff);
  PtResources::get().close_helper_fd(copy);
  EXPECT_FALSE(PtResources::get().runtime_owns_fd(copy));
  EXPECT_EQ(fcntl(copy, F_GETFD), -1) << "closed";
  unlink(file.c_str());
}

TEST(PtSafetyTest, PtCallsRefuseDescriptorsAndStreamsItDoesNotOwn) {
  std::string file = make_file("foreign", 5000);
  int mt_fd = open(file.c_str(), O_RDONLY);
  ASSERT_GE(mt_fd, 0);
  ASSERT_EQ(lseek(mt_fd, 100, SEEK_SET), 100);
  char buf[64];
  errno = 0;
  EXPECT_EQ(ppios_prefetch_pread(mt_fd, 10, 0, 1, 0, NULL), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(ppios_prefetch_read(mt_fd, 10, 1, 0, NULL), -1);
  EXPECT_EQ(ppios_prefetch_read_copy(mt_fd, buf, sizeof buf, 1, 0, NULL), -1);
  EXPECT_EQ(ppios_prefetch_pread_copy(mt_fd, buf, sizeof buf, 0, 1, 0, NULL), -1);
  errno = 0;
  EXPECT_EQ(ppios_pt_close(mt_fd), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(lseek(mt_fd, 0, SEEK_CUR), 100);  // untouched, still open

  FILE *mt_stream = fopen(file.c_str(), "rb");
  ASSERT_NE(mt_stream, nullptr);
  EXPECT_EQ(ppios_prefetch_fread(1, 10, mt_stream, 1, 0, NULL), 0u);
  EXPECT_EQ(ppios_prefetch_fread_copy(buf, 1, 10, mt_stream, 1, 0, NULL), 0u);
  EXPECT_EQ(ppios_pt_fclose(mt_stream), EOF);
  EXPECT_EQ(ftell(mt_stream), 0);
  EXPECT_EQ(ppios_pt_fclose(stdin), EOF);

  // The PT's own reopened copy is its own, at the MT's position.
  int pt_fd = ppios_pt_reopen_fd(mt_fd);
  ASSERT_GE(pt_fd, 0);
  EXPECT_EQ(lseek(pt_fd, 0, SEEK_CUR), 100);
  EXPECT_EQ(ppios_prefetch_read_copy(pt_fd, buf, 10, 1, 0, NULL), 10);
  EXPECT_EQ(buf[0], static_cast<char>(100 * 7 + 3));
  EXPECT_EQ(lseek(mt_fd, 0, SEEK_CUR), 100);
  EXPECT_EQ(ppios_pt_close(pt_fd), 0);
  fclose(mt_stream);
  close(mt_fd);
  unlink(file.c_str());
}

// Descriptors that share one open file description (dup) move one offset: the PT gets no
// copy of either (two independent copies would read the wrong ranges), while a second
// descriptor opened on its own is reopened as usual.
TEST(PtSafetyTest, DescriptorsSharingAnOffsetAreNotReopened) {
  std::string file = make_file("dup", 100);
  int mt_fd = open(file.c_str(), O_RDONLY);
  ASSERT_GE(mt_fd, 0);
  int own = open(file.c_str(), O_RDONLY);
  ASSERT_GE(own, 0);
  int pt_fd = ppios_pt_reopen_fd(own);
  EXPECT_GE(pt_fd, 0);
  if (pt_fd >= 0) {
    EXPECT_EQ(ppios_pt_close(pt_fd), 0);
  }
  int twin = dup(mt_fd);
  ASSERT_GE(twin, 0);
  errno = 1234;
  EXPECT_EQ(ppios_pt_reopen_fd(mt_fd), -1);
  EXPECT_EQ(ppios_pt_reopen_fd(twin), -1);
  EXPECT_EQ(errno, 1234);  // the MT's start block leaves errno as it was
  close(twin);
  // Alone again: reopened.
  pt_fd = ppios_pt_reopen_fd(mt_fd);
  EXPECT_GE(pt_fd, 0);
  if (pt_fd >= 0) {
    EXPECT_EQ(ppios_pt_close(pt_fd), 0);
  }
  close(own);
  close(mt_fd);
  unlink(file.c_str());
}

TEST(PtSafetyTest, StreamDescriptorIsClosedOnlyWithItsStream) {
  std::string file = make_file("stream", 100);
  FILE *fp = ppios_pt_fopen(file.c_str(), "r");
  ASSERT_NE(fp, nullptr);
  EXPECT_TRUE(PtResources::get().owns_stream(fp));
  errno = 0;
  EXPECT_EQ(ppios_pt_close(fileno(fp)), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(ppios_prefetch_fread(1, 10, fp, 1, 0, NULL), 10u);
  EXPECT_EQ(ftell(fp), 10);
  EXPECT_EQ(ppios_pt_fclose(fp), 0);
  EXPECT_FALSE(PtResources::get().owns_stream(fp));
  unlink(file.c_str());
}

TEST(PtSafetyTest, WrappersOnThePtTouchOnlyItsOwnDescriptors) {
  std::string file = make_file("wrapped", 100);
  int mt_fd = open(file.c_str(), O_RDONLY);
  ThreadState saved = t_thread;
  t_thread.role = ThreadRole::PT;  // as the PT's slice calls read()
  char buf[10];
  errno = 0;
  EXPECT_EQ(__wrap_read(mt_fd, buf, sizeof buf), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(__wrap_read(STDIN_FILENO, buf, sizeof buf), -1);
  t_thread = saved;
  EXPECT_EQ(lseek(mt_fd, 0, SEEK_CUR), 0);
  close(mt_fd);
  unlink(file.c_str());
}

// The program's setenv may reallocate `environ` while the PT reads it: the PT's getenv
// reads the snapshot taken when it started, never the program's live environment.
extern "C" char *__wrap_getenv(const char *name);
TEST(PtSafetyTest, ThePtReadsTheEnvironmentAsItWasWhenItStarted) {
  ASSERT_EQ(setenv("PPIOS_TEST_INPUT", "before.bin", 1), 0);
  ppios::snapshot_environment();
  for (int i = 0; i < 200; ++i) {  // enough new variables to move environ elsewhere
    std::string name = "PPIOS_TEST_GROW_" + std::to_string(i);
    ASSERT_EQ(setenv(name.c_str(), "x", 1), 0);
  }
  ASSERT_EQ(setenv("PPIOS_TEST_INPUT", "after.bin", 1), 0);
  ThreadState saved = t_thread;
  t_thread.role = ThreadRole::PT;
  const char *seen = __wrap_getenv("PPIOS_TEST_INPUT");
  const char *grown = __wrap_getenv("PPIOS_TEST_GROW_0");
  t_thread = saved;
  ASSERT_NE(seen, nullptr);
  EXPECT_STREQ(seen, "before.bin");
  EXPECT_EQ(grown, nullptr) << "set after the snapshot";
  EXPECT_STREQ(__wrap_getenv("PPIOS_TEST_INPUT"), "after.bin") << "the program's own getenv is live";
}

// Which descriptors the cache may serve: only regular files open for reading, without
// O_DIRECT. A read on any other goes to storage unchanged (docs/guarantees.md).
TEST(PtSafetyTest, OnlyRegularFilesOpenForReadingWithoutODirectAreCached) {
  std::string path = make_file("probe", 8192);
  CachedFile file;
  int plain = open(path.c_str(), O_RDONLY);
  ASSERT_GE(plain, 0);
  EXPECT_TRUE(probe_readable_file(plain, &file)) << "a regular file open for reading";
  close(plain);
  int rw = open(path.c_str(), O_RDWR);
  ASSERT_GE(rw, 0);
  EXPECT_TRUE(probe_readable_file(rw, &file)) << "a regular file open for reading and writing";
  close(rw);
  int wo = open(path.c_str(), O_WRONLY);
  ASSERT_GE(wo, 0);
  EXPECT_FALSE(probe_readable_file(wo, &file)) << "a write-only descriptor";
  close(wo);
  // A tmpfs may refuse O_DIRECT; the working directory (the build tree) takes it.
  std::string direct_path = "ppios-pt-safety-" + std::to_string(getpid()) + "-direct";
  int direct = open(path.c_str(), O_RDONLY | O_DIRECT);
  if (direct < 0 && (direct = open(direct_path.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600)) >= 0)
    unlink(direct_path.c_str());
  ASSERT_GE(direct, 0) << "neither " << path << " nor the working directory takes O_DIRECT";
  EXPECT_FALSE(probe_readable_file(direct, &file)) << "an O_DIRECT descriptor";
  close(direct);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_FALSE(probe_readable_file(fds[0], &file)) << "a pipe";
  close(fds[0]);
  close(fds[1]);
  int dir = open("/", O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  EXPECT_FALSE(probe_readable_file(dir, &file)) << "a directory";
  close(dir);
  unlink(path.c_str());
}

TEST(PtSafetyTest, PassThroughInsideTheRuntimeAndInForkedChildren) {
  EXPECT_FALSE(pass_through());
  {
    RuntimeScope scope;
    EXPECT_TRUE(pass_through());
  }
  EXPECT_FALSE(pass_through());
  pid_t pid = fork();
  if (pid == 0) _exit(pass_through() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

namespace {
volatile sig_atomic_t g_calls, g_in_handler, g_siginfo_ok;
void first_handler(int) {}
void counting_handler(int) {
  ++g_calls;
  g_in_handler = pass_through();
}
void info_handler(int sig, siginfo_t *info, void *) {
  ++g_calls;
  g_siginfo_ok = sig == SIGUSR2 && info != nullptr && info->si_signo == SIGUSR2;
  g_in_handler = pass_through();
}
}  // namespace

TEST(PtSafetyTest, ProgramHandlersRunBehindTheTrampolineAndAreReportedAsTheirOwn) {
  EXPECT_EQ(__wrap_signal(SIGUSR1, first_handler), SIG_DFL);
  EXPECT_EQ(__wrap_signal(SIGUSR1, counting_handler), first_handler);
  struct sigaction real{};
  ASSERT_EQ(sigaction(SIGUSR1, nullptr, &real), 0);
  EXPECT_NE(real.sa_handler, counting_handler);  // the trampoline is installed
  struct sigaction seen{};
  ASSERT_EQ(__wrap_sigaction(SIGUSR1, nullptr, &seen), 0);
  EXPECT_FALSE(seen.sa_flags & SA_SIGINFO);
  EXPECT_EQ(seen.sa_handler, counting_handler);
  g_calls = 0;
  raise(SIGUSR1);
  EXPECT_EQ(g_calls, 1);
  EXPECT_TRUE(g_in_handler);  // calls made in the handler pass through
  EXPECT_FALSE(pass_through());

  struct sigaction act{}, old{};
  act.sa_sigaction = info_handler;
  act.sa_flags = SA_SIGINFO;
  sigemptyset(&act.sa_mask);
  ASSERT_EQ(__wrap_sigaction(SIGUSR2, &act, &old), 0);
  EXPECT_EQ(old.sa_handler, SIG_DFL);
  raise(SIGUSR2);
  EXPECT_TRUE(g_siginfo_ok);
  act.sa_handler = SIG_IGN;
  act.sa_flags = 0;
  ASSERT_EQ(__wrap_sigaction(SIGUSR2, &act, &old), 0);
  EXPECT_TRUE(old.sa_flags & SA_SIGINFO);
  EXPECT_EQ(old.sa_sigaction, info_handler);
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &real), 0);
  EXPECT_EQ(real.sa_handler, SIG_IGN);  // passed through unchanged
  raise(SIGUSR2);  // ignored

  errno = 0;
  EXPECT_EQ(__wrap_sigaction(SIGKILL, &act, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(__wrap_signal(0, first_handler), SIG_ERR);
  EXPECT_EQ(__wrap_signal(SIGKILL, first_handler), SIG_ERR);
  g_calls = 0;
  raise(SIGUSR1);  // the failed calls changed nothing
  EXPECT_EQ(g_calls, 1);
  __wrap_signal(SIGUSR1, SIG_DFL);
}

namespace {
std::atomic<int> g_abort_calls{0};
std::atomic<pid_t> g_abort_tid{0};
std::atomic<bool> g_abort_on_program_thread{false};
void abort_handler(int) {
  g_abort_tid = gettid();
  g_abort_on_program_thread = t_thread.role == ThreadRole::MT;
  ++g_abort_calls;
}
}  // namespace

// The runtime's threads leave SIGABRT unblocked for the PT's own abort(), so a SIGABRT sent
// to the process may reach one of them: it is passed on, and the program's handler runs on
// a thread of the program's, as without ppios. The runtime thread blocks it from then on.
TEST(PtSafetyTest, SigabrtSentToTheProcessRunsOnAProgramThread) {
  SignalTable::get().install_fault_net();
  struct sigaction act{}, old{};
  act.sa_handler = abort_handler;
  sigemptyset(&act.sa_mask);
  ASSERT_EQ(__wrap_sigaction(SIGABRT, &act, &old), 0);
  sigset_t abrt, saved;
  sigemptyset(&abrt);
  sigaddset(&abrt, SIGABRT);
  pthread_sigmask(SIG_BLOCK, &abrt, &saved);  // at first only the runtime thread can take it
  std::atomic<pid_t> helper_tid{0};
  std::atomic<bool> stop{false}, helper_blocks{false};
  std::thread helper([&] {
    t_thread.role = ThreadRole::WT;
    pthread_sigmask(SIG_UNBLOCK, &abrt, nullptr);
    helper_tid = gettid();
    while (!stop) usleep(1000);
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    helper_blocks = sigismember(&now, SIGABRT) == 1;
  });
  while (helper_tid == 0) usleep(1000);
  g_abort_calls = 0;
  ASSERT_EQ(kill(getpid(), SIGABRT), 0);
  usleep(50000);  // the runtime thread took it and queued it again: pending for the process
  EXPECT_EQ(g_abort_calls, 0);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);  // delivered to this thread now
  EXPECT_EQ(g_abort_calls, 1);
  EXPECT_EQ(g_abort_tid, gettid());
  EXPECT_TRUE(g_abort_on_program_thread);
  stop = true;
  helper.join();
  EXPECT_TRUE(helper_blocks);
  ASSERT_EQ(__wrap_sigaction(SIGABRT, &old, nullptr), 0);
}

TEST(PtSafetyTest, IndexIsTheIdentityInBounds) {
  EXPECT_EQ(ppios_pt_index(0, 1), 0);
  EXPECT_EQ(ppios_pt_index(41, 42), 41);
}

// Outside the PT an escape is a misuse of the ABI, never a silent return.
TEST(PtSafetyDeathTest, ExitOutsideThePtAborts) {
  EXPECT_DEATH(ppios_pt_exit(), "outside the prefetch thread");
  EXPECT_DEATH(ppios_pt_index(5, 5), "outside the prefetch thread");
}

namespace {
std::atomic<int> g_pt_fd{-1}, g_pt_stream_fd{-1};
std::atomic<bool> g_pt_after_fault{false};

void faulting_slice(void *ctx) {
  const char *path = static_cast<const char *>(ctx);
  g_pt_fd = ppios_pt_open(path, O_RDONLY);
  FILE *fp = ppios_pt_fopen(path, "r");
  g_pt_stream_fd = fp != nullptr ? fileno(fp) : -1;
  char *table = static_cast<char *>(ppios_pt_malloc(4096));
  table[0] = 1;
  volatile int *null = nullptr;
  *null = 1;
  g_pt_after_fault = true;  // never reached
}
}  // namespace

// One PT per process: its slice faults; the PT escapes without a word on stderr (the fault
// is kept for PPIOS_STATS), releases its descriptors, stream and memory, and the process
// goes on.
TEST(PtSafetyTest, FaultingSliceEscapesAndReleasesEverything) {
  std::string file = make_file("slice", 1000);
  static char path[256];
  std::snprintf(path, sizeof path, "%s", file.c_str());
  testing::internal::CaptureStderr();
  ASSERT_EQ(ppios_pt_start(faulting_slice, path, std::strlen(path) + 1), 0);
  // The PT has ended once pt_running() says so: pt_ended() releases everything first and
  // then clears the flag under the lifecycle lock, so this wait also orders the release
  // before the checks (and before the next test's PT allocates).
  bool ended = false;
  for (int i = 0; i < 5000 && !ended; ++i) {
    usleep(1000);
    ended = !Runtime::get().pt_running();
  }
  std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(ended);
  ASSERT_TRUE(g_pt_fd >= 0 && g_pt_stream_fd >= 0);
  EXPECT_FALSE(PtResources::get().owns_fd(g_pt_fd));
  EXPECT_FALSE(PtResources::get().owns_fd(g_pt_stream_fd));
  EXPECT_EQ(fcntl(g_pt_fd, F_GETFD), -1);
  EXPECT_EQ(fcntl(g_pt_stream_fd, F_GETFD), -1);
  EXPECT_EQ(Runtime::get().cache().counters().external_bytes, 0u);  // the table is freed
  EXPECT_FALSE(g_pt_after_fault);
  EXPECT_EQ(err, "");
  int sig = 0;
  uintptr_t address = 1;
  bool has_address = false;
  ASSERT_TRUE(ppios::pt_fault_seen(&sig, &address, &has_address));
  EXPECT_EQ(sig, SIGSEGV);
  EXPECT_TRUE(has_address);
  EXPECT_EQ(address, 0u);
  unlink(file.c_str());
}

// Generated PT code may free a pointer the PT did not allocate (a copy of the program's
// pointer): the runtime frees only its own blocks and gives their bytes back to the budget.
TEST(PtSafetyTest, PtFreesOnlyItsOwnBlocks) {
  PrefetchCache cache(1 << 20);
  PtResources resources;
  void *own = resources.allocate(4096, cache);
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(cache.counters().external_bytes, 4096u);
  auto *program = static_cast<char *>(std::malloc(64));
  std::strcpy(program, "the program's memory");
  resources.release(program, cache);  // not the PT's: left alone
  EXPECT_STREQ(program, "the program's memory");
  EXPECT_EQ(resources.reallocate(program, 128, cache), nullptr);
  EXPECT_EQ(cache.counters().external_bytes, 4096u);
  resources.release(own, cache);
  EXPECT_EQ(cache.counters().external_bytes, 0u);
  std::free(program);
}

// The header before each PT block (ppios.h, ppios_pt_block_header) lets generated code
// check a store through a block's pointer: inside the block it is the identity, past it or
// below it the PT escapes (outside the PT: the misuse abort).
TEST(PtSafetyTest, BlockIndexChecksAgainstTheBlock) {
  PrefetchCache cache(1 << 20);
  PtResources resources;
  auto *block = static_cast<long *>(resources.allocate(16 * sizeof(long), cache));
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(ppios_pt_block_index(block, 0, sizeof *block), 0);
  EXPECT_EQ(ppios_pt_block_index(block, 15, sizeof *block), 15);
  EXPECT_EQ(ppios_pt_block_index(block, 127, 1), 127);  // the same bytes, other elements
  EXPECT_EQ(ppios_pt_object_index(block, 15, sizeof *block), 15);
  EXPECT_EQ(resources.block_room(block), 16 * sizeof(long));
  EXPECT_EQ(resources.block_room(block + 12), 4 * sizeof(long));
  EXPECT_EQ(resources.block_room(block + 16), 0u);  // one past the end: nothing fits
  long variable[2] = {0, 0};
  EXPECT_EQ(resources.block_room(variable), SIZE_MAX);  // not a block: the transformer's
  EXPECT_EQ(ppios_pt_object_index(variable, 0, sizeof *variable), 0);
  resources.release(block, cache);
}

TEST(PtSafetyDeathTest, BlockIndexOutOfBoundsEscapes) {
  PrefetchCache cache(1 << 20);
  PtResources resources;
  auto *block = static_cast<long *>(resources.allocate(16 * sizeof(long), cache));
  ASSERT_NE(block, nullptr);
  EXPECT_DEATH(ppios_pt_block_index(block, 16, sizeof *block), "outside the prefetch thread");
  EXPECT_DEATH(ppios_pt_block_index(block, -1, sizeof *block), "outside the prefetch thread");
  EXPECT_DEATH(ppios_pt_block_index(block + 1, 0, sizeof *block), "outside the prefetch thread");
  long variable[2] = {0, 0};
  EXPECT_DEATH(ppios_pt_block_index(variable, 0, sizeof *variable), "outside the prefetch thread");
  EXPECT_DEATH(ppios_pt_object_index(variable, 1, sizeof *variable), "outside the prefetch thread");
  resources.release(block, cache);
}

namespace {
std::string g_room_file;
std::atomic<int> g_room_step{0};

// A slice that reads into a 64-byte block of its own: 64 bytes fit, 65 never reach the
// block (the PT escapes "bounds" before the runtime stores a byte), nor does a store
// through a subscript one past it.
void copy_room_slice(void *ctx) {
  const bool subscript = ctx != nullptr;
  auto *block = static_cast<char *>(ppios_pt_malloc(64));
  int fd = ppios_pt_open(g_room_file.c_str(), O_RDONLY);
  if (fd < 0) return;
  if (ppios_prefetch_pread_copy(fd, block, 64, 0, 1, 0, "room.c:1:1") != 64) return;
  g_room_step = 1;
  if (subscript) {
    block[ppios_pt_block_index(block, 63, 1)] = 1;
    g_room_step = 2;
    block[ppios_pt_block_index(block, 64, 1)] = 1;
  } else {
    ppios_prefetch_pread_copy(fd, block + 8, 64, 0, 2, 0, "room.c:2:1");
  }
  g_room_step = 3;  // never reached
}

PtStop run_as_pt(void (*slice)(void *), void *ctx) {
  PtStop why = PtStop::Running;
  std::thread pt([&] {
    t_thread.role = ThreadRole::PT;
    why = run_pt_slice(slice, ctx);
    PtResources::get().release_all(Runtime::get().cache());
  });
  pt.join();
  return why;
}
}  // namespace

TEST(PtSafetyTest, CopyReadsAndStoresPastAPtBlockEscape) {
  g_room_file = make_file("room", 4096);
  g_room_step = 0;
  EXPECT_EQ(run_as_pt(copy_room_slice, nullptr), PtStop::Bounds);
  EXPECT_EQ(g_room_step, 1);
  g_room_step = 0;
  static int subscript = 1;
  EXPECT_EQ(run_as_pt(copy_room_slice, &subscript), PtStop::Bounds);
  EXPECT_EQ(g_room_step, 2);
  EXPECT_EQ(Runtime::get().cache().counters().external_bytes, 0u);
  unlink(g_room_file.c_str());
}

// A wrapper's own release point (close() of a file the program may hold record locks on,
// a collective MPI-IO call) runs inside the runtime, under the wrapper's RuntimeScope: it
// must still tell the node, or another process that takes the lock next serves what it
// cached before this one's changes.
TEST(PtSafetyTest, AReleasePointInsideTheRuntimeStillTellsTheNode) {
  ChangeGenerations &node = ChangeGenerations::node();
  if (!node.available()) GTEST_SKIP() << "no change table on this machine";
  Runtime::get();
  ASSERT_EQ(t_thread.role, ThreadRole::MT);
  Coherence::unknown_writes_begin();  // a write the runtime cannot name is in progress
  const uint64_t before = node.total();
  {
    RuntimeScope inside_a_wrapper;
    release_point(nullptr);
  }
  EXPECT_GT(node.total(), before);
  Coherence::unknown_writes_end();
}
