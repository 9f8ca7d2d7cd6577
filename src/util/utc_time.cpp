#include "util/utc_time.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace preface {

std::string utc_time(std::chrono::system_clock::time_point t, int fraction_digits) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  const int digits = std::clamp(fraction_digits, 0, 9);
  if (digits > 0) {
    long long frac = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() % 1000000000;
    for (int i = digits; i < 9; ++i) frac /= 10;
    n += static_cast<size_t>(std::snprintf(buf + n, sizeof buf - n, ".%0*lld", digits, frac));
  }
  return std::string(buf, n) + "Z";
}

}  // namespace preface
