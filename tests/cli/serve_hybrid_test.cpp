// `preface serve` on a hybrid model (qwen35: recurrent state plus attention KV), end to end over HTTP:
//   - a second turn of the Responses API (previous_response_id: the prompt continues the first turn's token ids)
//     resumes after the first turn's reply, from the reply snapshot, not at the end of the first prompt;
//   - the explainer says no_state_snapshot where the blocks reach further than any snapshot, and where a request
//     would resume; the request then leaves a junction snapshot there, and the next prompt diverging there hits;
//   - /metrics counts snapshots taken and hit by kind;
//   - two servers on one Redis share blocks and snapshots.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_harness.h"
#include "loopback_services.h"

namespace preface::test {
namespace {

using nlohmann::json;
constexpr int32_t kBlock = 16;

json post(httplib::Client& c, const std::string& path, const json& body) {
  const auto res = c.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
  return res && res->status == 200 ? json::parse(res->body) : json::object();
}

TEST(ServeHybrid, NextTurnResumesAfterTheReplyAndJunctionsAreExplained) {
  const auto model = shared_file("models/synth-qwen35-d128-f16.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/synth-qwen35-d128-f16.gguf";
  ServeProcess srv({"-m", model.string(), "--quiet", "--threads", "2", "--state-snapshot-interval", "0"}, "hybrid");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  httplib::Client c(srv.url());
  c.set_read_timeout(std::chrono::seconds(120));

  const std::string instructions = "You are a storyteller who answers in one long paragraph.";
  const json turn1 = post(c, "/v1/responses",
                          {{"instructions", instructions},
                           {"input", "Tell me about a girl named Lily who finds a blue egg under a tree."},
                           {"max_output_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_TRUE(turn1.contains("id")) << turn1.dump();
  const int32_t n_prompt1 = turn1["usage"]["input_tokens"];
  ASSERT_EQ(turn1["usage"]["output_tokens"], 40) << turn1.dump();
  const json turn2 = post(c, "/v1/responses",
                          {{"previous_response_id", turn1["id"]}, {"instructions", instructions},
                           {"input", "And then?"},
                           {"max_output_tokens", 4}, {"temperature", 0}});
  ASSERT_TRUE(turn2.contains("usage")) << turn2.dump();
  EXPECT_EQ(turn2["preface"]["resumed"], true) << turn2.dump();
  // The first turn computed its prompt and all but its last reply token; its last block boundary is where the
  // second turn resumes (the first prompt's own snapshot is at least one block earlier).
  const int32_t reply_end = (n_prompt1 + 40 - 1) / kBlock * kBlock;
  EXPECT_EQ(turn2["usage"]["input_tokens_details"]["cached_tokens"], reply_end) << turn2.dump();

  // Token prompts: 100 ids, then 70 of them and a different tail: the blocks reach 64, no snapshot does.
  std::vector<int32_t> base(100), x, y;
  for (int32_t i = 0; i < 100; ++i) base[static_cast<size_t>(i)] = 10 + 7 * i % 400;
  x.assign(base.begin(), base.begin() + 70);
  y = x;
  for (int32_t i = 0; i < 30; ++i) {  // past the next block, so that the prompt's own snapshot lies further
    x.push_back(420 + i);
    y.push_back(440 + i);
  }
  auto complete = [](const std::vector<int32_t>& prompt) {
    return json{{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
  };
  post(c, "/v1/completions", complete(base));
  json e = post(c, "/v1/cache/explain", {{"tokens", x}});
  EXPECT_EQ(e["reason"], "no_state_snapshot") << e.dump();
  EXPECT_EQ(e["cached_tokens"], 0) << e.dump();
  EXPECT_EQ(e["state_snapshot_at"], 0) << e.dump();
  EXPECT_EQ(e["blocks_cached_tokens"], 64) << e.dump();
  const json rx = post(c, "/v1/completions", complete(x));
  EXPECT_EQ(rx["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << rx.dump();
  e = post(c, "/v1/cache/explain", {{"tokens", y}});
  EXPECT_EQ(e["cached_tokens"], 64) << e.dump();
  EXPECT_NE(e["reason"], "no_state_snapshot") << e.dump();
  const json ry = post(c, "/v1/completions", complete(y));
  EXPECT_EQ(ry["usage"]["prompt_tokens_details"]["cached_tokens"], 64) << ry.dump();

  EXPECT_EQ(metric(srv.url(), "preface_state_snapshots_taken_total{kind=\"junction\"}"), 1);
  EXPECT_EQ(metric(srv.url(), "preface_state_snapshot_hits_total{kind=\"junction\"}"), 1);
  EXPECT_EQ(metric(srv.url(), "preface_state_snapshot_hits_total{kind=\"reply\"}"), 1);
  EXPECT_GE(metric(srv.url(), "preface_state_snapshots_taken_total{kind=\"reply\"}"), 2);
}

// Two servers on one Redis: a prompt computed by one resumes on the other from the blocks and the state snapshot
// it published, with the same reply (greedy, logprobs included); another tenant's salt finds nothing.
TEST(ServeHybrid, RedisSharesSnapshotsBetweenServers) {
  const auto model = shared_file("models/synth-qwen35-d128-f16.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/synth-qwen35-d128-f16.gguf";
  if (!have_program("redis-server")) GTEST_SKIP() << "redis-server is not installed (scripts/setup installs it)";
  RedisProcess redis(free_port());
  ASSERT_TRUE(redis.ready());
  const std::vector<std::string> args = {"-m", model.string(), "--quiet", "--threads", "1", "--cache-redis",
                                         redis.url(), "--cache-redis-timeout-ms", "5000"};
  ServeProcess a(args, "hybrid-redis-a");
  ServeProcess b(args, "hybrid-redis-b");
  ASSERT_FALSE(a.url().empty()) << a.log();
  ASSERT_FALSE(b.url().empty()) << b.log();
  std::vector<int32_t> prompt(100);
  for (int32_t i = 0; i < 100; ++i) prompt[static_cast<size_t>(i)] = 5 + (11 * i + i * i) % 450;
  const json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", 2}};
  httplib::Client ca(a.url()), cb(b.url());
  const json ra = post(ca, "/v1/completions", body);
  const std::string written = "preface_kv_tier_written_records_total{tier=\"redis\"}";
  // Six blocks and the snapshot at the end of the prompt's sixth block (token 96).
  ASSERT_TRUE(wait_until([&] { return metric(a.url(), written) >= 7; })) << metric(a.url(), written);
  const json rb = post(cb, "/v1/completions", body);
  EXPECT_EQ(rb["choices"][0]["text"], ra["choices"][0]["text"]);
  EXPECT_EQ(rb["choices"][0]["logprobs"], ra["choices"][0]["logprobs"]);
  EXPECT_EQ(rb["usage"]["prompt_tokens_details"]["cached_tokens"], 96) << rb.dump();
  EXPECT_EQ(metric(b.url(), "preface_kv_tier_loaded_snapshots_total"), 1);
  json salted = body;
  salted["cache_salt"] = "another tenant";
  const json rs = post(cb, "/v1/completions", salted);
  EXPECT_EQ(rs["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << rs.dump();
}

}  // namespace
}  // namespace preface::test
