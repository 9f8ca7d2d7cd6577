// /metrics: the Prometheus exposition has the required families with values that follow the traffic, and
// `promtool check metrics` (Debian's prometheus package) accepts it.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "server_harness.h"

namespace preface::test {
namespace {

// The value of the first sample line starting with `series` ("name" or "name{labels}"), or -1.
double sample_value(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + series.size() + 1));
    pos += series.size();
  }
  return -1;
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

  const char* promtool = "/usr/bin/promtool";
  if (!std::filesystem::exists(promtool)) {
    GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus'; scripts/setup installs it): the "
                    "exposition was not linted";
  }
  const auto path = temp_dir("server_metrics") / "metrics.txt";
  std::ofstream(path) << text;
  const std::string cmd = std::string(promtool) + " check metrics < '" + path.string() + "' 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  // The vLLM aliases keep vLLM's names, whose ':' the linter reserves for recording rules (it says the same of
  // vLLM's own /metrics): that complaint, and only it, is allowed for them.
  std::string other;
  int n_colon = 0;
  for (size_t pos = 0; pos < output.size();) {
    const size_t end = std::min(output.find('\n', pos), output.size());
    const std::string line = output.substr(pos, end - pos);
    if (line.rfind("vllm:", 0) == 0 && line.find(" metric names should not contain ':'") != std::string::npos) {
      ++n_colon;
    } else if (!line.empty()) {
      other += line + "\n";
    }
    pos = end + 1;
  }
  EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || n_colon > 0)) << "promtool check metrics:\n" << output;
  EXPECT_EQ(other, "") << "promtool check metrics:\n" << output;
}

}  // namespace
}  // namespace preface::test
