// `preface verify` against a real `preface serve --verify-fraction 1`: the hit's and the cold ("cache": false)
// answer's logprobs are identical (exit 0, "match"), and the server's own shadow verification counts the hits it
// recomputed (preface_cache_verify_total{result="match"}). A --bypass that does not bypass is reported.
#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <regex>
#include <thread>

#include "cli_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

constexpr const char* kPrompt =
    "Once upon a time there was a little girl named Lily who loved to play outside in the park with her friends";

// The value of preface_cache_verify_total{result=R} on /metrics, or -1.
int verify_count(const std::string& url, const std::string& result) {
  httplib::Client c(url);
  const auto res = c.Get("/metrics");
  if (!res) return -1;
  std::smatch m;
  const std::regex re("preface_cache_verify_total\\{result=\"" + result + "\"\\} ([0-9]+)");
  return std::regex_search(res->body, m, re) ? std::stoi(m[1].str()) : -1;
}

TEST(CliVerify, HitEqualsColdFromOutsideAndTheServerCountsItsShadows) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  ServeProcess srv({"-m", model.string(), "--quiet", "--threads", "1", "--verify-fraction", "1"}, "verify");
  ASSERT_FALSE(srv.url().empty()) << srv.log();

  const CliResult r = run_preface({"verify", "--url", srv.url(), "-p", kPrompt});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("match: the first generated position's logprobs are identical"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cold: 0 cached tokens"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("did not hit"), std::string::npos) << r.out;

  // The second request hit; its shadow runs once the server is idle.
  int matched = 0;
  for (int i = 0; i < 200 && matched < 1; ++i) {
    matched = verify_count(srv.url(), "match");
    if (matched < 1) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_GE(matched, 1) << srv.log();
  EXPECT_EQ(verify_count(srv.url(), "mismatch"), 0);

  const CliResult no_bypass = run_preface({"verify", "--url", srv.url(), "-p", kPrompt, "--bypass", "{}"});
  EXPECT_EQ(no_bypass.exit_code, 0) << no_bypass.out << no_bypass.err;
  EXPECT_NE(no_bypass.out.find("--bypass may be wrong"), std::string::npos) << no_bypass.out;

  const CliResult bad = run_preface({"verify", "--url", srv.url(), "-p", kPrompt, "--bypass", "[1]"});
  EXPECT_NE(bad.exit_code, 0);
}

TEST(CliVerify, UnreachableServerIsExitTwo) {
  const CliResult r = run_preface({"verify", "--url", "http://127.0.0.1:1", "-p", "x", "--timeout", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("no answer"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace preface::test
