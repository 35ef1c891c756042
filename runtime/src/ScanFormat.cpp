#include "ScanFormat.h"

#include <algorithm>
#include <cctype>
#include <cstring>

// glibc's ISO C99 scanf, what <stdio.h> calls fscanf unless _GNU_SOURCE is defined (C++
// defines it): "%a" is a float there, not an allocation.
extern "C" int __isoc99_fscanf(FILE *stream, const char *format, ...);

namespace ppios {

bool prepare_scan(const char *format, va_list destinations, ScanCall *call) {
  std::string &out = call->format;
  int nargs = 0;
  const char *p = format;
  while (*p != '\0') {
    if (*p != '%') {
      out.push_back(*p++);
      continue;
    }
    out.push_back(*p++);
    if (*p == '%') {
      out.push_back(*p++);
      continue;
    }
    const bool assigns = *p != '*';
    void *to = assigns ? va_arg(destinations, void *) : nullptr;
    if (to == nullptr) out.push_back('*');
    if (!assigns) ++p;
    while (std::isdigit(static_cast<unsigned char>(*p))) out.push_back(*p++);
    if (*p == '$' || *p == 'm') return false;
    while (*p != '\0' && std::strchr("hlLqjzt", *p) != nullptr) out.push_back(*p++);
    if (*p == '\0' || *p == 'n') return false;
    if (*p == '[') {  // a set: a ']' right after '[' or '[^' belongs to it
      out.push_back(*p++);
      if (*p == '^') out.push_back(*p++);
      if (*p == ']') out.push_back(*p++);
      while (*p != '\0' && *p != ']') out.push_back(*p++);
      if (*p != ']') return false;
    }
    out.push_back(*p++);
    if (!assigns) continue;
    if (call->conversions == kMaxScanConversions) return false;
    if (to != nullptr) {
      call->args[nargs++] = to;
      ++call->assigned;
    }
    call->marks[call->conversions] = -1;
    call->args[nargs++] = &call->marks[call->conversions++];
    out.append("%n");
  }
  return true;
}

namespace {
struct FormatEnd {
  int conversions = 0;               // assigning conversions
  ScanEnd last = ScanEnd::Exact;     // how the last directive that reads ends
};

FormatEnd parse_format_end(const char *format) {
  FormatEnd end;
  // A literal or a suppressed conversion after the last assigning one may fail, at a
  // character it looked at, without the result showing it.
  bool may_fail_unseen = false;
  for (const char *p = format; *p != '\0';) {
    if (std::isspace(static_cast<unsigned char>(*p))) {
      while (std::isspace(static_cast<unsigned char>(*p))) ++p;
      end.last = ScanEnd::LooksAhead;  // skips until a character that is not whitespace
      continue;
    }
    if (*p != '%' || p[1] == '%') {
      // A literal: read and matched (nothing looked at past it), or read, not matched
      // and pushed back (a look at the next character): only the input tells which.
      p += *p == '%' ? 2 : 1;
      end.last = ScanEnd::DependsOnInput;
      may_fail_unseen = true;
      continue;
    }
    ++p;
    const bool assigns = *p != '*';
    if (!assigns) ++p;
    bool width = false;
    while (std::isdigit(static_cast<unsigned char>(*p))) {
      ++p;
      width = true;
    }
    if (*p == '$') {  // positional: the digits were the position, a width may follow
      ++p;
      width = false;
      while (std::isdigit(static_cast<unsigned char>(*p))) {
        ++p;
        width = true;
      }
    }
    while (*p != '\0' && std::strchr("hlLqjztmZ'I", *p) != nullptr) ++p;  // sizes and flags
    const char conversion = *p;
    if (conversion == '\0') break;
    if (conversion == '[') {  // a set: a ']' right after '[' or '[^' belongs to it
      ++p;
      if (*p == '^') ++p;
      if (*p == ']') ++p;
      while (*p != '\0' && *p != ']') ++p;
      if (*p == '\0') break;
    }
    ++p;
    if (conversion == 'n') continue;  // reads nothing
    if (assigns) {
      ++end.conversions;
      may_fail_unseen = false;
    } else if (conversion != 'c' && conversion != 'C') {  // %c fails only at the end of the input
      may_fail_unseen = true;
    }
    // %c takes exactly its width. glibc's integer loop reads the character after each
    // digit before it tests the width, so an integer always looks ahead. A string, a
    // set or a float ends where the next character does not belong to it (a look), or
    // at its width without a look: with a width, only the input tells which.
    if (conversion == 'c' || conversion == 'C') end.last = ScanEnd::Exact;
    else if (std::strchr("diouxXp", conversion) != nullptr) end.last = ScanEnd::LooksAhead;
    else end.last = width ? ScanEnd::DependsOnInput : ScanEnd::LooksAhead;
  }
  if (end.last == ScanEnd::Exact && may_fail_unseen) end.last = ScanEnd::DependsOnInput;
  return end;
}
}  // namespace

ScanEnd scan_end(const char *format) {
  return format == nullptr ? ScanEnd::DependsOnInput : parse_format_end(format).last;
}

bool scan_ends_with_lookahead(const char *format, int result) {
  if (format == nullptr) return false;
  const FormatEnd end = parse_format_end(format);
  // A call that stopped early stopped at a character it looked at and could not match.
  if (result == EOF || result < end.conversions) return true;
  return end.last != ScanEnd::Exact;
}

int run_scan(FILE *stream, ScanCall *call) {
  // Extra arguments are evaluated and ignored (C11 7.21.6.2): one call for any count.
  void **a = call->args;
#define PPIOS_ARGS8(i) a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]
  const int r = __isoc99_fscanf(stream, call->format.c_str(), PPIOS_ARGS8(0), PPIOS_ARGS8(8),
                                PPIOS_ARGS8(16), PPIOS_ARGS8(24), PPIOS_ARGS8(32),
                                PPIOS_ARGS8(40), PPIOS_ARGS8(48), PPIOS_ARGS8(56));
#undef PPIOS_ARGS8
  const int matched = static_cast<int>(std::count_if(
      call->marks, call->marks + call->conversions, [](int m) { return m >= 0; }));
  // glibc returns EOF for an input failure before anything was assigned; the program's
  // call, which assigns every conversion, returns EOF only if none matched.
  return r == EOF && matched == 0 ? EOF : matched;
}

}  // namespace ppios
