// Request limits: the admission limit (--max-queued-requests / --max-in-flight) under a burst, and the per-request
// limits on messages, prompt tokens and max_tokens.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <thread>

#include "server_harness.h"

namespace preface::test {
namespace {

TEST(ServerLimits, BurstBeyondTheQueueLimitGets503AndTheServerRecovers) {
  TestServerConfig cfg;
  cfg.server.limits.max_in_flight = 4;
  cfg.server.n_http_threads = 40;  // every client gets a thread at once, so admission alone decides
  cfg.server.max_connections_per_client = 40;  // all 32 come from 127.0.0.1: no 429 from the per-address limit
  TestServer srv(cfg);
  if (!srv.ok()) GTEST_SKIP() << "stories260K.gguf not available";
  constexpr int kClients = 32;
  // Long generations, so the 4 admitted ones are still running when the other 28 arrive.
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true}, {"temperature", 0}};
  std::vector<HttpResult> results(kClients);
  std::barrier start(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = srv.client();
      start.arrive_and_wait();
      results[static_cast<size_t>(i)] = post(*c, "/v1/completions", body);
    });
  }
  for (auto& t : threads) t.join();
  int n_ok = 0, n_busy = 0;
  for (const HttpResult& r : results) {
    if (r.status == 200) ++n_ok;
    if (r.status == 503) {
      ++n_busy;
      EXPECT_TRUE(r.headers.count("Retry-After")) << "a 503 carries Retry-After";
      EXPECT_EQ(r.body_json()["error"]["type"], "server_error") << r.body;
    }
  }
  EXPECT_EQ(n_ok, 4);
  EXPECT_EQ(n_busy, kClients - 4);
  // Recovery: the next request is served at once.
  auto c = srv.client();
  const HttpResult after = post(*c, "/v1/completions", json{{"prompt", "Hello"}, {"max_tokens", 2}});
  EXPECT_EQ(after.status, 200) << after.body;
}

TEST(ServerLimits, MessagesPromptTokensAndMaxTokensAreBounded) {
  TestServerConfig cfg;
  cfg.server.limits.max_messages = 3;
  cfg.server.limits.max_prompt_tokens = 60;
  cfg.server.limits.max_output_tokens = 50;
  TestServer srv(cfg);
  if (!srv.ok()) GTEST_SKIP() << "stories260K.gguf not available";
  auto c = srv.client();
  json msgs = json::array();
  for (int i = 0; i < 4; ++i) msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "Hi"}});
  msgs.push_back({{"role", "user"}, {"content", "Hi"}});
  EXPECT_EQ(post(*c, "/v1/chat/completions", json{{"messages", msgs}, {"max_tokens", 1}}).status, 400);
  EXPECT_EQ(post(*c, "/v1/messages", json{{"messages", msgs}, {"max_tokens", 1}}).status, 400);
  const json one = json::array({{{"role", "user"}, {"content", "Hi"}}});
  EXPECT_EQ(post(*c, "/v1/messages", json{{"messages", one}, {"max_tokens", 51}}).status, 400);
  const HttpResult ok = post(*c, "/v1/messages", json{{"messages", one}, {"max_tokens", 2}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(post(*c, "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 51}}).status, 400);
  // Without max_tokens, OpenAI's default is capped at the limit instead of the context.
  const HttpResult dflt = post(*c, "/v1/completions", json{{"prompt", "Hi"}, {"ignore_eos", true}});
  ASSERT_EQ(dflt.status, 200) << dflt.body;
  EXPECT_EQ(dflt.body_json()["usage"]["completion_tokens"], 50);
  const std::string long_prompt =
      "Once upon a time there was a little girl named Lily. She loved to play outside in the park.";
  const HttpResult too_long = post(*c, "/v1/completions", json{{"prompt", long_prompt + long_prompt + long_prompt}, {"max_tokens", 1}});
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(too_long.body.find("at most 60"), std::string::npos) << too_long.body;
}

}  // namespace
}  // namespace preface::test
