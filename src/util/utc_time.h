// Wall-clock times as RFC 3339 text in UTC ("2026-12-07T08:10:57.123Z"), for logs and API fields.
#pragma once
#include <chrono>
#include <string>

namespace preface {

// `t` with `fraction_digits` (0-9) digits of the second's fraction.
std::string utc_time(std::chrono::system_clock::time_point t, int fraction_digits);

}  // namespace preface
