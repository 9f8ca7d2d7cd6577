// /metrics: the Prometheus exposition has the required families with values that follow the traffic, and
// `promtool check metrics` (Debian's prometheus package) accepts it.
#include "metrics_text.h"
#include "server_harness.h"

namespace preface::test {
namespace {

// promtool accepts `text`, its only complaint the vLLM aliases' ':' (skipped, and said, without promtool).
void expect_promtool_accepts(const std::string& text, const std::string& name) {
  int status = -1;
  const auto output = promtool_check(text, name, status);
  if (!output) {
    GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus'; scripts/setup installs it): the "
                    "exposition was not linted";
  }
  int n_colon = 0;
  const std::string other = promtool_complaints_besides_vllm_names(*output, n_colon);
  EXPECT_TRUE(status == 0 || n_colon > 0) << "promtool check metrics:\n" << *output;
  EXPECT_EQ(other, "") << "promtool check metrics:\n" << *output;
}

TEST(ServerMetrics, FamiliesFollowTrafficAndPromtoolAccepts) {
  TestServerConfig cfg;
  cfg.server.debug_invariants = true;  // the preface_kv_invariants_ok gauge
  TestServer srv(cfg);
  ASSERT_TRUE(srv.ok());
  auto c = srv.client();
  const json req = {{"prompt", std::string(200, 'a')}, {"max_tokens", 8}, {"temperature", 0}};
  const HttpResult first = post(*c, "/v1/completions", req);
  ASSERT_EQ(first.status, 200);
  const int n_prompt = first.body_json()["usage"]["prompt_tokens"];
  json streamed = req;
  streamed["stream"] = true;
  ASSERT_EQ(post(*c, "/v1/completions", streamed).status, 200);
  EXPECT_EQ(get(*c, "/nothing").status, 404);
  // Responses are counted after they are written and engine counters are published after each step, so the
  // exposition catches up with what the client saw a moment later.
  HttpResult m;
  EXPECT_TRUE(wait_for([&] {
    m = get(*c, "/metrics");
    return sample_value(m.body, "preface_http_responses_total{route=\"other\",code=\"404\"}") == 1 &&
           sample_value(m.body, "preface_http_responses_total{route=\"/v1/completions\",code=\"200\"}") == 2 &&
           sample_value(m.body, "preface_kv_blocks{state=\"used\"}") == 0;
  })) << m.body;
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.headers.find("Content-Type")->second.rfind("text/plain; version=0.0.4", 0), 0u);
  const std::string& text = m.body;

  for (const char* family :
       {"preface_time_to_first_token_seconds", "preface_inter_token_latency_seconds", "preface_request_duration_seconds",
        "preface_prefix_cache_queries_tokens_total", "preface_prefix_cache_hits_tokens_total", "preface_kv_blocks",
        "preface_kv_evictions_total", "preface_kv_expired_total", "preface_preemptions_total", "preface_requests_waiting",
        "preface_prompt_tokens_total", "preface_generation_tokens_total", "preface_http_responses_total"}) {
    EXPECT_NE(text.find("# TYPE " + std::string(family) + " "), std::string::npos) << family;
  }
  EXPECT_EQ(sample_value(text, "preface_http_responses_total{route=\"/v1/completions\",code=\"200\"}"), 2);
  EXPECT_EQ(sample_value(text, "preface_http_responses_total{route=\"other\",code=\"404\"}"), 1);
  EXPECT_EQ(sample_value(text, "preface_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(sample_value(text, "preface_inter_token_latency_seconds_count"), 2 * 7);
  EXPECT_EQ(sample_value(text, "preface_generation_tokens_total"), 16);
  // The second request's prompt came from the cache: its full blocks, and the rows of the block holding the
  // last prompt token when the first request (n_prompt + 7 tokens computed) filled that block.
  EXPECT_EQ(sample_value(text, "preface_prompt_tokens_total"), 2 * n_prompt);
  const int n_full = (n_prompt - 1) / 16 * 16;
  const int expected_hits = n_full + 16 <= n_prompt + 7 ? n_prompt - 1 : n_full;
  EXPECT_EQ(sample_value(text, "preface_prefix_cache_hits_tokens_total"), expected_hits);
  EXPECT_EQ(sample_value(text, "preface_kv_blocks{state=\"used\"}"), 0);
  EXPECT_NE(text.find("# TYPE preface_kv_invariants_ok gauge\n"), std::string::npos);
  EXPECT_EQ(sample_value(text, "preface_kv_invariants_ok"), 1);
  EXPECT_GT(sample_value(text, "preface_kv_blocks{state=\"cached\"}"), 0);
  EXPECT_EQ(sample_value(text, "preface_kv_blocks{state=\"used\"}") + sample_value(text, "preface_kv_blocks{state=\"cached\"}") +
                sample_value(text, "preface_kv_blocks{state=\"free\"}"),
            sample_value(text, "preface_kv_blocks_capacity"));

  EXPECT_EQ(repeated_metadata(text), std::vector<std::string>{});
  EXPECT_EQ(untyped_or_split_families(text), std::vector<std::string>{});
  expect_promtool_accepts(text, "server_metrics");
}

// With tenant keys and a scrape that may read the per-tenant series, each family is declared once (HELP, TYPE)
// and its samples follow it: the per-tenant series are rendered in one place, labelled tenant and model_name.
TEST(ServerMetrics, PerTenantFamiliesAreDeclaredOnceWithTenantAndModelName) {
  TestServerConfig cfg;
  cfg.server.api_keys = {{"key-a", "alice"}, {"key-b", "bob"}};
  cfg.server.metrics_key = "metrics-secret";
  cfg.server.debug_invariants = true;
  TestServer srv(cfg);
  ASSERT_TRUE(srv.ok());
  const json req = {{"prompt", std::string(120, 'b')}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}};
  for (const char* key : {"key-a", "key-b", "key-b"}) {
    auto c = srv.client();
    c->set_bearer_token_auth(key);
    ASSERT_EQ(post(*c, "/v1/completions", req).status, 200);
  }
  auto c = srv.client();
  c->set_bearer_token_auth("metrics-secret");
  const std::string bob = "{tenant=\"bob\",model_name=\"stories260K.gguf\"}";
  const std::string alice = "{tenant=\"alice\",model_name=\"stories260K.gguf\"}";
  HttpResult m;
  ASSERT_TRUE(wait_for([&] {
    m = get(*c, "/metrics");
    return sample_value(m.body, "preface_tenant_requests_total" + bob) == 2;
  })) << m.body;
  const std::string& text = m.body;
  EXPECT_EQ(repeated_metadata(text), std::vector<std::string>{});
  EXPECT_EQ(untyped_or_split_families(text), std::vector<std::string>{});
  EXPECT_EQ(sample_value(text, "preface_tenant_requests_total" + alice), 1);
  EXPECT_EQ(sample_value(text, "preface_tenant_completion_tokens_total" + bob), 8);
  EXPECT_GT(sample_value(text, "preface_tenant_prompt_tokens_total" + alice), 0);
  // Bob's second request read his first one's prefix.
  EXPECT_GT(sample_value(text, "preface_tenant_cache_read_tokens_total" + bob), 0);
  EXPECT_GT(sample_value(text, "preface_tenant_cache_write_tokens_total" + alice), 0);
  EXPECT_GT(sample_value(text, "preface_tenant_cache_saved_flops_total" + bob), 0);
  EXPECT_GE(sample_value(text, "preface_tenant_cache_saved_seconds_total" + bob), 0);
  const double ratio = sample_value(text, "preface_tenant_cache_hit_ratio" + bob);
  EXPECT_GT(ratio, 0);
  EXPECT_LT(ratio, 1);
  EXPECT_EQ(sample_value(text, "preface_tenant_cache_hit_requests_total" + bob), 1);
  expect_promtool_accepts(text, "server_metrics_tenants");
}

// The checks themselves: a family declared twice, or samples away from their TYPE line, are caught.
TEST(ServerMetrics, MetadataChecksCatchRepeatsAndStraySamples) {
  const std::string twice = "# HELP a_total x\n# TYPE a_total counter\na_total 1\n"
                            "# HELP a_total x\n# TYPE a_total counter\na_total{t=\"b\"} 2\n";
  EXPECT_EQ(repeated_metadata(twice), (std::vector<std::string>{"HELP a_total", "TYPE a_total"}));
  EXPECT_EQ(untyped_or_split_families(twice), std::vector<std::string>{"a_total"});  // and split
  const std::string split = "# TYPE a counter\na 1\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\nc 3\n"
                            "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n";
  EXPECT_EQ(untyped_or_split_families(split), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(repeated_metadata(split), std::vector<std::string>{});
}

}  // namespace
}  // namespace preface::test
