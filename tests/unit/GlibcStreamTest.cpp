// seek_stream (runtime/src/GlibcStream.h): a stream moved by it reads, tells and reports
// end of file exactly as one moved by fseeko, but glibc reads nothing ahead for the move.
#include "GlibcStream.h"
#include "ScanFormat.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace ppios {
namespace {

class GlibcStream : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ppios-glibcstream.XXXXXX";
    int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    path_ = tmpl;
    content_.resize(5 * 4096 + 123);  // a tail shorter than a block, so EOF is inside one
    for (size_t i = 0; i < content_.size(); ++i) content_[i] = static_cast<char>(i * 7 + i / 251);
    ASSERT_EQ(write(fd, content_.data(), content_.size()), static_cast<ssize_t>(content_.size()));
    close(fd);
  }
  void TearDown() override { unlink(path_.c_str()); }
  std::string path_;
  std::string content_;
};

// The file offset glibc left the descriptor at: where its last read from the file ended.
off_t kernel_offset(FILE *f) { return lseek(fileno(f), 0, SEEK_CUR); }

// One call on a mirrored stream as StdioIo.cpp's mt_line_read makes it: when a refill is
// due, the next block from `source` as the file is now (what the cache serves), then the
// call, then the give-back, told by looked_at_next() whether the call looked at the
// block's first byte.
struct MirroredCall {
  bool filled = false;      // a block was filled
  bool given_back = false;  // and given back
};
// The file changes (`bytes` written at `at`), then both streams seek to `to` inside
// their buffers and read a line: glibc's returns `old` from its buffer, and the mirrored
// one must too. Then both are closed.
void expect_buffered_line(FILE *ours, FILE *theirs, int writer, const char *bytes, off_t at, off_t to,
                          const char *old) {
  const size_t n = strlen(bytes);
  ASSERT_EQ(pwrite(writer, bytes, n, at), static_cast<ssize_t>(n));
  ASSERT_EQ(fseeko(ours, to, SEEK_SET), 0);
  ASSERT_EQ(fseeko(theirs, to, SEEK_SET), 0);
  char x[64], y[64];
  ASSERT_NE(fgets(x, sizeof x, ours), nullptr);
  ASSERT_NE(fgets(y, sizeof y, theirs), nullptr);
  EXPECT_STREQ(y, old);
  EXPECT_STREQ(x, y);
  auto buffer = take_line_buffer(ours);
  fclose(ours);
  fclose(theirs);
}

template <typename Call, typename Looked>
MirroredCall mirrored_call(FILE *ours, int source, bool refill_due, Call call, Looked looked_at_next) {
  MirroredCall result;
  StreamLock lock(ours);
  const StreamBlock next = refill_due ? next_block(ours) : StreamBlock{};
  size_t got = 0;
  if (next.size > 0) {
    const ssize_t n = pread(source, next.to, next.size, next.at);
    got = n > 0 ? static_cast<size_t>(n) : 0;
    block_filled(ours, next, got);
    result.filled = got > 0;
  }
  call();
  if (got > 0) {
    const size_t before = stream_unread(ours);
    give_back_block(ours, next, got, looked_at_next());
    result.given_back = stream_unread(ours) != before;
  }
  return result;
}

TEST_F(GlibcStream, MovesWithoutReadingAhead) {
  // The PT's streams are fdopen'd descriptors; the MT's, the program's fopen'd ones.
  for (bool fdopened : {false, true}) {
    SCOPED_TRACE(fdopened ? "fdopen" : "fopen");
    FILE *f = fdopened ? fdopen(open(path_.c_str(), O_RDONLY), "r") : fopen(path_.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[16];
    ASSERT_EQ(fread(buf, 1, 10, f), 10u);  // the buffer now holds the first block
    // Outside the buffer, not block-aligned: glibc's fseeko would read the block around it.
    ASSERT_EQ(seek_stream(f, 3 * 4096 + 100, SEEK_SET), 0);
    EXPECT_EQ(kernel_offset(f), 3 * 4096 + 100);
    EXPECT_EQ(ftello(f), 3 * 4096 + 100);
    ASSERT_EQ(seek_stream(f, 40, SEEK_CUR), 0);
    EXPECT_EQ(kernel_offset(f), 3 * 4096 + 140);
    ASSERT_EQ(fread(buf, 1, 16, f), 16u);
    EXPECT_EQ(std::string(buf, 16), content_.substr(3 * 4096 + 140, 16));
    // Inside the buffer it is glibc's own move (no read either).
    const off_t filled = kernel_offset(f);
    ASSERT_EQ(seek_stream(f, 3 * 4096 + 150, SEEK_SET), 0);
    EXPECT_EQ(kernel_offset(f), filled);
    ASSERT_EQ(fread(buf, 1, 4, f), 4u);
    EXPECT_EQ(std::string(buf, 4), content_.substr(3 * 4096 + 150, 4));
    // What glibc would do, for contrast: the same move through fseeko reads ahead.
    ASSERT_EQ(fseeko(f, 100, SEEK_SET), 0);
    EXPECT_NE(kernel_offset(f), 100);
    fclose(f);
  }
}

TEST_F(GlibcStream, ErrorsAndEndOfFileAsFseeko) {
  FILE *f = fopen(path_.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  errno = 0;
  EXPECT_EQ(seek_stream(f, -5, SEEK_SET), -1);
  EXPECT_EQ(errno, EINVAL);
  char buf[64];
  ASSERT_EQ(seek_stream(f, static_cast<off_t>(content_.size()) - 10, SEEK_SET), 0);
  EXPECT_EQ(fread(buf, 1, sizeof buf, f), 10u);
  EXPECT_TRUE(feof(f));
  ASSERT_EQ(seek_stream(f, 4096 + 1, SEEK_SET), 0);
  EXPECT_FALSE(feof(f));  // a seek clears end of file, as fseek does
  EXPECT_EQ(fgetc(f), static_cast<unsigned char>(content_[4097]));
  ASSERT_EQ(ungetc('x', f), 'x');  // pushed back: glibc's own seek handles the backup area
  ASSERT_EQ(seek_stream(f, 2, SEEK_CUR), 0);
  EXPECT_EQ(ftello(f), 4097 + 2);
  EXPECT_EQ(fgetc(f), static_cast<unsigned char>(content_[4099]));
  ASSERT_EQ(seek_stream(f, -3, SEEK_END), 0);
  EXPECT_EQ(fgetc(f), static_cast<unsigned char>(content_[content_.size() - 3]));
  fclose(f);
}

// Random walks: every read, tell and end-of-file answer of a stream moved by seek_stream
// equals that of a stream moved by fseeko, across every stdio read the program might mix.
// Streams glibc reads through a mapping ("m" mode) included: seek_stream leaves them to
// fseeko.
TEST_F(GlibcStream, RandomWalkMatchesFseeko) {
  std::mt19937 rng(2026);
  const off_t size = static_cast<off_t>(content_.size());
  for (int walk = 0; walk < 60; ++walk) {
    const char *mode = walk % 3 == 2 ? "rbm" : "rb";
    FILE *ours = fopen(path_.c_str(), mode);
    FILE *theirs = fopen(path_.c_str(), mode);
    ASSERT_TRUE(ours && theirs);
    for (int step = 0; step < 200; ++step) {
      const int op = static_cast<int>(rng() % 6);
      SCOPED_TRACE("walk " + std::to_string(walk) + " step " + std::to_string(step) + " op " +
                   std::to_string(op));
      if (op == 0 || op == 1) {
        const int whence = op == 0 ? SEEK_SET : SEEK_CUR;
        const off_t to = whence == SEEK_SET ? static_cast<off_t>(rng() % (size + 600))
                                            : static_cast<off_t>(rng() % 9000) - 4500;
        const int a = seek_stream(ours, to, whence);
        const int b = fseeko(theirs, to, whence);
        ASSERT_EQ(a, b);
      } else if (op == 2) {
        const size_t n = 1 + rng() % 9000;
        std::vector<char> x(n), y(n);
        ASSERT_EQ(fread(x.data(), 1, n, ours), fread(y.data(), 1, n, theirs));
        ASSERT_EQ(x, y);
      } else if (op == 3) {
        ASSERT_EQ(fgetc(ours), fgetc(theirs));
      } else if (op == 4) {
        char x[100] = "", y[100] = "";
        const bool a = fgets(x, sizeof x, ours) != nullptr;
        const bool b = fgets(y, sizeof y, theirs) != nullptr;
        ASSERT_EQ(a, b);
        if (a) {
          ASSERT_STREQ(x, y);
        }
      } else {
        const int c = fgetc(theirs);
        ASSERT_EQ(fgetc(ours), c);
        if (c != EOF) {
          ASSERT_EQ(ungetc(c, ours), ungetc(c, theirs));
        }
      }
      ASSERT_EQ(ftello(ours), ftello(theirs));
      ASSERT_EQ(feof(ours) != 0, feof(theirs) != 0);
    }
    fclose(ours);
    fclose(theirs);
  }
}

// A stream topped up before its line reads (stream_room, then the bytes at room.at, then
// stream_filled) reads, tells, seeks and reaches the end of the file exactly as one glibc
// alone reads, and its descriptor stays where glibc's next refill must read from; with
// glibc's buffer and with the runtime's line buffer.
TEST_F(GlibcStream, TopUpMatchesGlibc) {
  std::mt19937 rng(1124);
  const off_t size = static_cast<off_t>(content_.size());
  for (int walk = 0; walk < 40; ++walk) {
    FILE *ours = walk % 2 ? fdopen(open(path_.c_str(), O_RDONLY), "r") : fopen(path_.c_str(), "rb");
    FILE *theirs = fopen(path_.c_str(), "rb");
    ASSERT_TRUE(ours && theirs);
    ASSERT_TRUE(stream_unbuffered(ours));
    if (walk % 4 < 2) give_line_buffer(ours);
    size_t topped_up = 0;
    auto top_up = [&](size_t want) {
      StreamLock lock(ours);
      const StreamRoom room = stream_room(ours, want);
      if (room.room == 0) return;
      ASSERT_GE(room.at, 0);
      // Sometimes the cache has only part of it (the rest is the stream's to read).
      size_t got = room.at >= size ? 0 : std::min<size_t>(room.room, static_cast<size_t>(size - room.at));
      if (rng() % 4 == 0) got /= 2;
      memcpy(room.to, content_.data() + room.at, got);
      stream_filled(ours, room, got);
      topped_up += got;
    };
    for (int step = 0; step < 300; ++step) {
      const int op = static_cast<int>(rng() % 6);
      SCOPED_TRACE("walk " + std::to_string(walk) + " step " + std::to_string(step) + " op " +
                   std::to_string(op));
      if (op <= 2) {
        const int n = 1 + static_cast<int>(rng() % 300);
        std::vector<char> x(static_cast<size_t>(n) + 1, 'x'), y(static_cast<size_t>(n) + 1, 'y');
        top_up(static_cast<size_t>(n - 1));
        const bool a = fgets(x.data(), n, ours) != nullptr;
        const bool b = fgets(y.data(), n, theirs) != nullptr;
        ASSERT_EQ(a, b);
        if (a) {
          ASSERT_STREQ(x.data(), y.data());
        }
      } else if (op == 3) {
        char *x = nullptr, *y = nullptr;
        size_t xn = 0, yn = 0;
        const int delim = static_cast<int>(rng() % 256);  // the content has every byte
        top_up(SIZE_MAX);
        const ssize_t a = getdelim(&x, &xn, delim, ours);
        const ssize_t b = getdelim(&y, &yn, delim, theirs);
        ASSERT_EQ(a, b);
        if (a > 0) {
          ASSERT_EQ(std::string(x, static_cast<size_t>(a)), std::string(y, static_cast<size_t>(b)));
        }
        free(x);
        free(y);
      } else if (op == 4) {
        const off_t to = static_cast<off_t>(rng() % (size + 600));
        ASSERT_EQ(seek_stream(ours, to, SEEK_SET), fseeko(theirs, to, SEEK_SET));
      } else {
        char x[64], y[64];
        const size_t n = 1 + rng() % 64;
        const size_t a = fread(x, 1, n, ours);
        ASSERT_EQ(a, fread(y, 1, n, theirs));
        ASSERT_EQ(std::string(x, a), std::string(y, a));
      }
      ASSERT_EQ(ftello(ours), ftello(theirs));
      ASSERT_EQ(feof(ours) != 0, feof(theirs) != 0);
      // glibc forgets the offset (-1) after a read reached the end of the file.
      if (stream_file_offset(ours) >= 0) {
        ASSERT_EQ(kernel_offset(ours), stream_file_offset(ours));
      }
    }
    EXPECT_GT(topped_up, 0u);
    auto line_buffer = take_line_buffer(ours);
    fclose(ours);
    fclose(theirs);
  }
}

// The MT's stream keeps the original's buffer (GlibcStream.h): whatever the program does
// between its calls (getc, ungetc, fread, fseeko, all glibc's own) and whatever changes
// the file meanwhile, a stream whose refills come from next_block/block_filled returns
// exactly what a plain glibc stream on the same file returns. The blocks are filled with
// what the file holds when the call starts, as the cache serves them (coherence.md).
TEST_F(GlibcStream, MirrorMatchesGlibcWhileTheFileChanges) {
  std::mt19937 rng(2611);
  const int writer = open(path_.c_str(), O_WRONLY);
  const int reader = open(path_.c_str(), O_RDONLY);
  ASSERT_GE(writer, 0);
  ASSERT_GE(reader, 0);
  struct stat st;
  ASSERT_EQ(fstat(reader, &st), 0);
  const size_t block = static_cast<size_t>(stream_buffer_bytes(st.st_blksize));
  size_t mirrored_blocks = 0, given_back = 0, refilled = 0, seeks_filled = 0;
  for (int walk = 0; walk < 60; ++walk) {
    ASSERT_EQ(ftruncate(writer, 0), 0);
    ASSERT_EQ(pwrite(writer, content_.data(), content_.size(), 0), static_cast<ssize_t>(content_.size()));
    // Every third walk: streams on descriptors at an unaligned offset (their blocks start
    // there).
    auto open_stream = [&] {
      if (walk % 3 != 2) return fopen(path_.c_str(), "rb");
      const int fd = open(path_.c_str(), O_RDONLY);
      return fd >= 0 && lseek(fd, 100, SEEK_SET) == 100 ? fdopen(fd, "r") : nullptr;
    };
    FILE *ours = open_stream();
    FILE *theirs = open_stream();
    ASSERT_TRUE(ours && theirs);
    ASSERT_TRUE(stream_unbuffered(ours));
    ASSERT_TRUE(give_mirror_buffer(ours, block));
    auto mirrored = [&](bool refill_due, auto call, auto looked_at_next) {
      const MirroredCall r = mirrored_call(ours, reader, refill_due, call, looked_at_next);
      mirrored_blocks += r.filled;
      given_back += r.given_back;
    };
    int last = EOF;
    for (int step = 0; step < 400; ++step) {
      const int op = static_cast<int>(rng() % 11);
      SCOPED_TRACE("walk " + std::to_string(walk) + " step " + std::to_string(step) + " op " + std::to_string(op));
      if (op == 10 && !feof(ours) && !stream_has_pushback(ours)) {
        // An fread as StdioIo.cpp's ppios_fread serves it: the buffer's bytes, then the
        // rest and the last block's tail from the file as it is now, kept in the buffer.
        const size_t n = 1 + rng() % 9000;
        std::vector<char> x(n), y(n);
        StreamLock lock(ours);
        const size_t buffered = std::min(stream_unread(ours), n);
        ASSERT_EQ(fread(x.data(), 1, buffered, ours), buffered);
        const size_t asked = n - buffered;
        size_t got = buffered;
        if (asked > 0) {
          const off_t offset = lseek(fileno(ours), 0, SEEK_CUR);
          const size_t tail = asked % block ? block - asked % block : 0;
          std::vector<char> scratch(asked + tail);
          ssize_t r = pread(reader, scratch.data(), asked + tail, offset);
          const size_t have = r > 0 ? static_cast<size_t>(r) : 0;
          if (have < asked) {
            // Short of the file's end: what glibc itself does from here.
            got += fread(x.data() + buffered, 1, asked, ours);
          } else {
            std::memcpy(x.data() + buffered, scratch.data(), asked);
            got += asked;
            const size_t kept = tail > 0 ? block - tail : 0;
            if (tail == 0 || !refilled_stream(ours, offset, offset + static_cast<off_t>(asked - kept),
                                              scratch.data() + (asked - kept), have - (asked - kept), kept)) {
              ASSERT_EQ(reposition_stream(ours, offset + static_cast<off_t>(asked)), 0);
            } else {
              ++refilled;
            }
          }
        }
        ASSERT_EQ(got, fread(y.data(), 1, n, theirs));
        ASSERT_EQ(std::string(x.data(), got), std::string(y.data(), got));
        last = EOF;
      } else if (op <= 2) {
        const int n = 1 + static_cast<int>(rng() % 300);
        std::vector<char> x(static_cast<size_t>(n) + 1, 'x'), y(static_cast<size_t>(n) + 1, 'y');
        const size_t bound = n > 1 ? static_cast<size_t>(n) - 1 : 0;
        bool a = false;
        mirrored(stream_unread(ours) < bound && !stream_holds_delimiter(ours, bound, '\n'),
                 [&] { a = fgets(x.data(), n, ours) != nullptr; }, [] { return true; });
        const bool b = fgets(y.data(), n, theirs) != nullptr;
        ASSERT_EQ(a, b);
        if (a) {
          ASSERT_STREQ(x.data(), y.data());
        }
        last = EOF;
      } else if (op == 3) {
        char x[32] = {0}, y[32] = {0};
        int a = 0;
        mirrored(stream_unread(ours) < 64, [&] { a = fscanf(ours, "%15s", x); },
                 [&] { return scan_ends_with_lookahead("%15s", a); });
        ASSERT_EQ(a, fscanf(theirs, "%15s", y));
        ASSERT_STREQ(x, y);
        last = EOF;
      } else if (op == 4) {
        const int k = 1 + static_cast<int>(rng() % 200);
        for (int i = 0; i < k; ++i) {
          last = fgetc(ours);
          ASSERT_EQ(last, fgetc(theirs));
        }
      } else if (op == 5 && last != EOF) {
        ASSERT_EQ(ungetc(last, ours), ungetc(last, theirs));
        last = EOF;
      } else if (op == 6) {
        char x[80], y[80];
        const size_t n = 1 + rng() % 80;
        const size_t a = fread(x, 1, n, ours);
        ASSERT_EQ(a, fread(y, 1, n, theirs));
        ASSERT_EQ(std::string(x, a), std::string(y, a));
        last = EOF;
      } else if (op == 7) {
        const off_t size = lseek(reader, 0, SEEK_END);
        const off_t to = rng() % 2 ? static_cast<off_t>(rng() % static_cast<unsigned>(size + 200))
                                   : ftello(theirs) - static_cast<off_t>(rng() % 3000) + 150;
        const int whence = rng() % 2 ? SEEK_SET : SEEK_CUR;
        const off_t by = whence == SEEK_SET ? to : to - ftello(theirs);
        // As StdioIo.cpp's ppios_fseeko: glibc's seek, its read-ahead from the file as it
        // is now (the cache), or, when the cache lacks some of it, glibc's own.
        const bool cached = rng() % 4 != 0;
        ASSERT_EQ(mt_seek_stream(ours, by, whence, size,
                                 [&](char *to_buf, off_t at, size_t n) -> ssize_t {
                                   if (!cached) return -1;
                                   ssize_t r = pread(reader, to_buf, n, at);
                                   if (r >= 0) ++seeks_filled;
                                   return r;
                                 }),
                  fseeko(theirs, by, whence));
        last = EOF;
      } else if (op == 8) {
        // The file changes: a few bytes anywhere (near the streams, mostly), or it shrinks.
        const off_t size = lseek(reader, 0, SEEK_END);
        if (rng() % 12 == 0 && size > 4096) {
          ASSERT_EQ(ftruncate(writer, size - static_cast<off_t>(rng() % 4096)), 0);
        } else {
          const off_t near = std::max<off_t>(0, ftello(theirs) + static_cast<off_t>(rng() % 12000) - 2000);
          const off_t at = rng() % 4 ? near : static_cast<off_t>(rng() % static_cast<unsigned>(size + 1));
          std::string bytes(1 + rng() % 64, '\0');
          for (char &c : bytes) c = static_cast<char>(rng() % 3 ? 'A' + rng() % 26 : '\n');
          ASSERT_EQ(pwrite(writer, bytes.data(), bytes.size(), at), static_cast<ssize_t>(bytes.size()));
        }
      } else {
        clearerr(ours);
        clearerr(theirs);
      }
      ASSERT_EQ(ftello(ours), ftello(theirs));
      ASSERT_EQ(feof(ours) != 0, feof(theirs) != 0);
    }
    auto buffer = take_line_buffer(ours);
    fclose(ours);
    fclose(theirs);
  }
  close(writer);
  close(reader);
  EXPECT_GT(mirrored_blocks, 150u);  // the walks do exercise the mirror
  EXPECT_GT(given_back, 10u);
  EXPECT_GT(refilled, 100u);
  EXPECT_GT(seeks_filled, 100u);
}

// A formatted read that starts near its block's end gets the next block, then stops
// before it and gives it back: the stream must hold all of its block again, the part
// the program took too, so that an fseek back into it returns the block's old bytes (as
// glibc's own seek inside its buffer does) after the file changed there.
TEST_F(GlibcStream, MirrorGivesBackTheWholeBlock) {
  std::string text;
  for (int i = 0; i < 1024; ++i) {
    char line[32];
    snprintf(line, sizeof line, "w%03d aaaaaaaaaa\n", i % 1000);  // 16 bytes
    text += line;
  }
  const int writer = open(path_.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_EQ(write(writer, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  FILE *ours = fopen(path_.c_str(), "r");
  FILE *theirs = fopen(path_.c_str(), "r");
  ASSERT_TRUE(ours && theirs);
  struct stat st;
  ASSERT_EQ(fstat(fileno(ours), &st), 0);
  const size_t block = static_cast<size_t>(stream_buffer_bytes(st.st_blksize));
  ASSERT_TRUE(give_mirror_buffer(ours, block));
  ASSERT_EQ(fseeko(ours, 0, SEEK_SET), 0);  // glibc knows the offset from now on
  ASSERT_EQ(fseeko(theirs, 0, SEEK_SET), 0);
  char x[64], y[64];
  const size_t lines = block / 16 - 3;  // 48 bytes before the block's end
  for (size_t i = 0; i < lines; ++i) {
    ASSERT_NE(fgets(x, sizeof x, ours), nullptr);
    ASSERT_NE(fgets(y, sizeof y, theirs), nullptr);
  }
  int a = 0;
  const MirroredCall r = mirrored_call(ours, fileno(theirs), true, [&] { a = fscanf(ours, "%15s", x); },
                                       [] { return true; });
  ASSERT_EQ(a, 1);  // "wNNN": well inside the block
  ASSERT_TRUE(r.filled && r.given_back);
  ASSERT_EQ(fscanf(theirs, "%15s", y), 1);
  ASSERT_STREQ(x, y);
  expect_buffered_line(ours, theirs, writer, "ZZ", 20, 16, "w001 aaaaaaaaaa\n");
  close(writer);
}

// The runtime gives a stream its buffer at its first line read, which may come after a
// seek: glibc must still know the offset the seek told it (setvbuf's sync makes it
// forget), or a later seek inside the buffer reads the file again where the original's
// returns the buffer's bytes.
TEST_F(GlibcStream, MirrorBufferKeepsTheKnownOffset) {
  const int writer = open(path_.c_str(), O_WRONLY);
  ASSERT_EQ(pwrite(writer, "first line\nsecond line\n", 23, 0), 23);
  FILE *ours = fopen(path_.c_str(), "r");
  FILE *theirs = fopen(path_.c_str(), "r");
  ASSERT_TRUE(ours && theirs);
  ASSERT_EQ(seek_stream(ours, 0, SEEK_SET), 0);
  ASSERT_EQ(fseeko(theirs, 0, SEEK_SET), 0);
  struct stat st;
  ASSERT_EQ(fstat(fileno(ours), &st), 0);
  ASSERT_TRUE(stream_unbuffered(ours));
  ASSERT_TRUE(give_mirror_buffer(ours, static_cast<size_t>(stream_buffer_bytes(st.st_blksize))));
  char x[64], y[64];
  ASSERT_TRUE(mirrored_call(ours, fileno(theirs), true, [&] { ASSERT_NE(fgets(x, sizeof x, ours), nullptr); },
                            [] { return true; }).filled);
  ASSERT_NE(fgets(y, sizeof y, theirs), nullptr);
  expect_buffered_line(ours, theirs, writer, "FIRST", 0, 0, "first line\n");
  close(writer);
}

// A number that ends right at a block's end: glibc's scanf looks at the next byte (the
// next block's first) to see that the number ended, and pushes it back. The original's
// stream has read that block then; the mirrored stream must keep it too, or a change
// there before the next read is seen where the original returns the old bytes.
TEST_F(GlibcStream, MirrorKeepsABlockScanfLookedInto) {
  const int writer = open(path_.c_str(), O_WRONLY | O_TRUNC);
  struct stat st;
  ASSERT_EQ(fstat(writer, &st), 0);
  const size_t block = static_cast<size_t>(stream_buffer_bytes(st.st_blksize));
  // Numbers of 7 digits, one a line; the last of the first block ends at its last byte,
  // and the next block starts with a newline.
  std::string text(2 * block, '\n');
  for (size_t i = 0; i + 8 <= block; i += 8) memcpy(&text[i], "1234567\n", 8);
  memcpy(&text[block - 8], "\n7654321", 8);
  memcpy(&text[block + 1], "1111111", 7);
  ASSERT_EQ(write(writer, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  FILE *ours = fopen(path_.c_str(), "r");
  FILE *theirs = fopen(path_.c_str(), "r");
  ASSERT_TRUE(ours && theirs && give_mirror_buffer(ours, block));
  int x = 0, y = 0;
  for (size_t i = 0; i < block; i += 8) {
    ASSERT_EQ(fscanf(theirs, "%d", &y), 1);
    int a = 0;
    mirrored_call(ours, fileno(theirs), stream_unread(ours) < 64, [&] { a = fscanf(ours, "%d", &x); },
                  [&] { return scan_ends_with_lookahead("%d", a); });
    ASSERT_EQ(a, 1);
    ASSERT_EQ(x, y);
  }
  ASSERT_EQ(y, 7654321);
  // Both have looked at the next block's first byte (a digit); now it changes.
  ASSERT_EQ(pwrite(writer, "9999999", 7, static_cast<off_t>(block) + 1), 7);
  ASSERT_EQ(fscanf(theirs, "%d", &y), 1);
  ASSERT_EQ(fscanf(ours, "%d", &x), 1);
  EXPECT_EQ(y, 1111111);  // glibc's buffer: the old bytes
  EXPECT_EQ(x, y);
  EXPECT_EQ(lseek(fileno(ours), 0, SEEK_CUR), lseek(fileno(theirs), 0, SEEK_CUR));
  close(writer);
  auto buffer = take_line_buffer(ours);
  fclose(ours);
  fclose(theirs);
}

// What a scanf format's last directive does at its end (ScanFormat.h).
TEST(ScanLookahead, FromTheFormatsLastDirective) {
  EXPECT_TRUE(scan_ends_with_lookahead("%d", 1));
  EXPECT_TRUE(scan_ends_with_lookahead("%d %lf", 2));
  EXPECT_TRUE(scan_ends_with_lookahead("%d ", 1));      // whitespace skipped up to a non-blank
  EXPECT_TRUE(scan_ends_with_lookahead("%s%n", 1));     // %n reads nothing
  EXPECT_TRUE(scan_ends_with_lookahead("%d,%d", 1));    // stopped early: at a character it could not match
  EXPECT_TRUE(scan_ends_with_lookahead("%d", EOF));
  EXPECT_FALSE(scan_ends_with_lookahead("%c", 1));
  EXPECT_FALSE(scan_ends_with_lookahead("%5c", 1));
  EXPECT_TRUE(scan_ends_with_lookahead("%4d", 1));      // glibc reads past the width's last digit
  EXPECT_TRUE(scan_ends_with_lookahead("%'d", 1));      // flags are not conversions
  EXPECT_TRUE(scan_ends_with_lookahead("%Id", 1));
  EXPECT_FALSE(scan_ends_with_lookahead("", 0));
  EXPECT_TRUE(scan_ends_with_lookahead("%*d %d", 0));   // the suppressed one failed
  // Only the input tells: the runtime leaves these calls' refills to glibc.
  EXPECT_EQ(scan_end("%4lf"), ScanEnd::DependsOnInput);   // a float stops at its width, or before it
  EXPECT_EQ(scan_end("%15[^,]"), ScanEnd::DependsOnInput);
  EXPECT_EQ(scan_end("%8s"), ScanEnd::DependsOnInput);
  EXPECT_EQ(scan_end("%d,"), ScanEnd::DependsOnInput);    // a literal looks only when it fails
  EXPECT_EQ(scan_end("%d%%"), ScanEnd::DependsOnInput);
  EXPECT_EQ(scan_end("%lf"), ScanEnd::LooksAhead);
  EXPECT_EQ(scan_end("%3c"), ScanEnd::Exact);
}

// The rule against glibc itself, on generated formats and inputs: a stream that hands
// glibc one byte per read tells how many bytes vfscanf read, and the rest of the stream
// how many it took; it looked ahead if it read more than it took. Wherever the format
// does not leave it to the input, scan_ends_with_lookahead must say exactly that.
struct Feed {
  std::string data;
  size_t handed = 0;
};

ssize_t feed_read(void *cookie, char *buf, size_t size) {
  auto *feed = static_cast<Feed *>(cookie);
  if (size == 0 || feed->handed >= feed->data.size()) return 0;
  buf[0] = feed->data[feed->handed++];
  return 1;
}

TEST(ScanLookahead, AgreesWithGlibcOnGeneratedFormats) {
  const std::vector<std::string> directives = {
      "%d", "%5d", "%2d", "%*d", "%i", "%x", "%lf", "%4lf", "%*lf", "%e", "%s", "%3s", "%*s",
      "%[a-z]", "%2[a-z]", "%*[^,]", "%c", "%3c", "%*c", " ", "\n", ",", ";", "%%", "%n"};
  const std::vector<std::string> tokens = {"12", "-7", "123456", "3.25", "1e3", "0x1f", "abc",
                                           "xyzzy", ",", ";", " ", "\n", "%", "+", "."};
  std::mt19937 rng(20261127);
  alignas(16) static char scratch[8][4096];
  int decided = 0, looked = 0, consumed_failures = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string format, input;
    const int nd = 1 + static_cast<int>(rng() % 4), nt = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < nd; ++i) format += directives[rng() % directives.size()];
    for (int i = 0; i < nt; ++i) input += tokens[rng() % tokens.size()];
    Feed feed{input + "#tail#", 0};
    FILE *f = fopencookie(&feed, "r", cookie_io_functions_t{feed_read, nullptr, nullptr, nullptr});
    ASSERT_NE(f, nullptr);
    const int result = fscanf(f, format.c_str(), scratch[0], scratch[1], scratch[2], scratch[3],
                              scratch[4], scratch[5], scratch[6], scratch[7]);
    const size_t handed = feed.handed;
    size_t rest = 0;
    while (fgetc(f) != EOF) ++rest;
    fclose(f);
    const size_t taken = feed.data.size() - rest;
    if (handed >= feed.data.size()) continue;  // it met the end of the input
    const bool glibc_looked = handed > taken;
    int conversions = 0;
    for (size_t i = 0; i + 1 < format.size(); ++i)
      if (format[i] == '%') {
        if (format[i + 1] == '%') {
          ++i;
          continue;
        }
        if (format[i + 1] != '*' && format[i + 1] != 'n') ++conversions;
      }
    const bool stopped_early = result == EOF || result < conversions;
    if (!stopped_early && scan_end(format.c_str()) == ScanEnd::DependsOnInput) continue;
    if (stopped_early && !glibc_looked) {
      // glibc's float parser may take the character it fails at ("inf" and "nan" begun,
      // an exponent or a hex prefix without digits): the one failure that is no look.
      ++consumed_failures;
      EXPECT_TRUE(format.find('f') != std::string::npos || format.find('e') != std::string::npos)
          << "format \"" << format << "\" input \"" << input << "\" result " << result;
      if (HasFailure()) return;
      continue;
    }
    ++decided;
    looked += glibc_looked;
    EXPECT_EQ(scan_ends_with_lookahead(format.c_str(), result), glibc_looked)
        << "format \"" << format << "\" input \"" << input << "\" result " << result << " read "
        << handed << " took " << taken;
    if (HasFailure()) return;
  }
  // The generator reaches both answers, many times.
  EXPECT_GT(decided, 5000);
  EXPECT_GT(looked, 1000);
  EXPECT_GT(decided - looked, 500);
  std::printf("decided %d (looked %d), failures that took their character %d\n", decided, looked,
              consumed_failures);
}

// Streams it does not understand (writable ones) are plain fseeko.
TEST_F(GlibcStream, WritableStreamIsPlainFseeko) {
  FILE *f = fopen(path_.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(seek_stream(f, 4096 + 7, SEEK_SET), 0);
  ASSERT_EQ(fputc('Z', f), 'Z');
  ASSERT_EQ(seek_stream(f, 4096 + 7, SEEK_SET), 0);
  EXPECT_EQ(fgetc(f), 'Z');
  fclose(f);
}

}  // namespace
}  // namespace ppios
