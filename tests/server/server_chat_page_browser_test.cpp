// The chat page (server/http/chat_page.h) in a real browser: Debian's headless Chromium opens / with a key and
// two messages to send; the page gets both replies from /v1/chat/completions and shows their cache counts,
// and the second turn's prompt is read from the prefix cache (the first turn's prompt and reply). The page is
// open; the key it sends is checked by the API. Whole replies (#stream=0): headless Chromium's virtual clock waits
// for a pending request but runs on between a stream's pieces, so a slow (sanitized) server would be cut off; the
// streamed path is the same page code after the read loop. Skipped only when Chromium is not installed.
#include <gtest/gtest.h>

#include <filesystem>

#include "server_harness.h"
#include "support/chromium.h"

namespace preface::test {
namespace {

TEST(ChatPageBrowser, TwoTurnsStreamAndTheSecondReadsTheCache) {
  if (!std::filesystem::exists(chromium_path())) {
    GTEST_SKIP() << "Chromium not installed (" << chromium_path() << "): apt-get install chromium";
  }
  TestServerConfig config;
  config.server.api_keys = {{"key-a", "alice"}};
  TestServer server(config);
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  EXPECT_EQ(get(*c, "/").status, 200);  // open: the page carries no data

  const std::filesystem::path dir = temp_dir("chat_page_browser");
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/";
  const std::string dom = run_chromium(
      base + "#key=key-a&max=24&stream=0&say=Once%20upon%20a%20time%20there%20was%20a%20little%20girl|Tell%20me%20more",
      "--dump-dom", dir / "profile", 30000);
  const auto data = body_data(dom);
  ASSERT_FALSE(data.empty()) << "no <body> in Chromium's output:\n" << dom.substr(0, 2000);
  EXPECT_EQ(data.at("ready"), "1") << dom.substr(0, 4000);
  EXPECT_EQ(data.at("error"), "");
  EXPECT_EQ(data.at("replies"), "2");
  EXPECT_GT(std::atoi(data.at("cached").c_str()), 0) << "the second turn read nothing from the cache";
  EXPECT_FALSE(data.at("ttft").empty());
  EXPECT_NE(dom.find(" cached"), std::string::npos);

  // Without the key the API refuses, and the page says why.
  const auto refused = body_data(run_chromium(base + "#max=8&stream=0&say=Hello", "--dump-dom", dir / "profile-nokey", 30000));
  ASSERT_FALSE(refused.empty());
  EXPECT_EQ(refused.at("replies"), "0");
  EXPECT_FALSE(refused.at("error").empty());
}

}  // namespace
}  // namespace preface::test
