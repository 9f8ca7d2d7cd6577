// RFC 3339 UTC text of wall-clock times (util/utc_time.h).
#include "util/utc_time.h"

#include <gtest/gtest.h>

namespace preface {
namespace {

TEST(UtcTime, SecondsAndFractions) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1796631057)) +
                 std::chrono::nanoseconds(123456789);
  EXPECT_EQ(utc_time(t, 0), "2026-12-07T08:10:57Z");
  EXPECT_EQ(utc_time(t, 3), "2026-12-07T08:10:57.123Z");
  EXPECT_EQ(utc_time(t, 9), "2026-12-07T08:10:57.123456789Z");
  EXPECT_EQ(utc_time(std::chrono::system_clock::time_point(std::chrono::seconds(0)), 3), "1970-01-01T00:00:00.000Z");
}

}  // namespace
}  // namespace preface
