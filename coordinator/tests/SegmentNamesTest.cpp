// Private segment names keyed with the user's node secret (ppios/NodeSecret.h): a file
// another user planted under the predictable name no longer disables the cap; a secret
// file that is refused (mode, FIFO, symlink) falls back to the predictable name with a
// reason and never blocks; processes of one user agree on the secret and the name.
//
// Every case runs under a throwaway $HOME, and the process's secret (node_secret(), kept
// for the life of a process) is only ever looked up in forked children, each with the
// $HOME of its case.
#include "ShmSlotTable.h"
#include "ppios/NodeSecret.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <signal.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using ppios::NodeSecret;
using ppios::ShmSlotTable;

namespace {

// A throwaway home, removed with what is in it.
struct TempHome {
  std::string path;
  TempHome() {
    char tmpl[] = "/tmp/ppios-secret-test.XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempHome() { (void)!system(("rm -rf '" + path + "'").c_str()); }
  std::string secret() const { return path + "/.ppios/node-secret"; }
};

std::string unique_target(const char *what) { return "segnames-" + std::to_string(getpid()) + "-" + what; }

// Runs `body` in a forked child (with $HOME set to `home`, or unset when null) and returns
// what it wrote to the pipe, "" if it did not exit 0. Bounded: a child that blocks is
// killed after 10 s (and the case fails).
std::string in_child(const char *home, const std::function<std::string()> &body) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    alarm(10);
    if (home) setenv("HOME", home, 1);
    else unsetenv("HOME");
    std::string out = body();
    if (write(pipefd[1], out.data(), out.size()) != static_cast<ssize_t>(out.size())) _exit(3);
    _exit(0);
  }
  close(pipefd[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  return out;
}

std::string key_text(const NodeSecret &s) { return std::to_string(s.k0) + ":" + std::to_string(s.k1); }

}  // namespace

TEST(SipHash, MatchesThePublishedVectors) {
  // Key 00..0f; the reference implementation's vectors for the empty message and for
  // 00..0e (the paper's worked example).
  const uint64_t k0 = 0x0706050403020100ULL, k1 = 0x0f0e0d0c0b0a0908ULL;
  unsigned char msg[64];
  for (int i = 0; i < 64; ++i) msg[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(ppios::siphash24(k0, k1, msg, 0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(ppios::siphash24(k0, k1, msg, 15), 0xa129ca6149be45e5ULL);
  EXPECT_EQ(ppios::siphash24(k0, k1, msg, 8), 0x93f5f5799a932462ULL);
  EXPECT_EQ(ppios::siphash24(k0, k1, msg, 63), 0x958a324ceb064572ULL);
}

TEST(NodeSecret, IsMadeOncePrivateAndReadAgain) {
  TempHome home;
  NodeSecret first = ppios::load_node_secret(home.path.c_str());
  ASSERT_TRUE(first.usable) << first.why;
  EXPECT_EQ(first.path, home.secret());
  struct stat st;
  ASSERT_EQ(lstat(home.secret().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(lstat((home.path + "/.ppios").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  NodeSecret again = ppios::load_node_secret((home.path + "/").c_str());
  ASSERT_TRUE(again.usable) << again.why;
  EXPECT_EQ(key_text(again), key_text(first));
  TempHome other;
  NodeSecret elsewhere = ppios::load_node_secret(other.path.c_str());
  ASSERT_TRUE(elsewhere.usable);
  EXPECT_NE(key_text(elsewhere), key_text(first)) << "two homes, one key: not random";
}

TEST(NodeSecret, ProcessesCreatingItAtOnceEndWithOne) {
  TempHome home;
  constexpr int kProcs = 8;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<int> outs;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcs; ++i) {
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      close(out[0]);
      alarm(10);
      char c;
      if (read(go[0], &c, 1) != 0) _exit(2);  // all start when the pipe closes
      NodeSecret s = ppios::load_node_secret(home.path.c_str());
      std::string text = s.usable ? key_text(s) : "refused: " + s.why;
      _exit(write(out[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : 3);
    }
    close(out[1]);
    outs.push_back(out[0]);
    pids.push_back(pid);
  }
  close(go[0]);
  close(go[1]);
  std::vector<std::string> keys;
  for (int i = 0; i < kProcs; ++i) {
    std::string text;
    char buf[256];
    ssize_t n;
    while ((n = read(outs[i], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    close(outs[i]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    keys.push_back(text);
  }
  for (const auto &k : keys) EXPECT_EQ(k, keys[0]);
  EXPECT_EQ(keys[0].rfind("refused", 0), std::string::npos) << keys[0];
  // No temporary file of a creator is left behind.
  DIR *d = opendir((home.path + "/.ppios").c_str());
  ASSERT_NE(d, nullptr);
  int entries = 0;
  while (dirent *e = readdir(d)) entries += e->d_name[0] != '.';
  closedir(d);
  EXPECT_EQ(entries, 1);
}

TEST(NodeSecret, ARefusedSecretFallsBackWithAReason) {
  struct Case {
    const char *name;
    std::function<void(const TempHome &)> plant;
    const char *reason;
  };
  const std::vector<Case> cases = {
      {"others may read it",
       [](const TempHome &h) {
         ASSERT_TRUE(ppios::load_node_secret(h.path.c_str()).usable);
         ASSERT_EQ(chmod(h.secret().c_str(), 0644), 0);
       },
       "is accessible to other users (mode 644)"},
      {"a FIFO", [](const TempHome &h) { ASSERT_EQ(mkfifo(h.secret().c_str(), 0600), 0); }, "is not a regular file"},
      {"a symlink",
       [](const TempHome &h) {
         const std::string real = h.path + "/real";
         ASSERT_TRUE(ppios::load_node_secret(h.path.c_str()).usable);
         ASSERT_EQ(rename(h.secret().c_str(), real.c_str()), 0);
         ASSERT_EQ(symlink(real.c_str(), h.secret().c_str()), 0);
       },
       "is a symbolic link"},
      {"not a secret",
       [](const TempHome &h) {
         int fd = open(h.secret().c_str(), O_CREAT | O_WRONLY | O_EXCL, 0600);
         ASSERT_GE(fd, 0);
         ASSERT_EQ(write(fd, "hello\n", 6), 6);
         close(fd);
       },
       "is not 32 hexadecimal digits"},
      {"a directory others may write",
       [](const TempHome &h) { ASSERT_EQ(chmod((h.path + "/.ppios").c_str(), 0777), 0); },
       "may be written by other users"},
  };
  const std::string target = unique_target("refused");
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    TempHome home;
    ASSERT_EQ(mkdir((home.path + "/.ppios").c_str(), 0700), 0);
    c.plant(home);
    // In a child with a deadline: a FIFO must be refused, not waited on.
    const std::string out = in_child(home.path.c_str(), [&] {
      const NodeSecret &s = ppios::node_secret();
      return std::string(s.usable ? "usable" : "refused") + "|" + s.why + "|" + ShmSlotTable::segment_name(target, -1);
    });
    ASSERT_FALSE(out.empty()) << "the child blocked or failed";
    EXPECT_EQ(out.rfind("refused|", 0), 0u) << out;
    EXPECT_NE(out.find(c.reason), std::string::npos) << out;
    EXPECT_EQ(out.substr(out.rfind('|') + 1), ShmSlotTable::predictable_name(target, -1))
        << "refused: the predictable name";
  }
  const std::string unset = in_child(nullptr, [] { return ppios::node_secret().why; });
  EXPECT_EQ(unset, "$HOME is unset");
  const std::string relative = in_child("relative/home", [] { return ppios::node_secret().why; });
  EXPECT_NE(relative.find("not an absolute path"), std::string::npos) << relative;
}

TEST(SegmentNames, TwoProcessesOfTheUserAgreeAndGroupsKeepTheirNames) {
  TempHome home;
  const std::string target = unique_target("agree");
  auto name = [&] { return ShmSlotTable::segment_name(target, -1) + " " + ShmSlotTable::segment_name(target, 7); };
  const std::string a = in_child(home.path.c_str(), name), b = in_child(home.path.c_str(), name);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  const std::string predictable = ShmSlotTable::predictable_name(target, -1);
  EXPECT_EQ(a.rfind(predictable + ".", 0), 0u) << a << ": the version, uid and target stay readable";
  EXPECT_EQ(a.substr(a.find(' ') + 1), "/ppios-coord-v7.g7." + target) << "a group's name is every member's";
  TempHome other;
  EXPECT_NE(in_child(other.path.c_str(), name), a) << "another secret, another name";
}

// The finding: a file planted under the predictable name (here one others may write, and
// owned by uid nobody where we may give it away) made the segment unusable: no cap.
TEST(SegmentNames, AFilePlantedUnderThePredictableNameDoesNotDisableTheCap) {
  TempHome home;
  const std::string target = unique_target("planted");
  const std::string planted = "/dev/shm" + ShmSlotTable::predictable_name(target, -1);
  int fd = open(planted.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  fchmod(fd, 0644);
  const bool given_away = geteuid() == 0 && fchown(fd, 65534, 65534) == 0;
  close(fd);
  struct Cleanup {
    std::string path;
    ~Cleanup() { unlink(path.c_str()); }
  } cleanup{planted};

  const std::string out = in_child(home.path.c_str(), [&] {
    std::string error, note;
    auto table = ShmSlotTable::open(target, -1, true, 1000, &error);
    if (!table) return "unusable: " + error;
    table->set_threshold(3);
    ppios::CoordinatorStatus s;
    std::string err;
    const bool ok = table->snapshot(&s, &err) && s.threshold == 3;
    table.reset();
    const bool removed = ShmSlotTable::remove(target, -1, true, &error, &note);
    return std::string(ok ? "capped" : "no-cap") + "|" + (removed ? "removed" : "kept: " + error) + "|" + note;
  });
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.rfind("capped|removed|", 0), 0u) << out;
  // reset says what is at the predictable name, in one line, and leaves it.
  EXPECT_NE(out.find("kept " + planted + " (the predictable name"), std::string::npos) << out;
  EXPECT_NE(out.find("costs them nothing"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), std::string::npos) << out;
  struct stat st;
  ASSERT_EQ(lstat(planted.c_str(), &st), 0) << "reset removed a file it was told of";
  if (given_away) {
    EXPECT_EQ(st.st_uid, 65534u);
  }

  // Without a secret the predictable name is the one: unusable, and the reason says why
  // the name could be taken.
  const std::string fallback = in_child(nullptr, [&] {
    std::string error;
    auto table = ShmSlotTable::open(target, -1, true, 1000, &error);
    return table ? std::string("usable") : error;
  });
  EXPECT_NE(fallback.find("its name is predictable"), std::string::npos) << fallback;
  EXPECT_NE(fallback.find("$HOME is unset"), std::string::npos) << fallback;
}
