// Server::drain (serve's SIGTERM, --drain-seconds; issue 26 item 6): with 8 streams in flight it stops accepting,
// lets them finish within the grace period, or cancels them after it with a final error event; no KV block stays
// held either way (TestServer::stop checks the pool).
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "engine/fault_backend.h"
#include "server_harness.h"

namespace preface::test {
namespace {

constexpr int kStreams = 8;

TestServerConfig slow_steps() {
  TestServerConfig cfg;
  cfg.backend = [](model::Model& m, const engine::EngineConfig& c) -> std::unique_ptr<engine::Backend> {
    auto b = std::make_unique<FaultBackend>(m, c, -1);
    b->forward_delay = std::chrono::milliseconds(20);  // one step (all streams batched): 20 ms
    return b;
  };
  return cfg;
}

// kStreams streamed completions of `max_tokens` each, started on their own threads; returns once all run.
std::vector<std::future<HttpResult>> start_streams(TestServer& server, int max_tokens) {
  std::vector<std::future<HttpResult>> out;
  for (int i = 0; i < kStreams; ++i) {
    out.push_back(std::async(std::launch::async, [&server, max_tokens, i] {
      auto c = server.client();
      return post(*c, "/v1/completions",
                  json{{"prompt", "Once upon a time " + std::to_string(i)},
                       {"max_tokens", max_tokens},
                       {"ignore_eos", true},
                       {"stream", true}});
    }));
  }
  EXPECT_TRUE(wait_for([&] { return server.engine().counters().n_running == kStreams; })) << "streams not running";
  return out;
}

TEST(ServerDrain, InFlightStreamsFinishWithinTheGracePeriod) {
  TestServer server(slow_steps());
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto streams = start_streams(server, 40);  // ~1 s of steps
  auto drained = std::async(std::launch::async, [&] { return server.server().drain(std::chrono::seconds(30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto late = server.client();
  late->set_connection_timeout(std::chrono::seconds(1));
  EXPECT_EQ(get(*late, "/v1/models").status, -1) << "a new connection was accepted while draining";
  for (auto& f : streams) {
    const HttpResult r = f.get();
    EXPECT_EQ(r.status, 200);
    bool done = false;
    const std::vector<json> chunks = openai_chunks(r.body, &done);
    EXPECT_TRUE(done) << r.body;
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length") << r.body;
    EXPECT_EQ(r.body.find("shutting down"), std::string::npos) << r.body;
  }
  EXPECT_EQ(drained.get(), 0) << "streams cancelled although they finished within the grace period";
  EXPECT_EQ(server.engine().counters().n_blocks_in_use, 0);
}

TEST(ServerDrain, StreamsStillRunningAfterTheGracePeriodGetAFinalEvent) {
  TestServer server(slow_steps());
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto streams = start_streams(server, 400);  // ~8 s of steps
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(server.server().drain(std::chrono::milliseconds(300)), kStreams);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  for (auto& f : streams) {
    const HttpResult r = f.get();
    EXPECT_EQ(r.status, 200);
    bool done = false;
    const std::vector<json> chunks = openai_chunks(r.body, &done);
    EXPECT_TRUE(done) << r.body;
    ASSERT_FALSE(chunks.empty());
    EXPECT_NE(chunks.back().dump().find("shutting down"), std::string::npos) << r.body;
  }
  EXPECT_TRUE(wait_for([&] { return server.engine().counters().n_blocks_in_use == 0; }));
}

}  // namespace
}  // namespace preface::test
