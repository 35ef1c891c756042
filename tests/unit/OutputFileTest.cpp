// PPIOS_STATS / PPIOS_TRACE files: a symlink, a FIFO or another user's file planted at the
// path, or another user's symlink in place of one of its directories, is never written
// through and never makes the writer wait (ppios/OutputFile.h, through runtime/src/OutputFile.h).
#include "OutputFile.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace ppios {
namespace {

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ppios-outfile.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf " + dir_).c_str()), 0); }
  static std::string read(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string dir_;
};

TEST_F(OutputFile, CreatesAppendsAndTruncates) {
  std::string path = dir_ + "/stats.json", error;
  for (const char *line : {"a\n", "b\n"}) {
    int fd = open_output_file(path, false, &error);
    ASSERT_GE(fd, 0) << error;
    ASSERT_EQ(write(fd, line, 2), 2);
    close(fd);
  }
  EXPECT_EQ(read(path), "a\nb\n");
  int fd = open_output_file(path, true, &error);
  ASSERT_GE(fd, 0) << error;
  ASSERT_EQ(write(fd, "c\n", 2), 2);
  close(fd);
  EXPECT_EQ(read(path), "c\n");
}

TEST_F(OutputFile, RefusesASymlinkAtThePath) {
  std::string victim = dir_ + "/victim", link = dir_ + "/stats.json", error;
  std::ofstream(victim) << "precious";
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  for (bool truncate : {false, true}) {
    EXPECT_EQ(open_output_file(link, truncate, &error), -1);
    EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
  }
  EXPECT_EQ(read(victim), "precious");
}

TEST_F(OutputFile, RefusesAnotherUsersFileInAWorldWritableDirectory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  std::string path = dir_ + "/trace.0.json", error;
  std::ofstream(path) << "theirs";
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  EXPECT_EQ(open_output_file(path, true, &error), -1);
  EXPECT_NE(error.find("another user"), std::string::npos) << error;
  EXPECT_EQ(read(path), "theirs");
  // In a directory only its owner may write to, an existing file is simply used.
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  int fd = open_output_file(path, true, &error);
  EXPECT_GE(fd, 0) << error;
  close(fd);
}

// What open_output_file does with `path`, in a child: 0 opened, 1 refused (the message
// on the pipe), 2 still blocked after 5 s (then killed).
int open_in_child(const std::string &path, bool truncate, std::string *message) {
  int out[2];
  if (pipe(out) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(out[0]);
    std::string error;
    int fd = open_output_file(path, truncate, &error);
    if (fd < 0 && write(out[1], error.data(), error.size()) < 0) _exit(3);
    _exit(fd >= 0 ? 0 : 1);
  }
  close(out[1]);
  int status = 0, result = 2;
  for (int i = 0; i < 500; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      result = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (result == 2) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  char buf[512];
  ssize_t n = read(out[0], buf, sizeof buf);
  if (n > 0) message->assign(buf, static_cast<size_t>(n));
  close(out[0]);
  return result;
}

TEST_F(OutputFile, AFifoAtThePathIsRefusedWithoutWaiting) {
  std::string fifo = dir_ + "/stats.json", error;
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  for (bool truncate : {false, true}) {
    EXPECT_EQ(open_in_child(fifo, truncate, &error), 1) << "2: blocked on the FIFO; " << error;
    EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  }
  // With a reader at the other end an open for writing would succeed: still refused, and
  // the reader gets nothing.
  int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(open_output_file(fifo, false, &error), -1);
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  char c;
  EXPECT_LE(::read(reader, &c, 1), 0);
  close(reader);
}

TEST_F(OutputFile, FollowsOwnSymlinkedDirectoriesOnly) {
  std::string real = dir_ + "/real", error;
  ASSERT_EQ(mkdir(real.c_str(), 0755), 0);
  ASSERT_EQ(symlink("real", (dir_ + "/mine").c_str()), 0);
  int fd = open_output_file(dir_ + "/mine/../mine/stats.json", false, &error);
  ASSERT_GE(fd, 0) << error;
  ASSERT_EQ(write(fd, "x\n", 2), 2);
  close(fd);
  EXPECT_EQ(read(real + "/stats.json"), "x\n");
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a symlink to another user";
  // Another user's symlink in place of a directory (a shared /tmp with
  // fs.protected_symlinks=0): a victim's private file must not be appended to.
  std::string secret = dir_ + "/secret";
  ASSERT_EQ(mkdir(secret.c_str(), 0700), 0);
  std::ofstream(secret + "/stats.json") << "precious";
  std::string planted = dir_ + "/jobdir";
  ASSERT_EQ(symlink(secret.c_str(), planted.c_str()), 0);
  ASSERT_EQ(lchown(planted.c_str(), 65534, 65534), 0);
  for (bool truncate : {false, true}) {
    EXPECT_EQ(open_output_file(planted + "/stats.json", truncate, &error), -1);
    EXPECT_NE(error.find("symbolic link of another user"), std::string::npos) << error;
  }
  EXPECT_EQ(read(secret + "/stats.json"), "precious");
  // ... also as a link further up, and through a relative path.
  ASSERT_EQ(mkdir((real + "/sub").c_str(), 0755), 0);
  ASSERT_EQ(symlink("../jobdir", (real + "/up").c_str()), 0);
  EXPECT_EQ(open_output_file(real + "/up/stats.json", false, &error), -1);
  EXPECT_EQ(read(secret + "/stats.json"), "precious");
}

TEST_F(OutputFile, RefusesAHardLinkInAWorldWritableDirectory) {
  std::string mine = dir_ + "/mine.txt", shared = dir_ + "/shared", error;
  std::ofstream(mine) << "precious";
  ASSERT_EQ(mkdir(shared.c_str(), 01777), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  ASSERT_EQ(link(mine.c_str(), (shared + "/stats.json").c_str()), 0);
  EXPECT_EQ(open_output_file(shared + "/stats.json", true, &error), -1);
  EXPECT_NE(error.find("hard links"), std::string::npos) << error;
  EXPECT_EQ(read(mine), "precious");
}

}  // namespace
}  // namespace ppios
