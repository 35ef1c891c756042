// ScanFormat (runtime/src/ScanFormat.h): the PT's rewritten scanf call consumes exactly
// the input the program's call consumes and returns the same count, whichever of its
// destinations it keeps, and stores nothing where it was given none.
#include "ScanFormat.h"

#include <gtest/gtest.h>

#include <cstdarg>
#include <cstring>
#include <string>
#include <vector>

namespace ppios {
namespace {

bool prepare(ScanCall *call, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  const bool ok = prepare_scan(format, ap, call);
  va_end(ap);
  return ok;
}

// Every destination a large zeroed slot, wide enough for any conversion here.
struct Slots {
  alignas(16) char bytes[6][512] = {};
  void *at(int i) { return bytes[i]; }
};

struct Case {
  const char *format;
  const char *input;
};

const Case kCases[] = {
    {"%d %d %lf", "1 2 3.5\n4 5 6.25\n7 8 x\n"},
    {"%d", "  42 17 -3 9x"},
    {"%lf", "1e3 -0.5 nan inf 2"},
    {"%s %d", "alpha 1 beta 2 gamma"},
    {"%5s%d", "abcdefgh12 ijk3"},
    {"%*d %d", "1 2 3 4 5"},
    {"%%%d", "%7 %8 9"},
    {"%[a-z]%d", "abc12def34 56"},
    {"%[^,],%d", "x y,1,z,2"},
    {"%[]a]%c", "]a]bq]]c"},
    {"%hhd %hd %lld %Lf", "1 2 3 4.5 6 7 8 9.5"},
    {"%c%c", "ab cd"},
    {"%x %o %i", "ff 17 0x1f 10 20"},
    {"%d,%d", "1,2 3;4"},
    {"%u", "-1 4294967295"},
    {"%3d%3d", "1234567"},
    {"%p", "0x10 0x20"},
    {"", "abc"},
    {"%d", ""},
    {"%d %d", "5"},
};

// The program's call: every destination a slot.
int original(FILE *f, const char *format, Slots *s) {
  return fscanf(f, format, s->at(0), s->at(1), s->at(2), s->at(3), s->at(4), s->at(5));
}

TEST(ScanFormat, ConsumesAndCountsLikeTheProgram) {
  for (const Case &c : kCases) {
    for (int keep = 0; keep < 4; ++keep) {  // bit i: keep destination i (0..1)
      SCOPED_TRACE(std::string(c.format) + " on \"" + c.input + "\" keep " + std::to_string(keep));
      FILE *theirs = fmemopen(const_cast<char *>(c.input), strlen(c.input), "r");
      FILE *ours = fmemopen(const_cast<char *>(c.input), strlen(c.input), "r");
      ASSERT_TRUE(theirs && ours);
      for (int call = 0; call < 8; ++call) {
        Slots expected, kept;
        const int want = original(theirs, c.format, &expected);
        ScanCall pt;
        ASSERT_TRUE(prepare(&pt, c.format, keep & 1 ? kept.at(0) : nullptr,
                            keep & 2 ? kept.at(1) : nullptr, nullptr, nullptr, nullptr, nullptr));
        ASSERT_EQ(run_scan(ours, &pt), want) << "call " << call << ", format " << pt.format;
        ASSERT_EQ(ftell(ours), ftell(theirs)) << "call " << call;
        ASSERT_EQ(feof(ours) != 0, feof(theirs) != 0);
        // A kept destination holds what the program's does (scalars: their bytes).
        const bool scalars = std::strpbrk(c.format, "[sc*") == nullptr;
        for (int i = 0; i < 2 && i < want; ++i) {
          if (scalars && ((keep >> i) & 1)) {
            EXPECT_EQ(memcmp(kept.at(i), expected.at(i), 16), 0) << "destination " << i;
          }
        }
        if (want == EOF) break;
      }
      fclose(theirs);
      fclose(ours);
    }
  }
}

TEST(ScanFormat, NullDestinationsAreNeverWritten) {
  const char input[] = "12 34 hello";
  FILE *f = fmemopen(const_cast<char *>(input), sizeof input - 1, "r");
  ASSERT_NE(f, nullptr);
  ScanCall pt;
  ASSERT_TRUE(prepare(&pt, "%d %d %s", nullptr, nullptr, nullptr));
  EXPECT_EQ(pt.assigned, 0);
  EXPECT_EQ(pt.conversions, 3);
  EXPECT_EQ(run_scan(f, &pt), 3);  // a null destination written would have crashed
  fclose(f);
}

TEST(ScanFormat, RefusesWhatItCannotFollow) {
  for (const char *format : {"%d%n", "%1$d", "%ms", "%[abc", "%"}) {
    ScanCall pt;
    EXPECT_FALSE(prepare(&pt, format, nullptr, nullptr)) << format;
  }
  std::string many;
  for (int i = 0; i <= kMaxScanConversions; ++i) many += "%d ";
  ScanCall pt;
  std::vector<void *> none(kMaxScanConversions + 1, nullptr);
  EXPECT_FALSE(prepare(&pt, many.c_str(), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                       nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                       nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                       nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                       nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace ppios
