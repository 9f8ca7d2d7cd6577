// `preface-bench serve`: the deterministic prompt generator and the percentile summary directly (header-only),
// and the whole load generator against a real `preface serve` on stories260K.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "clients/loadgen_stats.h"
#include "clients/loadgen_workload.h"
#include "cli/cli_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

using cli::loadgen::Conversation;
using cli::loadgen::WorkloadKind;
using cli::loadgen::WorkloadSpec;

size_t n_words(const std::string& s) {
  size_t n = s.empty() ? 0 : 1;
  for (char c : s) n += c == ' ';
  return n;
}

TEST(LoadgenWorkload, SameSeedSameTextOtherSeedOtherText) {
  WorkloadSpec spec{WorkloadKind::kSharedPrefix, 7, 3, 2, 1, 1, 1, 50, 10};
  const std::vector<Conversation> a = cli::loadgen::make_workload(spec), b = cli::loadgen::make_workload(spec);
  ASSERT_EQ(a.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].system, b[i].system);
    EXPECT_EQ(a[i].questions, b[i].questions);
    EXPECT_EQ(n_words(a[i].system), 50u);
    ASSERT_EQ(a[i].questions.size(), 1u);
    EXPECT_EQ(n_words(a[i].questions[0]), 10u);
  }
  // Dispatch order interleaves groups: requests i and i + n_groups share a system prompt, neighbours do not.
  EXPECT_EQ(a[0].system, a[3].system);
  EXPECT_NE(a[0].system, a[1].system);
  EXPECT_NE(a[0].questions, a[3].questions);
  spec.seed = 8;
  const std::vector<Conversation> c = cli::loadgen::make_workload(spec);
  EXPECT_NE(a[0].system, c[0].system);
  // A group's text does not depend on how many groups there are.
  spec.seed = 7;
  spec.n_groups = 5;
  EXPECT_EQ(cli::loadgen::make_workload(spec)[1].system, a[1].system);
}

TEST(LoadgenWorkload, MultiTurnHistoryIsAPrefixOfTheNextTurn) {
  const WorkloadSpec spec{WorkloadKind::kMultiTurn, 1, 1, 1, 2, 3, 1, 20, 5};
  const std::vector<Conversation> w = cli::loadgen::make_workload(spec);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].system, w[1].system);
  EXPECT_NE(w[0].questions[0], w[1].questions[0]);
  EXPECT_EQ(cli::loadgen::n_requests(w), 6);
  const std::string t0 = cli::loadgen::render_prompt(w[0], {});
  const std::string t1 = cli::loadgen::render_prompt(w[0], {" the reply."});
  EXPECT_EQ(t1.rfind(t0 + " the reply.", 0), 0u) << t1;
  EXPECT_NE(t1.find(w[0].questions[1]), std::string::npos);
  EXPECT_EQ(t0.rfind(w[0].system, 0), 0u);
}

TEST(LoadgenWorkload, RandomPromptsDifferAndBadSizesThrow) {
  const WorkloadSpec spec{WorkloadKind::kRandom, 1, 1, 1, 1, 1, 4, 30, 10};
  const std::vector<Conversation> w = cli::loadgen::make_workload(spec);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_NE(w[0].questions[0].substr(0, 20), w[1].questions[0].substr(0, 20));
  EXPECT_EQ(n_words(w[2].questions[0]), 40u);
  EXPECT_THROW(cli::loadgen::make_workload({WorkloadKind::kSharedPrefix, 1, 0, 1, 1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(cli::loadgen::make_workload({WorkloadKind::kRandom, 1, 1, 1, 1, 1, 1, 1, 0}), Error);
}

TEST(LoadgenStats, PercentilesInterpolate) {
  const auto d = cli::loadgen::summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(d.n, 5);
  EXPECT_DOUBLE_EQ(d.mean, 3.0);
  EXPECT_DOUBLE_EQ(d.p50, 3.0);
  EXPECT_DOUBLE_EQ(d.p90, 4.6);
  EXPECT_DOUBLE_EQ(d.p99, 4.96);
  EXPECT_EQ(cli::loadgen::summarize({}).n, 0);
}

TEST(LoadgenStats, AggregateSkipsFailuresAndSumsUsage) {
  cli::loadgen::RequestResult a, b, bad;
  a.ok = b.ok = true;
  a.ttft_s = 0.1, a.e2e_s = 0.4, a.itl_s = {0.1, 0.2}, a.n_prompt_tokens = 100, a.n_cached_tokens = 50;
  a.n_completion_tokens = 4, a.has_usage = true;
  b.ttft_s = 0.2, b.e2e_s = 0.2, b.n_prompt_tokens = 100, b.n_completion_tokens = 1, b.has_usage = true;
  bad.error = "HTTP 500: boom";
  const cli::loadgen::Totals t = cli::loadgen::aggregate({a, bad, b});
  EXPECT_EQ(t.n_ok, 2);
  EXPECT_EQ(t.n_failed, 1);
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_EQ(t.errors[0], "HTTP 500: boom");
  EXPECT_EQ(t.ttft_s.size(), 2u);
  EXPECT_EQ(t.ttft_hit_s, std::vector<double>{0.1});   // a: 50 of 100 prompt tokens cached
  EXPECT_EQ(t.ttft_miss_s, std::vector<double>{0.2});  // b: none
  cli::loadgen::RequestResult c = a;
  c.n_cached_tokens = 49;                                // under half: a partial match, not a hit
  EXPECT_EQ(cli::loadgen::aggregate({c}).ttft_miss_s.size(), 1u);
  EXPECT_EQ(t.itl_s.size(), 2u);
  ASSERT_EQ(t.tpot_s.size(), 1u);  // b generated one token: no inter-token time
  EXPECT_DOUBLE_EQ(t.tpot_s[0], 0.1);
  EXPECT_EQ(t.n_completion_tokens, 5);
  EXPECT_DOUBLE_EQ(cli::loadgen::cached_ratio(t), 0.25);
}

// `preface-bench serve <args>`. Its JSON report (--json) is all of stdout; stderr holds progress lines, which
// start with "bench serve:", and errors.
CliResult bench(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"serve"};
  all.insert(all.end(), args.begin(), args.end());
  return run_bench(all);
}

TEST(LoadgenServe, SharedPrefixAgainstPrefaceServe) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  ServeProcess srv({"-m", model.string(), "--threads", "1", "--kv-cache-mem", "32MiB"}, "loadgen");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  const CliResult r = bench({"--url", srv.url(), "--workload", "shared-prefix", "--groups", "2", "--prompts-per-group",
                             "3", "--system-len", "40", "--question-len", "6", "--max-tokens", "4", "--concurrency",
                             "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.all() << srv.log();
  // stdout is the JSON object; stderr holds only progress lines, which start with "bench serve:".
  const size_t brace = r.out.find('{');
  ASSERT_NE(brace, std::string::npos) << r.all();
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(brace), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.all();
  EXPECT_EQ(j["workload"], "shared-prefix");
  EXPECT_EQ(j["n_requests"], 6);
  EXPECT_EQ(j["n_ok"], 6);
  EXPECT_EQ(j["n_failed"], 0);
  EXPECT_EQ(j["n_without_usage"], 0);
  EXPECT_EQ(j["completion_tokens"], 24);
  EXPECT_GT(j["cached_ratio"].get<double>(), 0.0) << j.dump(2);
  EXPECT_LT(j["cached_ratio"].get<double>(), 1.0);
  EXPECT_GT(j["mean_prompt_tokens"].get<double>(), 40.0);
  EXPECT_GT(j["requests_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["output_tokens_per_s"].get<double>(), 0.0);
  for (const char* k : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    for (const char* f : {"mean", "p50", "p90", "p99"}) EXPECT_TRUE(j[k].contains(f)) << k << "." << f;
  }
  EXPECT_EQ(j["ttft_ms"]["n"], 6);
  // Each group's first prompt misses (concurrency 2 runs both groups' first prompts first); the rest hit (their
  // 40-word system prompt is most of each prompt).
  EXPECT_EQ(j["ttft_hit_ms"]["n"].get<int>() + j["ttft_miss_ms"]["n"].get<int>(), 6) << j.dump(2);
  EXPECT_GE(j["ttft_miss_ms"]["n"].get<int>(), 2) << j.dump(2);
  EXPECT_GE(j["ttft_hit_ms"]["n"].get<int>(), 2) << j.dump(2);
  EXPECT_EQ(j["session_ids"], false);
  EXPECT_GT(j["ttft_ms"]["p50"].get<double>(), 0.0);
  EXPECT_GE(j["e2e_ms"]["p50"].get<double>(), j["ttft_ms"]["p50"].get<double>());

  const CliResult mt = bench({"--url", srv.url(), "--workload", "multi-turn", "--users", "2", "--turns", "2",
                              "--system-len", "20", "--question-len", "4", "--max-tokens", "3", "--concurrency", "2"});
  EXPECT_EQ(mt.exit_code, 0) << mt.all();
  EXPECT_NE(mt.all().find("4 ok, 0 failed"), std::string::npos) << mt.all();
}

TEST(LoadgenServe, BadUrlAndDeadServerFailClearly) {
  const CliResult bad = bench({"--url", "not-a-url", "--json"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.all().find("--url"), std::string::npos) << bad.all();
  // Port 1 on loopback: nothing listens there.
  const CliResult dead = bench({"--url", "http://127.0.0.1:1", "--groups", "1", "--prompts-per-group", "1"});
  EXPECT_NE(dead.exit_code, 0);
  EXPECT_NE(dead.all().find("127.0.0.1:1"), std::string::npos) << dead.all();
}

}  // namespace
}  // namespace preface::test
