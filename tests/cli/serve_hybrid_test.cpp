// `preface serve` on a hybrid model (qwen35: recurrent state plus attention KV), end to end over HTTP:
//   - a second turn of the Responses API (previous_response_id: the prompt continues the first turn's token ids)
//     resumes after the first turn's reply, from the reply snapshot, not at the end of the first prompt;
//   - the explainer says no_state_snapshot where the blocks reach further than any snapshot, and where a request
//     would resume; the request then leaves a junction snapshot there, and the next prompt diverging there hits;
//   - /metrics counts snapshots taken and hit by kind.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_harness.h"

namespace preface::test {
namespace {

using nlohmann::json;
constexpr int32_t kBlock = 16;

json post(httplib::Client& c, const std::string& path, const json& body) {
  const auto res = c.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
  return res && res->status == 200 ? json::parse(res->body) : json::object();
}

double metric(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
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

  const auto res = c.Get("/metrics");
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_EQ(metric(res->body, "preface_state_snapshots_taken_total{kind=\"junction\"}"), 1) << res->body;
  EXPECT_EQ(metric(res->body, "preface_state_snapshot_hits_total{kind=\"junction\"}"), 1);
  EXPECT_EQ(metric(res->body, "preface_state_snapshot_hits_total{kind=\"reply\"}"), 1);
  EXPECT_GE(metric(res->body, "preface_state_snapshots_taken_total{kind=\"reply\"}"), 2);
}

}  // namespace
}  // namespace preface::test
