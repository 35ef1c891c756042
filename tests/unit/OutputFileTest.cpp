// PPIOS_STATS / PPIOS_TRACE files: a symlink or another user's file planted at the path is
// never written through (runtime/src/OutputFile.h).
#include "OutputFile.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace
}  // namespace ppios
