// What operators rely on (issue 26 item 6, issue 28 item 6): one log line per request, rejected ones included;
// per-tenant metrics only for the metrics (or admin) key; vLLM's metric names with a model_name label; a scrape
// that never waits for an engine step.
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "engine/fault_backend.h"
#include "metrics_text.h"
#include "server_harness.h"

namespace preface::test {
namespace {

HttpResult get_with_key(httplib::Client& c, const std::string& path, const std::string& key) {
  HttpResult r;
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  if (auto res = c.Get(path.c_str(), h)) {
    r.status = res->status;
    r.body = res->body;
  }
  return r;
}

const json kSmall = {{"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0}};

TEST(ServerOperators, PerTenantSeriesOnlyForTheMetricsOrAdminKey) {
  TestServerConfig cfg;
  cfg.server.api_keys = {{"key-a", "alice"}, {"key-b", "bob"}};
  cfg.server.admin_key = "admin-secret";
  cfg.server.metrics_key = "metrics-secret";
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  for (const char* key : {"key-a", "key-b", "key-b"}) {
    auto c = server.client();
    c->set_bearer_token_auth(key);
    ASSERT_EQ(post(*c, "/v1/completions", kSmall).status, 200);
  }
  auto c = server.client();
  for (const char* key : {"", "key-a", "wrong"}) {
    const HttpResult open = get_with_key(*c, "/metrics", key);
    ASSERT_EQ(open.status, 200);
    EXPECT_EQ(open.body.find("preface_tenant_"), std::string::npos) << "key '" << key << "'";
    EXPECT_EQ(open.body.find("alice"), std::string::npos) << "key '" << key << "'";
    EXPECT_EQ(sample_value(open.body, "preface_completion_tokens_total"), 9) << "aggregates stay open";
  }
  for (const char* key : {"metrics-secret", "admin-secret"}) {
    const HttpResult m = get_with_key(*c, "/metrics", key);
    ASSERT_EQ(m.status, 200);
    const std::string model = ",model_name=\"stories260K.gguf\"}";
    EXPECT_EQ(sample_value(m.body, "preface_tenant_requests_total{tenant=\"alice\"" + model), 1) << key;
    EXPECT_EQ(sample_value(m.body, "preface_tenant_requests_total{tenant=\"bob\"" + model), 2) << key;
    EXPECT_EQ(sample_value(m.body, "preface_tenant_completion_tokens_total{tenant=\"bob\"" + model), 6) << key;
    EXPECT_GT(sample_value(m.body, "preface_tenant_prompt_tokens_total{tenant=\"alice\"" + model), 0) << key;
  }
}

TEST(ServerOperators, VllmNamedSeriesCarryTheModelName) {
  TestServer server;
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto c = server.client();
  const json shared = {{"prompt", std::string(200, 'a')}, {"max_tokens", 3}, {"temperature", 0}};
  ASSERT_EQ(post(*c, "/v1/completions", shared).status, 200);
  ASSERT_EQ(post(*c, "/v1/completions", shared).status, 200);  // a prefix-cache hit
  HttpResult m;
  const std::string model = "{model_name=\"stories260K.gguf\"}";
  ASSERT_TRUE(wait_for([&] {
    m = get(*c, "/metrics");
    // The engine publishes its counters after the step that answered: wait for them too.
    return sample_value(m.body, "vllm:e2e_request_latency_seconds_count" + model) == 2 &&
           sample_value(m.body, "vllm:num_requests_running" + model) == 0 &&
           sample_value(m.body, "vllm:generation_tokens_total" + model) == 6 &&
           sample_value(m.body, "vllm:kv_cache_usage_perc" + model) == 0;
  })) << m.body;
  EXPECT_EQ(sample_value(m.body, "preface_model_info" + model), 1);
  EXPECT_EQ(sample_value(m.body, "vllm:time_to_first_token_seconds_count" + model), 2);
  EXPECT_EQ(sample_value(m.body, "vllm:num_requests_running" + model), 0);
  EXPECT_EQ(sample_value(m.body, "vllm:num_requests_waiting" + model), 0);
  EXPECT_EQ(sample_value(m.body, "vllm:kv_cache_usage_perc" + model), 0);
  EXPECT_EQ(sample_value(m.body, "vllm:prefix_cache_queries_total" + model),
            sample_value(m.body, "preface_prefix_cache_queries_tokens_total"));
  EXPECT_EQ(sample_value(m.body, "vllm:prefix_cache_hits_total" + model),
            sample_value(m.body, "preface_prefix_cache_hits_tokens_total"));
  EXPECT_GT(sample_value(m.body, "vllm:prefix_cache_hits_total" + model), 0);
  EXPECT_EQ(sample_value(m.body, "vllm:generation_tokens_total" + model), 6);
  EXPECT_EQ(sample_value(m.body, "vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"stories260K.gguf\"}"),
            2);
  EXPECT_NE(m.body.find("# TYPE vllm:time_to_first_token_seconds histogram\n"), std::string::npos);
}

// The scrape reads the counters the engine publishes after each step: a step in progress (here 1.5 s long)
// does not delay it.
TEST(ServerOperators, ScrapeDoesNotWaitForAnEngineStep) {
  TestServerConfig cfg;
  cfg.backend = [](model::Model& m, const engine::EngineConfig& c) -> std::unique_ptr<engine::Backend> {
    auto b = std::make_unique<FaultBackend>(m, c, -1);
    b->forward_delay = std::chrono::milliseconds(1500);
    return b;
  };
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto slow = std::async(std::launch::async, [&] {
    auto c = server.client();
    return post(*c, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}}).status;
  });
  ASSERT_TRUE(wait_for([&] { return server.engine().counters().n_running == 1; }));
  auto c = server.client();
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(get(*c, "/metrics").status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  }
  EXPECT_EQ(slow.get(), 200);
}

TEST(ServerOperators, EveryRequestIsLoggedOnceRejectedOnesIncluded) {
  std::mutex mu;
  std::vector<std::string> lines;
  TestServerConfig cfg;
  cfg.server.log_requests = true;
  cfg.server.log_sink = [&](const std::string& line) {
    std::lock_guard lock(mu);
    lines.push_back(line);
  };
  cfg.server.api_keys = {{"key-a", "alice"}};
  TestServer server(cfg);
  if (!server.ok()) GTEST_FAIL() << "needs ../shared/models/stories260K.gguf";
  auto c = server.client();
  c->set_bearer_token_auth("key-a");
  httplib::Headers id{{"X-Request-Id", "trace-42"}};
  auto res = c->Post("/v1/completions", id, kSmall.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("X-Request-Id"), "trace-42");
  json streamed = kSmall;
  streamed["stream"] = true;
  EXPECT_EQ(post(*c, "/v1/completions", streamed).status, 200);
  EXPECT_EQ(post(*c, "/v1/completions", "{not json").status, 400);
  EXPECT_EQ(get(*c, "/nothing").status, 404);
  EXPECT_EQ(get(*c, "/x%0Areq%2099%20GET%20/forged").status, 404);  // a decoded newline must not start a line
  auto anonymous = server.client();
  EXPECT_EQ(post(*anonymous, "/v1/completions", kSmall).status, 401);
  const auto snapshot = [&] {
    std::lock_guard lock(mu);
    return lines;
  };
  ASSERT_TRUE(wait_for([&] { return snapshot().size() >= 6; })) << snapshot().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nothing more comes
  const std::vector<std::string> got = snapshot();
  ASSERT_EQ(got.size(), 6u);
  for (const std::string& l : got) EXPECT_EQ(l.find('\n'), std::string::npos) << l;
  const auto line_with = [&](const std::string& what) {
    for (const std::string& l : got) {
      if (l.find(what) != std::string::npos) return l;
    }
    return std::string();
  };
  const std::string ok = line_with("req trace-42 POST /v1/completions status=200");
  EXPECT_NE(ok, "");
  EXPECT_NE(ok.find("tenant=alice"), std::string::npos) << ok;
  EXPECT_NE(ok.find("client=127.0.0.1"), std::string::npos) << ok;
  EXPECT_NE(ok.find("generated=3"), std::string::npos) << ok;
  EXPECT_NE(ok.find("latency="), std::string::npos) << ok;
  EXPECT_NE(line_with("status=200 client=127.0.0.1 tenant=alice"), "");
  const std::string bad = line_with("status=400");
  EXPECT_NE(bad.find("tenant=alice"), std::string::npos) << bad;
  EXPECT_NE(bad.find("reason=\""), std::string::npos) << bad;
  EXPECT_NE(line_with("GET /nothing status=404"), "");
  EXPECT_NE(line_with("GET /x?req?99?GET?/forged status=404"), "");
  const std::string denied = line_with("status=401");
  EXPECT_NE(denied.find("tenant=-"), std::string::npos) << denied;
  EXPECT_NE(denied.find("API key"), std::string::npos) << denied;
}

}  // namespace
}  // namespace preface::test
