// Where a hybrid model's state snapshots go (engine/scheduler.h), each kind shown by the request that resumes from
// it, with logits memcmp-identical to the same prompt computed cold, at prefill chunk sizes 1, 7, 64 and 512:
//   - breakpoint: a cache pin at token 50 leaves a snapshot at 48; a prompt sharing 60 tokens resumes there;
//   - interval: every 32 tokens; a prompt sharing 70 tokens resumes at 64;
//   - junction: a prompt sharing 70 tokens with a cached one finds blocks but no snapshot, computes cold and leaves
//     one at 64, where the next prompt diverging there resumes;
//   - reply: a request's last block boundary of prompt + reply, so the next turn (prompt, reply, new tokens)
//     resumes after the reply; only the last such snapshot of a request is kept.
// The explainer's state_cached_tokens agrees with where admission resumes.
#include <gtest/gtest.h>

#include "engine/engine_harness.h"

namespace preface::test {
namespace {

constexpr int32_t kBlock = 16;
using Kind = kv::SnapshotKind;

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int32_t> first(const std::vector<int32_t>& v, size_t n) { return {v.begin(), v.begin() + n}; }

struct Texts {
  std::vector<int32_t> story, x, y, z;
};

Texts texts(const Tokenizer& tok) {
  return {tok.encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
                     "with her friends, and every day she would run to the big tree at the end of the road to look "
                     "for birds. One day she found a small blue egg in the grass under the tree. She picked it up "
                     "and carried it home to show her mother, who smiled and said that they should keep it warm.",
                     tok.add_bos_default()),
          tok.encode(" Then a dog came by and barked at the bird on the fence", false),
          tok.encode(" But the cat slept all afternoon in the warm sun by the window", false),
          tok.encode(" And what happened next?", false)};
}

engine::EngineConfig config(int32_t chunk, int32_t interval) {
  engine::EngineConfig cfg;
  cfg.kv_cache_bytes = 8ull << 20;
  cfg.max_batch_tokens = chunk;
  cfg.n_threads = 2;
  cfg.max_running = 4;
  cfg.state_snapshot_interval = interval;
  return cfg;
}

Outcome run(engine::Engine& eng, engine::RequestParams p) {
  auto s = eng.submit(std::move(p));
  while (eng.step()) eng.check_invariants();
  return collect(*s);
}

// The prompt alone on a cold engine without a prefix cache.
Outcome cold(const LoadedModel& lm, const std::vector<int32_t>& prompt, int32_t n_new) {
  auto cfg = config(512, 0);
  cfg.prefix_cache = false;
  engine::Engine eng(*lm.model, engine::with_eog(cfg, *lm.tokenizer));
  return run(eng, greedy_request(prompt, n_new));
}

int64_t taken(const engine::Engine& eng, Kind k) {
  return eng.counters().n_state_snapshots_taken[static_cast<size_t>(k)];
}
int64_t hits(const engine::Engine& eng, Kind k) { return eng.counters().n_state_snapshot_hits[static_cast<size_t>(k)]; }

class HybridSnapshots : public ::testing::TestWithParam<int32_t> {
 protected:
  void SetUp() override {
    lm_ = load_shared_model("synth-qwen35-d128-f16.gguf");
    ASSERT_TRUE(lm_.model) << "needs ../shared/models/synth-qwen35-d128-f16.gguf";
    t_ = texts(*lm_.tokenizer);
    ASSERT_GE(t_.story.size(), 112u);
  }
  engine::Engine engine(int32_t interval) {
    return engine::Engine(*lm_.model, engine::with_eog(config(GetParam(), interval), *lm_.tokenizer));
  }
  // prompt on `eng` equals prompt cold, and resumed at `resumed`.
  void expect_resumes(engine::Engine& eng, const std::vector<int32_t>& prompt, int32_t resumed,
                      const std::string& what) {
    const Outcome o = run(eng, greedy_request(prompt, 3));
    expect_identical(o, cold(lm_, prompt, 3), what);
    EXPECT_EQ(o.stats.n_cached_tokens, resumed) << what;
    eng.check_invariants();
  }
  LoadedModel lm_;
  Texts t_;
};

TEST_P(HybridSnapshots, BreakpointsResume) {
  engine::Engine eng = engine(0);
  engine::RequestParams p = greedy_request(t_.story, 3);
  p.cache_pins.push_back({50, std::chrono::seconds(300)});
  run(eng, p);
  EXPECT_EQ(taken(eng, Kind::Breakpoint), 1);
  const auto shared60 = cat(first(t_.story, 60), t_.x);
  EXPECT_EQ(eng.explain_cache(shared60, "", {}).state_cached_tokens, 48);
  expect_resumes(eng, shared60, 48, "60 tokens shared with a breakpoint at 50");
  EXPECT_EQ(hits(eng, Kind::Breakpoint), 1);
}

TEST_P(HybridSnapshots, IntervalsResume) {
  engine::Engine eng = engine(32);
  run(eng, greedy_request(t_.story, 3));
  const auto n_story = static_cast<int32_t>(t_.story.size());
  int64_t n_intervals = 0;  // a multiple of 32 that is also the prompt's point counts as a prompt snapshot
  for (int32_t p = 32; p < n_story; p += 32) n_intervals += p != (n_story - 1) / kBlock * kBlock ? 1 : 0;
  EXPECT_EQ(taken(eng, Kind::Interval), n_intervals);
  expect_resumes(eng, cat(first(t_.story, 70), t_.x), 64, "70 tokens shared, intervals of 32");
  EXPECT_EQ(hits(eng, Kind::Interval), 1);
}

TEST_P(HybridSnapshots, JunctionsResumeTheNextDivergingPrompt) {
  engine::Engine eng = engine(0);
  run(eng, greedy_request(t_.story, 3));
  const auto x = cat(first(t_.story, 70), t_.x), y = cat(first(t_.story, 70), t_.y);
  const engine::CacheExplanation e = eng.explain_cache(x, "", {});
  EXPECT_EQ(e.prefix.n_full_hit_tokens, 64);
  EXPECT_EQ(e.state_cached_tokens, 0);  // blocks, but no snapshot at or before them
  expect_resumes(eng, x, 0, "blocks cached, no snapshot");
  EXPECT_EQ(taken(eng, Kind::Junction), 1);
  expect_resumes(eng, y, 64, "diverging at the junction");
  EXPECT_EQ(hits(eng, Kind::Junction), 1);
}

TEST_P(HybridSnapshots, ReplyEndsResumeTheNextTurn) {
  engine::Engine eng = engine(0);
  constexpr int32_t kReply = 40;
  const Outcome turn1 = run(eng, greedy_request(t_.story, kReply));
  // Decode passed two or three block boundaries; only the last one's snapshot stays, beside the prompt's.
  EXPECT_GE(taken(eng, Kind::Reply), 2);
  EXPECT_EQ(eng.counters().n_state_snapshots, 2);
  const auto n_story = static_cast<int32_t>(t_.story.size());
  const int32_t reply_end = (n_story + kReply - 1) / kBlock * kBlock;  // the last reply token is never computed
  ASSERT_GE(reply_end, n_story);
  const auto turn2 = cat(cat(t_.story, turn1.tokens), t_.z);
  expect_resumes(eng, turn2, reply_end, "the next turn");
  EXPECT_EQ(hits(eng, Kind::Reply), 1);
}

INSTANTIATE_TEST_SUITE_P(Chunks, HybridSnapshots, ::testing::Values(1, 7, 64, 512),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return "chunk" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace preface::test
