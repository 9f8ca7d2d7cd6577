// Peak resident memory of requests that once cost hundreds of times their body. Measured in the Release build
// only (label `release`): sanitizers change what resident memory measures.
#include <cstring>
#include <fstream>
#include <string>

#include "server_harness.h"

namespace preface::test {
namespace {

// Resident memory now and at its peak since the last reset_peak_rss(), in bytes (Linux /proc/self).
size_t rss_field(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) == 0) return std::stoull(line.substr(std::strlen(name))) * 1024;
  }
  return 0;
}
bool reset_peak_rss() { return static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5"); }

// /tokenize with_pieces once cost ~475x its body (3 MB -> 1.36 GB peak): a DOM of {"id", "piece"} objects.
TEST(ServerMemory, TokenizeWithPiecesIsBoundedByItsBody) {
#ifdef PREFACE_SANITIZED
  GTEST_SKIP() << "sanitizers change what resident memory measures (shadow memory, quarantine); run in the Release "
                  "suite (ctest -L release)";
#endif
  TestServer server;
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto c = server.client();
  std::string text;
  while (text.size() < (3u << 20)) text += "Once upon a time, a little girl ";
  const std::string body = json{{"content", text}, {"with_pieces", true}}.dump();
  const size_t before = rss_field("VmRSS:");
  if (!reset_peak_rss()) GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
  const HttpResult r = post(*c, "/tokenize", body);
  const size_t peak = rss_field("VmHWM:");
  ASSERT_EQ(r.status, 200);
  const json j = r.body_json();
  ASSERT_TRUE(j["tokens"].is_array());
  EXPECT_GT(j["tokens"].size(), 500000u);
  EXPECT_TRUE(j["tokens"][1]["piece"].is_string()) << j["tokens"][1];
  // The bound: 64x the body for server and client together. Nearly all of it is the SentencePiece tokenizer's
  // symbol per character (the same request without pieces peaks the same); the pieces add ~24 bytes per token.
  EXPECT_LT(peak - std::min(peak, before), 64 * body.size()) << "peak " << peak << " before " << before;
}

}  // namespace
}  // namespace preface::test
