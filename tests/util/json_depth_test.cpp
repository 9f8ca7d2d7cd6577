// The JSON nesting pre-scan: exact on valid JSON, brackets inside strings and escapes ignored, linear.
#include "util/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace preface {
namespace {

TEST(JsonDepth, CountsContainersOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1", 100), 0u);
  EXPECT_EQ(json_nesting_depth(R"("[[[")", 100), 0u);
  EXPECT_EQ(json_nesting_depth("{}", 100), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}],"c":{}})", 100), 4u);
  EXPECT_EQ(json_nesting_depth(R"({"a":"]]]}}}[[[{{{","b":[[]]})", 100), 3u);
  // An escaped quote does not end a string; an escaped backslash before a quote does.
  EXPECT_EQ(json_nesting_depth(R"({"a":"\"[[[","b":"\\"})", 100), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a":"\\",  "b":[[]]})", 100), 3u);
  // Siblings do not add up.
  EXPECT_EQ(json_nesting_depth("[[],[],[[]],[]]", 100), 3u);
}

TEST(JsonDepth, StopsOncePastTheLimit) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  EXPECT_EQ(json_nesting_depth(deep, 64), 65u);
  EXPECT_FALSE(json_depth_within(deep, 64));
  EXPECT_TRUE(json_depth_within(std::string(64, '[') + std::string(64, ']'), 64));
  EXPECT_FALSE(json_depth_within(std::string(65, '{') + std::string(65, '}'), 64));
}

TEST(JsonDepth, MalformedTextGivesABound) {
  EXPECT_EQ(json_nesting_depth("]]]][[", 100), 2u);  // unmatched closers never go below zero
  EXPECT_EQ(json_nesting_depth(R"([["unterminated [[[[)", 100), 2u);
  EXPECT_EQ(json_nesting_depth("[\"\\", 100), 1u);  // a trailing escape reads past nothing
}

}  // namespace
}  // namespace preface
