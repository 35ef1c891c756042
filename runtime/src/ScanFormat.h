// scanf formats for the prefetch thread (ppios_prefetch_fscanf).
//
// The PT runs a program's fscanf on its own stream so that it consumes exactly the input
// the program's call will, but it must never store into the program's memory. So the
// call is rewritten: a conversion whose destination the PT owns (ppios-cc passes the
// PT's own local scalars, those its slice needs) keeps it; every other one (a null
// destination) is suppressed ('*'). Each conversion is followed by %n into a mark of the
// call's own, so the count of set marks is how many conversions matched, suppressed or
// not: the count the program's call returns.
//
// Not followed (prepare_scan returns false): %n and the m (allocate) modifier, which
// store into the program's memory even when nothing matches, positional (n$) arguments,
// more than kMaxScanConversions conversions.
#pragma once

#include <stdarg.h>
#include <stdio.h>

#include <string>

namespace ppios {

constexpr int kMaxScanConversions = 32;

struct ScanCall {  // args points into marks: prepared and run in place
  ScanCall() = default;
  ScanCall(const ScanCall &) = delete;
  ScanCall &operator=(const ScanCall &) = delete;
  std::string format;                          // the rewritten format
  void *args[2 * kMaxScanConversions] = {};    // kept destinations and marks, in order
  int marks[kMaxScanConversions] = {};
  int conversions = 0;                         // the format's assigning conversions
  int assigned = 0;                            // those whose destination is kept
};

// Rewrites `format`, reading one destination pointer per assigning conversion from
// `destinations` (null: suppress it).
bool prepare_scan(const char *format, va_list destinations, ScanCall *call);

// Scans `stream` with the prepared call; returns what the program's call returns for
// the same input (the number of matched conversions, or EOF).
int run_scan(FILE *stream, ScanCall *call);

// For the MT's stream (GlibcStream.h, give_back_block): how a call of glibc's vfscanf
// with `format` ends, as far as the format tells. LooksAhead: it ends by looking at one
// character past the input it took and pushing it back (a number, an unbounded string or
// set, a whitespace directive). That look is a read: at a buffer's end, the stream reads
// the next block for it. Exact: it ends on the last character it takes (%c).
// DependsOnInput: either, and only the input tells which (a string, set or float with a
// width stops at the width without a look; a literal at the end looks only when it does
// not match; a literal or suppressed conversion before a final %c may fail, with a look,
// unseen in the result); the runtime then leaves the call's refills to glibc.
enum class ScanEnd { LooksAhead, Exact, DependsOnInput };
ScanEnd scan_end(const char *format);
// Whether the call that returned `result` looked past its input: a call that stopped
// early (fewer conversions than the format's, or EOF) did, at the character it could
// not match (except where glibc's float parser takes that character: an "inf", "nan",
// exponent or hex prefix cut short); else as scan_end says (true for DependsOnInput).
// tests/unit GlibcStreamTest checks it against glibc on generated formats and inputs.
bool scan_ends_with_lookahead(const char *format, int result);

}  // namespace ppios
