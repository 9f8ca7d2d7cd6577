// The cache's savings and stats over HTTP: usage.cache_savings in both APIs, the per-tenant cache metrics, and
// GET /v1/cache/stats (the dashboard's data) with its visibility rules: the admin sees every tenant, a tenant only
// its own prefixes, no key gets 401. The page and Chart.js are served without a key. (The page in a real browser:
// server_dashboard_browser_test.)
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "server/observability/cache_stats.h"
#include "server_harness.h"

namespace preface::test {
namespace {

constexpr const char* kAlicePrompt =
    "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends.";
constexpr const char* kBobPrompt =
    "The sun was shining and the birds were singing in the big green tree near the house where Tom lived.";

TestServerConfig keyed_config() {
  TestServerConfig c;
  c.server.api_keys = {{"key-a", "alice"}, {"key-b", "bob"}};
  c.server.admin_key = "admin-secret";
  return c;
}

httplib::Headers bearer(const std::string& key) {
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  return h;
}

HttpResult post_as(httplib::Client& c, const std::string& key, const std::string& path, const json& body) {
  HttpResult r;
  if (auto res = c.Post(path.c_str(), bearer(key), body.dump(), "application/json")) {
    r.status = res->status;
    r.body = res->body;
  }
  return r;
}

HttpResult get_as(httplib::Client& c, const std::string& key, const std::string& path) {
  HttpResult r;
  if (auto res = c.Get(path.c_str(), bearer(key))) {
    r.status = res->status;
    r.body = res->body;
    r.headers = res->headers;
  }
  return r;
}

json completion(const std::string& prompt) { return {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}}; }

// Every "text" in a prefix tree (JSON), depth first.
void collect_text(const json& nodes, std::string& out) {
  for (const json& n : nodes) {
    out += n["text"].get<std::string>() + "\n";
    collect_text(n["children"], out);
  }
}

TEST(CacheSavings, UsageReportsSkippedPrefillInBothApis) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  ASSERT_EQ(post(*c, "/v1/completions", completion(kAlicePrompt)).status, 200);
  const HttpResult second = post(*c, "/v1/completions", completion(kAlicePrompt));
  ASSERT_EQ(second.status, 200) << second.body;
  const json usage = second.body_json()["usage"];
  const int64_t cached = usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  ASSERT_GT(cached, 0);
  const json& savings = usage["cache_savings"];
  EXPECT_EQ(savings["tokens"].get<int64_t>(), cached);
  const engine::EngineCounters counters = server.engine().counters();
  ASSERT_GT(counters.n_params, 0u);
  EXPECT_DOUBLE_EQ(savings["flops"].get<double>(), 2.0 * static_cast<double>(counters.n_params) * cached);
  EXPECT_GT(counters.prefill_tokens_per_s, 0);  // the first request's prefill step was measured
  EXPECT_GT(savings["seconds"].get<double>(), 0);

  const json msg = {{"model", "m"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", kBobPrompt}}}}};
  ASSERT_EQ(post(*c, "/v1/messages", msg).status, 200);
  const HttpResult hit = post(*c, "/v1/messages", msg);
  ASSERT_EQ(hit.status, 200) << hit.body;
  const json a = hit.body_json()["usage"];
  EXPECT_GT(a["cache_read_input_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(a["cache_savings"]["tokens"].get<int64_t>(), a["cache_read_input_tokens"].get<int64_t>());
  EXPECT_GT(a["cache_savings"]["flops"].get<double>(), 0);

  // A miss (a namespace of its own, so not even the BOS block's rows are shared) saves nothing.
  json cold = completion(kAlicePrompt);
  cold["cache_salt"] = "fresh";
  const HttpResult miss = post(*c, "/v1/completions", cold);
  ASSERT_EQ(miss.status, 200);
  EXPECT_EQ(miss.body_json()["usage"]["cache_savings"]["tokens"].get<int64_t>(), 0);
  EXPECT_EQ(miss.body_json()["usage"]["cache_savings"]["flops"].get<double>(), 0);
}

TEST(CacheSavings, CacheFalseComputesThePromptColdInBothApis) {
  TestServer server;
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  ASSERT_EQ(post(*c, "/v1/completions", completion(kAlicePrompt)).status, 200);
  json cold = completion(kAlicePrompt);
  cold["cache"] = false;
  const HttpResult r = post(*c, "/v1/completions", cold);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body_json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  EXPECT_GT(post(*c, "/v1/completions", completion(kAlicePrompt)).body_json()["usage"]["prompt_tokens_details"]
                ["cached_tokens"].get<int>(), 0);  // the cache is still there

  json msg = {{"model", "m"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", kBobPrompt}}}}};
  ASSERT_EQ(post(*c, "/v1/messages", msg).status, 200);
  msg["cache_prompt"] = false;  // llama.cpp's name
  const HttpResult a = post(*c, "/v1/messages", msg);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.body_json()["usage"]["cache_read_input_tokens"].get<int>(), 0);
  msg["cache"] = "no";
  EXPECT_EQ(post(*c, "/v1/messages", msg).status, 400);
}

TEST(CacheStats, TenantsSeeTheirOwnPrefixesAndTheAdminSeesAll) {
  TestServer server(keyed_config());
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(post_as(*c, "key-a", "/v1/completions", completion(kAlicePrompt)).status, 200);
    ASSERT_EQ(post_as(*c, "key-b", "/v1/completions", completion(kBobPrompt)).status, 200);
  }
  EXPECT_EQ(get_as(*c, "", "/v1/cache/stats").status, 401);
  EXPECT_EQ(get_as(*c, "wrong", "/v1/cache/stats").status, 401);

  const HttpResult alice = get_as(*c, "key-a", "/v1/cache/stats");
  ASSERT_EQ(alice.status, 200) << alice.body;
  const json a = alice.body_json();
  EXPECT_EQ(a["scope"], "tenant");
  EXPECT_EQ(a["tenant"], "alice");
  EXPECT_EQ(a["totals"]["requests"].get<int>(), 2);
  EXPECT_EQ(a["totals"]["hit_requests"].get<int>(), 1);
  EXPECT_GT(a["totals"]["cached_tokens"].get<int>(), 0);
  EXPECT_GT(a["totals"]["hit_ratio"].get<double>(), 0);
  ASSERT_GE(a["series"].size(), 1u);
  EXPECT_EQ(a["pool"]["total"].get<int>(), server.engine().counters().n_blocks_total);
  std::string alice_text;
  collect_text(a["prefixes"], alice_text);
  EXPECT_NE(alice_text.find("Lily"), std::string::npos) << alice_text;
  EXPECT_EQ(alice_text.find("birds"), std::string::npos) << "alice sees bob's prefix: " << alice_text;
  EXPECT_EQ(alice.body.find("birds"), std::string::npos);
  EXPECT_FALSE(a["prefixes"][0].contains("tenant"));  // tenants are not named to tenants

  const json b = get_as(*c, "key-b", "/v1/cache/stats").body_json();
  std::string bob_text;
  collect_text(b["prefixes"], bob_text);
  EXPECT_NE(bob_text.find("birds"), std::string::npos) << bob_text;
  EXPECT_EQ(bob_text.find("Lily"), std::string::npos) << bob_text;

  const HttpResult admin = get_as(*c, "admin-secret", "/v1/cache/stats");
  ASSERT_EQ(admin.status, 200) << admin.body;
  const json all = admin.body_json();
  EXPECT_EQ(all["scope"], "all");
  EXPECT_EQ(all["totals"]["requests"].get<int>(), 4);
  std::string all_text;
  collect_text(all["prefixes"], all_text);
  EXPECT_NE(all_text.find("Lily"), std::string::npos);
  EXPECT_NE(all_text.find("birds"), std::string::npos);
  std::set<std::string> owners;
  for (const json& n : all["prefixes"]) owners.insert(n["tenant"].get<std::string>());
  EXPECT_EQ(owners, (std::set<std::string>{"alice", "bob"}));
  EXPECT_GE(all["prefixes"][0]["hits"].get<int>(), 1);

  // The per-tenant metrics: only for a scrape with the admin (or metrics) key.
  EXPECT_EQ(get(*c, "/metrics").body.find("preface_tenant_cache_read_tokens_total"), std::string::npos);
  const std::string metrics = get_as(*c, "admin-secret", "/metrics").body;
  EXPECT_NE(metrics.find("preface_tenant_cache_read_tokens_total{tenant=\"alice\",model_name="), std::string::npos);
  EXPECT_NE(metrics.find("preface_tenant_cache_write_tokens_total{tenant=\"bob\",model_name="), std::string::npos);
  EXPECT_NE(metrics.find("preface_tenant_cache_saved_flops_total{tenant=\"alice\",model_name="), std::string::npos);
  EXPECT_NE(metrics.find("preface_tenant_cache_hit_ratio{tenant=\"bob\",model_name=\"stories260K.gguf\"} 0."),
            std::string::npos);
  EXPECT_NE(metrics.find("preface_prefill_tokens_per_second "), std::string::npos);
}

TEST(CacheStats, PageAndChartJsNeedNoKey) {
  TestServer server(keyed_config());
  if (!server.ok()) GTEST_SKIP() << "stories260K.gguf not found";
  auto c = server.client();
  const HttpResult page = get(*c, "/dashboard");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("/v1/cache/stats"), std::string::npos);
  EXPECT_NE(page.body.find("/v1/cache/explain"), std::string::npos);
  const HttpResult js = get(*c, "/dashboard/chart.js");
  if (std::filesystem::exists("/usr/share/javascript/chart.js")) {
    EXPECT_EQ(js.status, 200);
    EXPECT_NE(js.body.find("Chart"), std::string::npos);
  } else {
    EXPECT_EQ(js.status, 404);
  }
}

TEST(CacheStatsUnit, TotalsHistoryAndTenantBound) {
  server::CacheStats stats(std::chrono::milliseconds(0));  // a sample per event
  engine::EngineCounters counters;
  counters.n_blocks_total = 8;
  counters.n_blocks_free = 8;
  server::GenerationSummary hit, miss;
  hit.stats.n_prompt_tokens = 40;
  hit.stats.n_cached_tokens = 32;
  hit.stats.n_generated_tokens = 1;
  hit.stats.first_token_ms = 2;
  hit.stats.saved_flops = 100;
  miss.stats.n_prompt_tokens = 40;
  miss.stats.n_written_tokens = 32;
  miss.stats.n_generated_tokens = 1;
  miss.stats.first_token_ms = 10;
  stats.on_generation("t", miss, counters);
  stats.on_generation("t", hit, counters);
  const server::TenantCacheTotals t = stats.totals(std::string("t"));
  EXPECT_EQ(t.n_requests, 2u);
  EXPECT_EQ(t.n_hit_requests, 1u);
  EXPECT_EQ(t.n_cached_tokens, 32u);
  EXPECT_EQ(t.n_written_tokens, 32u);
  EXPECT_DOUBLE_EQ(t.hit_ratio(), 32.0 / 80.0);
  EXPECT_DOUBLE_EQ(t.ttft_hit_ms, 2);
  EXPECT_DOUBLE_EQ(t.ttft_miss_ms, 10);
  EXPECT_EQ(stats.series_json(std::string("t")).size(), 2u);
  EXPECT_EQ(stats.series_json(std::string("nobody"))[0]["requests"].get<int>(), 0);

  for (size_t i = 0; i < server::CacheStats::kMaxTenants + 10; ++i) {
    std::string name = "x";
    name += std::to_string(i);
    stats.on_generation(name, hit, counters);
  }
  std::string prom;
  stats.render_prometheus(nullptr, prom, true, "m");
  EXPECT_NE(prom.find("tenant=\"(other)\""), std::string::npos);
  std::string late = "tenant=\"x";
  late += std::to_string(server::CacheStats::kMaxTenants + 5);
  EXPECT_EQ(prom.find(late + "\""), std::string::npos);
  EXPECT_EQ(stats.totals(std::nullopt).n_requests, server::CacheStats::kMaxTenants + 12);
  EXPECT_LE(stats.series_json(std::nullopt).size(), server::CacheStats::kMaxSamples);
}

}  // namespace
}  // namespace preface::test
