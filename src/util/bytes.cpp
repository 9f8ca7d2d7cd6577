#include "util/bytes.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "util/error.h"

namespace preface {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The multiplier of a unit suffix (already lower case, spaces trimmed); 0 when unknown.
uint64_t unit_multiplier(const std::string& unit) {
  struct Unit {
    const char* name;
    uint64_t bytes;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},          {"b", 1},
      {"kib", 1ull << 10}, {"mib", 1ull << 20}, {"gib", 1ull << 30}, {"tib", 1ull << 40}, {"pib", 1ull << 50},
      {"kb", 1000ull},     {"mb", 1000000ull},  {"gb", 1000000000ull}, {"tb", 1000000000000ull},
      {"pb", 1000000000000000ull},
  };
  for (const Unit& u : kUnits) {
    if (unit == u.name) return u.bytes;
  }
  return 0;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

uint64_t mem_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    uint64_t kib = 0;
    std::istringstream(line.substr(13)) >> kib;
    return kib * 1024;
  }
  return 0;
}

uint64_t parse_bytes(std::string_view text) {
  const auto fail = [&](const std::string& why) -> Error {
    return Error("bad byte size '" + std::string(text) + "': " + why);
  };
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  const std::string_view s = text.substr(begin, end - begin);
  if (s.empty()) throw fail("empty");
  if (s[0] == '-') throw fail("must not be negative");

  // value = digits x 10^exp10 x unit, computed exactly in 128 bits.
  std::string digits;  // mantissa digits, integer and fraction parts, no point
  int64_t exp10 = 0;
  size_t i = 0;
  for (; i < s.size() && is_digit(s[i]); ++i) digits += s[i];
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && is_digit(s[i]); ++i, --exp10) digits += s[i];
  }
  if (digits.empty()) throw fail("expected a number, e.g. 2GiB, 512MiB, 1e9");
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    const bool negative = i < s.size() && s[i] == '-';
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (i >= s.size() || !is_digit(s[i])) throw fail("exponent without digits");
    int64_t e = 0;
    for (; i < s.size() && is_digit(s[i]); ++i) e = std::min<int64_t>(e * 10 + (s[i] - '0'), 1000000);
    exp10 += negative ? -e : e;
  }
  while (i < s.size() && s[i] == ' ') ++i;
  const uint64_t unit = unit_multiplier(lower(s.substr(i)));
  if (unit == 0) {
    const std::string u = lower(s.substr(i));
    if (u == "k" || u == "m" || u == "g" || u == "t" || u == "p") {
      throw fail("ambiguous unit '" + std::string(s.substr(i)) + "': write " + std::string(s.substr(i)) +
                 "iB (powers of 1024) or " + std::string(s.substr(i)) + "B (powers of 1000)");
    }
    throw fail("unknown unit '" + std::string(s.substr(i)) + "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  }

  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return 0;
  digits.erase(0, first);
  while (digits.back() == '0') {
    digits.pop_back();
    ++exp10;
  }
  if (digits.size() > 20) throw fail("more than 20 significant digits");
  unsigned __int128 v = 0;  // < 10^20 < 2^67, times unit <= 2^50: < 2^117
  for (char c : digits) v = v * 10 + static_cast<unsigned>(c - '0');
  v *= unit;
  constexpr auto kMax = static_cast<unsigned __int128>(std::numeric_limits<uint64_t>::max());
  for (; exp10 > 0; --exp10) {
    v *= 10;
    if (v > kMax) throw fail("larger than 2^64 - 1 bytes");
  }
  for (; exp10 < 0 && v != 0; ++exp10) v /= 10;  // rounds down to whole bytes
  if (v > kMax) throw fail("larger than 2^64 - 1 bytes");
  return static_cast<uint64_t>(v);
}

std::string format_bytes(uint64_t n_bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n_bytes < 1024) return std::to_string(n_bytes) + " B";
  size_t u = 0;
  double v = static_cast<double>(n_bytes);
  while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string out = buf;
  if (out == "1024.00" && u + 1 < std::size(kUnits)) {  // 1023.995.. rounds up: show the next unit
    out = "1.00";
    ++u;
  }
  while (out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out + " " + kUnits[u];
}

}  // namespace preface
