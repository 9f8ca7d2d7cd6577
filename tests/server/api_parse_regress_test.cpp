// Regression tests for findings of the API request fuzz targets (fuzz/openai_request_fuzz.cpp,
// fuzz/anthropic_request_fuzz.cpp); the inputs are kept in fuzz/regress/<target>/.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "server/api/api_error.h"

namespace preface::server {
namespace {

int status_of(const std::string& body) {
  try {
    (void)parse_json_object(body);
  } catch (const ApiError& e) {
    return e.status;
  } catch (...) {
    return -1;  // anything but ApiError escapes the HTTP layer's error handling
  }
  return 0;
}

// A JSON number beyond double's range makes nlohmann::json::parse throw out_of_range (406), not parse_error,
// and parse_json_object let it escape instead of answering 400. openai_request input: {"prompt":1e309...}.
TEST(ApiParseRegress, NumberOverflowIs400) {
  EXPECT_EQ(status_of(R"({"prompt":1e309})"), 400);
  EXPECT_EQ(status_of(R"({"max_tokens":-1e400,"messages":[]})"), 400);
  EXPECT_EQ(status_of(R"({"a":[1,2,1e999]})"), 400);
}

// The parser's depth callback made nlohmann scan the enclosing container after every value closed: an ignored
// field holding 320k empty objects (960 KB) took 32 s of a core, a 16 MiB body hours (issue 41). Linear now:
// the bound below is two orders of magnitude above a linear parse, even under sanitizers, and far below the
// quadratic one.
TEST(ApiParseRegress, ManyValuesInOneContainerParseInLinearTime) {
  std::string body = R"({"prompt":"a","ignored":[)";
  for (int i = 0; i < 320000; ++i) body += i ? ",{}" : "{}";
  body += "]}";
  const auto start = std::chrono::steady_clock::now();
  const nlohmann::json j = parse_json_object(body);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(j["ignored"].size(), 320000u);
  EXPECT_LT(seconds, 8.0);
}

}  // namespace
}  // namespace preface::server
