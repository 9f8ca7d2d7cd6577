// The dashboard in a real browser: a server with a small pool and a short cache TTL gets three rounds of traffic
// (hits, misses, evictions, expiries), then Debian's headless Chromium loads /dashboard with the admin key and the
// test reads the markers the page writes into <body> once it has drawn (server/http/dashboard_page.h): every chart
// has points and the prefix tree has nodes. A screenshot is saved (PREFACE_DASHBOARD_SCREENSHOT, else a temp dir;
// docs/dashboard.png is one). Skipped only when Chromium is not installed (ctest -L browser runs this alone).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "server_harness.h"
#include "support/chromium.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

int to_int(const std::map<std::string, std::string>& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? -1 : std::atoi(it->second.c_str());
}

TEST(DashboardBrowser, ChartsRenderWithDataInHeadlessChromium) {
  if (!std::filesystem::exists(chromium_path())) {
    GTEST_SKIP() << "Chromium not installed (" << chromium_path() << "): apt-get install chromium";
  }
  TestServerConfig config;
  config.server.api_keys = {{"key-a", "alice"}, {"key-b", "bob"}};
  config.server.admin_key = "admin-secret";
  config.engine.kv_cache_bytes = 256u << 10;  // a few dozen blocks: distinct prompts evict
  config.engine.cache_ttl = std::chrono::milliseconds(1500);
  TestServer server(config);
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();

  const std::vector<std::string> stems = {
      "Once upon a time there was a little girl named Lily who loved to play outside in the park with her",
      "The sun was shining and the birds were singing in the big green tree near the house where Tom lived",
      "One day a small dog found a red ball in the garden and he wanted to show it to his best friend",
  };
  for (int round = 0; round < 3; ++round) {  // three history samples, one second apart at least
    for (int i = 0; i < 6; ++i) {
      const std::string key = i % 2 == 0 ? "key-a" : "key-b";
      const json body = {{"prompt", stems[static_cast<size_t>(i) % stems.size()] + " " + std::to_string(round * 10 + i)},
                         {"max_tokens", 4}, {"temperature", 0}};
      httplib::Headers h = {{"Authorization", "Bearer " + key}};
      auto res = c->Post("/v1/completions", h, body.dump(), "application/json");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1700));
  }
  ASSERT_GT(server.engine().counters().n_evictions + server.engine().counters().n_expired, 0);

  const std::filesystem::path dir = temp_dir("dashboard_browser");
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/dashboard#key=admin-secret";
  const std::string dom = run_chromium(url, "--dump-dom", dir / "profile-dom");
  const auto data = body_data(dom);
  ASSERT_FALSE(data.empty()) << "no <body> in Chromium's output:\n" << dom.substr(0, 2000);
  EXPECT_EQ(data.at("ready"), "1") << dom.substr(0, 4000);
  EXPECT_EQ(data.at("error"), "");
  EXPECT_GE(to_int(data, "points"), 3);
  EXPECT_EQ(to_int(data, "charts"), 4) << "a chart was drawn without points";
  EXPECT_GT(to_int(data, "chart-points"), 12);
  EXPECT_GE(to_int(data, "prefixes"), 1);
  EXPECT_NE(dom.find("hits"), std::string::npos);

  const char* env = std::getenv("PREFACE_DASHBOARD_SCREENSHOT");
  const std::filesystem::path shot = env != nullptr && *env != '\0' ? std::filesystem::path(env) : dir / "dashboard.png";
  std::filesystem::remove(shot);
  run_chromium(url, "--screenshot='" + shot.string() + "'", dir / "profile-shot");
  ASSERT_TRUE(std::filesystem::exists(shot)) << "Chromium wrote no screenshot to " << shot;
  std::ifstream png(shot, std::ios::binary);
  char sig[8] = {};
  png.read(sig, 8);
  EXPECT_EQ(std::string(sig + 1, 3), "PNG");
  EXPECT_GT(std::filesystem::file_size(shot), 20000u);
  std::printf("dashboard screenshot: %s\n", shot.string().c_str());
}

}  // namespace
}  // namespace preface::test
