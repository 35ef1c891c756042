// PPIOS_TRACE keeps bounded memory on long runs: full chunks of events are spilled to an
// unlinked file of the process and read back when the trace is written
// (runtime/src/Trace.h). Every event recorded must be in the trace, from every thread,
// and nothing may be left in the trace's directory but the trace.
#include "Trace.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace ppios {
namespace {

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Threads of this process named `name` (/proc/self/task/*/comm).
int threads_named(const std::string &name) {
  int n = 0;
  if (DIR *d = opendir("/proc/self/task")) {
    while (dirent *e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string line;
      if (std::getline(comm, line) && line == name) ++n;
    }
    closedir(d);
  }
  return n;
}

std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

TEST(Trace, LongRunIsSpilledAndWrittenWhole) {
  char tmpl[] = "/tmp/ppios-trace.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, prefix = dir + "/t";
  // 3 threads x 100,000 events: several chunks of 65,536 spilled while threads record,
  // faster than one writer can write them (the recording threads wait for room then).
  constexpr int kThreads = 3, kPerThread = 100000;
  const int writers_before = threads_named("ppios-trace");
  {
    Trace trace(prefix);
    FileKey key{1, 2};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i)
          trace.event("read", kTraceMT + t, 1000 + i, 2000 + i, &key, i, 512, i, nullptr, -1,
                      nullptr, t == 1 ? "solver.c:212:9" : nullptr);
      });
    for (auto &th : threads) th.join();
    EXPECT_EQ(entries(dir).size(), 0u) << "the spill file must not be visible";
    // The spill is the writer thread's, not the recording threads'.
    EXPECT_EQ(threads_named("ppios-trace"), writers_before + 1);
    std::string error;
    ASSERT_TRUE(trace.write(prefix, 0, 0, "", &error)) << error;
    // write() ended the writer, once the queue was written.
    EXPECT_EQ(threads_named("ppios-trace"), writers_before);
  }
  std::ifstream in(prefix + ".0.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_EQ(count(text, "\"ph\":\"X\""), static_cast<size_t>(kThreads) * kPerThread);
  EXPECT_EQ(count(text, "\"ph\":\"M\""), static_cast<size_t>(kThreads));
  EXPECT_NE(text.find("\"dropped_events\":0,"), std::string::npos);
  EXPECT_EQ(count(text, "\"seq\":99999}"), static_cast<size_t>(kThreads - 1));
  EXPECT_EQ(count(text, "\"seq\":99999,\"src\":\"solver.c:212:9\"}"), 1u);
  EXPECT_EQ(count(text, "\"src\":\"solver.c:212:9\""), static_cast<size_t>(kPerThread));
  EXPECT_EQ(text.substr(text.size() - 4), "\n]}\n");
  std::vector<std::string> left = entries(dir);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0], "t.0.json");
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace ppios
