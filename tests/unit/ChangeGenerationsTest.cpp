// The node's change generations (docs/design/coherence.md, rule 2): a table two processes
// map sees each other's bumps, and a segment someone else could write is refused.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "ChangeGenerations.h"

using ppios::ChangeGenerations;
using ppios::FileKey;

namespace {

std::string scratch_path(const char *name) {
  return "/dev/shm/ppios-test-" + std::to_string(getpid()) + "-" + name;
}

struct Unlink {
  std::string path;
  ~Unlink() { unlink(path.c_str()); }
};

}  // namespace

TEST(ChangeGenerations, ABumpInAnotherProcessIsSeenHere) {
  const std::string path = scratch_path("shared");
  Unlink cleanup{path};
  std::string why;
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::open_segment(path, &why));
  ASSERT_TRUE(table->available()) << why;
  const FileKey file{8, 12345};
  const uint64_t before = table->current(file);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<ChangeGenerations> other(ChangeGenerations::open_segment(path, nullptr));
    if (!other->available()) _exit(1);
    other->bump(file);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(table->current(file), before + 1);
}

TEST(ChangeGenerations, OtherFilesMostlyKeepTheirCounters) {
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  table->bump(FileKey{8, 1});
  int moved = 0;
  for (ino_t ino = 2; ino < 1002; ++ino) moved += table->current(FileKey{8, ino}) != 0;
  // A collision only drops more; a table where most files share a counter would drop
  // every cached file at every change of any.
  EXPECT_LE(moved, 2);
}

TEST(ChangeGenerations, ASegmentOthersCanWriteIsRefused) {
  const std::string path = scratch_path("open");
  Unlink cleanup{path};
  std::string why;
  std::unique_ptr<ChangeGenerations> first(ChangeGenerations::open_segment(path, &why));
  ASSERT_TRUE(first->available()) << why;
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  std::unique_ptr<ChangeGenerations> second(ChangeGenerations::open_segment(path, &why));
  EXPECT_FALSE(second->available());
  EXPECT_NE(why.find("accessible to other users"), std::string::npos) << why;
}

TEST(ChangeGenerations, ASymlinkPlantedUnderTheNameIsNotFollowed) {
  const std::string path = scratch_path("link");
  const std::string target = scratch_path("target");
  Unlink cleanup{path}, cleanup_target{target};
  int fd = open(target.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_EQ(symlink(target.c_str(), path.c_str()), 0);
  std::string why;
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::open_segment(path, &why));
  EXPECT_FALSE(table->available());
  struct stat st;
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0) << "the symlink's target was written";
}

TEST(ChangeGenerations, WithoutATableNothingIsAvailable) {
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_unavailable());
  EXPECT_FALSE(table->available());
  table->bump(FileKey{1, 1});
  EXPECT_EQ(table->current(FileKey{1, 1}), 0u);
}

// ---- Coherence over a cache and a table

#include <cstring>
#include <vector>

#include "Coherence.h"
#include "PrefetchCache.h"

using ppios::CacheEntry;
using ppios::Coherence;
using ppios::FileStamp;
using ppios::InFlightPolicy;
using ppios::PrefetchCache;
using ppios::ReserveResult;

namespace {

const FileStamp kStamp{4096, 1, 1};

bool fetch(PrefetchCache &cache, const FileKey &file, off_t offset, size_t length, uint64_t seq) {
  CacheEntry *e = nullptr;
  if (cache.reserve(file, kStamp, offset, length, seq, &e) != ReserveResult::Reserved) return false;
  size_t remaining = 0;
  char *to = cache.fill_pointer(e, &remaining);
  std::memset(to, 'x', remaining);
  cache.filled(e, remaining);
  cache.finish(e, true);
  return true;
}

size_t served(PrefetchCache &cache, const FileKey &file, off_t offset, size_t length) {
  std::vector<char> buf(length);
  return cache.serve(file, kStamp, offset, length, buf.data(), InFlightPolicy::Wait).bytes;
}

}  // namespace

TEST(Coherence, AnotherProcessesCompletedChangeIsNeverServed) {
  PrefetchCache cache(1 << 20);
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  Coherence coherence(cache, *table, true);
  const FileKey input{8, 100}, shared{8, 200};
  ASSERT_TRUE(fetch(cache, input, 0, 512, 1));
  ASSERT_TRUE(fetch(cache, shared, 0, 512, 2));
  EXPECT_EQ(served(cache, shared, 0, 256), 256u);
  table->bump(shared);  // another process's change completed
  EXPECT_EQ(served(cache, shared, 256, 256), 0u) << "served only while the generation is the fetch's";
  EXPECT_EQ(served(cache, input, 0, 512), 512u) << "a file nobody changed keeps its bytes";
  ASSERT_TRUE(fetch(cache, shared, 0, 512, 3));
  EXPECT_EQ(served(cache, shared, 0, 512), 512u) << "fetched after the change";
}

TEST(Coherence, AnOwnChangeBumpsForOthersAndDropsHere) {
  PrefetchCache cache(1 << 20);
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  Coherence coherence(cache, *table, true);
  const FileKey file{8, 300};
  ASSERT_TRUE(fetch(cache, file, 0, 512, 1));
  const uint64_t before = table->current(file);
  coherence.begin_change(file);
  EXPECT_FALSE(fetch(cache, file, 1024, 512, 2)) << "nothing is reserved during the change";
  coherence.end_change(file);
  EXPECT_EQ(table->current(file), before + 1);
  EXPECT_EQ(served(cache, file, 0, 512), 0u);
}

TEST(Coherence, AFileHeldByAnyProcessIsNeitherServedNorFetched) {
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  PrefetchCache writer_cache(1 << 20), reader_cache(1 << 20);
  Coherence writer(writer_cache, *table, true), reader(reader_cache, *table, true);
  const FileKey file{8, 400};
  ASSERT_TRUE(fetch(reader_cache, file, 0, 512, 1));
  writer.hold(file);  // a shared writable mapping: stores change it unseen from now on
  EXPECT_EQ(served(reader_cache, file, 0, 512), 0u);
  EXPECT_FALSE(fetch(reader_cache, file, 0, 512, 2)) << "nothing of a held file is fetched";
  writer.hold(file);
  writer.unhold(file);
  EXPECT_FALSE(fetch(reader_cache, file, 0, 512, 3)) << "still held once";
  writer.unhold(file);
  ASSERT_TRUE(fetch(reader_cache, file, 0, 512, 4));
  EXPECT_EQ(served(reader_cache, file, 0, 512), 512u) << "fetched after the last store";
}

TEST(ChangeGenerations, TheHoldsOfAProcessThatDiedAreGivenBack) {
  const std::string path = scratch_path("holds");
  Unlink cleanup{path};
  std::string why;
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::open_segment(path, &why));
  ASSERT_TRUE(table->available()) << why;
  const FileKey file{8, 4343}, other{8, 4344};
  const uint64_t before = table->current(file);
  table->hold(other);  // a live holder's hold is kept
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<ChangeGenerations> mine(ChangeGenerations::open_segment(path, nullptr));
    mine->hold(file);
    _exit(mine->current(file) == ChangeGenerations::kHeld ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(table->current(file), ChangeGenerations::kHeld) << "a hold outlives its process";
  table->reclaim_dead_holders();
  const uint64_t after = table->current(file);
  EXPECT_NE(after, ChangeGenerations::kHeld);
  EXPECT_NE(after, before) << "what the dead holder stored is in: the file moved";
  EXPECT_EQ(table->current(other), ChangeGenerations::kHeld);
  table->unhold(other);
  EXPECT_NE(table->current(other), ChangeGenerations::kHeld);
}

TEST(Coherence, WithoutAnExactTableEveryAcquirePointDropsEverything) {
  PrefetchCache cache(1 << 20);
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  Coherence several_nodes(cache, *table, false);
  const FileKey file{8, 500};
  ASSERT_TRUE(fetch(cache, file, 0, 512, 1));
  several_nodes.acquire_point();
  EXPECT_EQ(served(cache, file, 0, 512), 0u);
}

TEST(Coherence, EverythingBumpedElsewhereIsNeverServed) {
  PrefetchCache cache(1 << 20);
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  Coherence coherence(cache, *table, true);
  const FileKey file{8, 600};
  ASSERT_TRUE(fetch(cache, file, 0, 512, 1));
  table->bump_everything();  // another process's child changed files nobody can name
  EXPECT_EQ(served(cache, file, 0, 256), 0u);
  ASSERT_TRUE(fetch(cache, file, 0, 512, 2));
  coherence.acquire_point();
  EXPECT_EQ(served(cache, file, 0, 512), 512u) << "fetched after the news: kept";
}

TEST(Coherence, WhileAChildMayRunEverySynchronizationDropsEverything) {
  PrefetchCache cache(1 << 20);
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  Coherence coherence(cache, *table, true);
  const FileKey file{8, 700};
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    _exit(read(go[0], &c, 1) == 1 ? 0 : 1);
  }
  Coherence::note_child();  // pthread_atfork's parent handler, in the runtime
  ASSERT_TRUE(fetch(cache, file, 0, 512, 1));
  coherence.acquire_point();
  EXPECT_EQ(served(cache, file, 0, 512), 0u);
  const uint64_t everything = table->everything();
  coherence.release_point();
  EXPECT_EQ(table->everything(), everything + 1) << "the other processes are told";
  ASSERT_TRUE(fetch(cache, file, 0, 512, 2));
  coherence.acquire_point();
  EXPECT_EQ(served(cache, file, 0, 512), 0u) << "the child still runs";
  ASSERT_EQ(write(go[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(go[0]);
  close(go[1]);
  coherence.release_point();  // no child left: told once more, then settled
  EXPECT_EQ(table->everything(), everything + 2);
  coherence.acquire_point();  // its own news, as any process's
  ASSERT_TRUE(fetch(cache, file, 0, 512, 3));
  coherence.acquire_point();
  EXPECT_EQ(served(cache, file, 0, 512), 512u) << "no child left";
  coherence.release_point();
  EXPECT_EQ(table->everything(), everything + 2) << "settled: no more news";
}

TEST(ChangeGenerations, ASegmentRemovedOrReplacedIsNoticed) {
  const std::string path = scratch_path("replaced");
  Unlink cleanup{path};
  std::string why;
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::open_segment(path, &why));
  ASSERT_TRUE(table->available()) << why;
  EXPECT_FALSE(table->replaced());
  ASSERT_EQ(unlink(path.c_str()), 0);  // a tmp cleaner, logind's RemoveIPC
  EXPECT_TRUE(table->replaced());
  std::unique_ptr<ChangeGenerations> successor(ChangeGenerations::open_segment(path, &why));
  ASSERT_TRUE(successor->available()) << why;
  EXPECT_TRUE(table->replaced()) << "a new segment under the name is another table";
  EXPECT_FALSE(successor->replaced());
}

TEST(Coherence, ATableReplacedUnderTheJobDropsEverythingFromThenOn) {
  const std::string path = scratch_path("replaced-job");
  Unlink cleanup{path};
  std::string why;
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::open_segment(path, &why));
  ASSERT_TRUE(table->available()) << why;
  PrefetchCache cache(1 << 20);
  Coherence coherence(cache, *table, true);
  const FileKey file{8, 900};
  ASSERT_TRUE(fetch(cache, file, 0, 512, 1));
  coherence.acquire_point();
  EXPECT_EQ(served(cache, file, 0, 512), 512u) << "nothing changed";
  ASSERT_EQ(unlink(path.c_str()), 0);
  std::unique_ptr<ChangeGenerations> successor(ChangeGenerations::open_segment(path, &why));
  ASSERT_TRUE(successor->available()) << why;
  usleep(2000);  // the segment is looked at once a millisecond at most
  ASSERT_TRUE(fetch(cache, file, 512, 512, 2));
  coherence.acquire_point();
  EXPECT_EQ(served(cache, file, 512, 512), 0u) << "a change bumped in the new table is unseen";
  EXPECT_NE(coherence.mode().find("removed or replaced"), std::string::npos) << coherence.mode();
  EXPECT_GE(successor->everything(), 1u) << "the new table's processes are told";
  const uint64_t everything = successor->everything();
  coherence.release_point();
  EXPECT_EQ(successor->everything(), everything + 1) << "and at every release point";
}

TEST(Coherence, AChangeOfAnUnknownFileChangesEveryFile) {
  PrefetchCache cache(1 << 20);
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  Coherence coherence(cache, *table, true);
  const FileKey file{8, 950};
  ASSERT_TRUE(fetch(cache, file, 0, 512, 1));
  const uint64_t everything = table->everything();
  coherence.changed_unknown();
  EXPECT_EQ(served(cache, file, 0, 512), 0u);
  EXPECT_EQ(table->everything(), everything + 1) << "the other processes are told";
  // Nonblocking writes of an unknown file: every synchronization is such a change.
  Coherence::unknown_writes_begin();
  ASSERT_TRUE(fetch(cache, file, 0, 512, 2));
  coherence.acquire_point();
  EXPECT_EQ(served(cache, file, 0, 512), 0u);
  EXPECT_EQ(table->everything(), everything + 2);
  coherence.release_point();
  EXPECT_EQ(table->everything(), everything + 3);
  Coherence::unknown_writes_end();
  ASSERT_TRUE(fetch(cache, file, 0, 512, 3));
  coherence.acquire_point();
  EXPECT_EQ(served(cache, file, 0, 512), 512u) << "closed: nothing is in flight any more";
}

TEST(ChangeGenerations, OneFileUnderTwoDevicesSharesItsCounter) {
  // An overlay shows a file of its upper layer with the overlay's device and the layer's
  // inode; across file systems (xino) the layer's index goes into the top bits.
  std::unique_ptr<ChangeGenerations> table(ChangeGenerations::make_private());
  const FileKey layer{65024, 5521420}, merged{42, 5521420};
  const FileKey merged_xino{42, static_cast<ino_t>(5521420 | (uint64_t{1} << 62))};
  const uint64_t before = table->current(merged);
  table->bump(layer);
  EXPECT_NE(table->current(merged), before);
  table->hold(layer);
  EXPECT_EQ(table->current(merged), ChangeGenerations::kHeld);
  EXPECT_EQ(table->current(merged_xino), ChangeGenerations::kHeld);
  table->unhold(layer);
  EXPECT_NE(table->current(merged), ChangeGenerations::kHeld);
}
