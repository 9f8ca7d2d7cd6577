// The sliding-window layers' own pool (kv/window_pool.h) in the engine, on every shared model with windowed and
// global layers (window 16 in the synthetic files): a sequence holds only its window of those layers' rows while
// its global rows grow; a hit whose window blocks are still cached resumes there; one whose window blocks were
// given back and then evicted recomputes; every outcome is memcmp-identical to a cold run with one pool and no cache.
#include <gtest/gtest.h>

#include <random>

#include "engine/engine_harness.h"
#include "model/capacity.h"

namespace preface::test {
namespace {

class EngineWindow : public ::testing::TestWithParam<const char*> {};

std::vector<int32_t> random_tokens(uint32_t seed, size_t n, int32_t n_vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, std::min(n_vocab - 1, 2000));
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = id(rng);
  return out;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b, size_t n_a) {
  a.resize(n_a);
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_P(EngineWindow, HoldsOnlyTheWindowAndHitsWhileItsBlocksAreCached) {
  auto lm = load_shared_model(GetParam());
  ASSERT_TRUE(lm.model) << "shared model " << GetParam() << " is missing";
  const model::MemoryLayout& memory = lm.model->memory();
  ASSERT_TRUE(memory.can_split_windows());
  ASSERT_EQ(memory.max_window(), 16);
  const int32_t n_vocab = lm.model->config().n_vocab;
  constexpr int32_t kNew = 4;
  const auto a = random_tokens(1, 200, n_vocab);
  const auto c = random_tokens(2, 200, n_vocab);
  const auto tail = random_tokens(3, 30, n_vocab);
  const auto b = concat(a, tail, 150);  // a's blocks 0-8 (144 tokens) can be hit
  const auto d = concat(c, tail, 190);  // c's blocks 0-10 (176 tokens)

  std::vector<Outcome> ref;
  {
    engine::EngineConfig cfg;
    cfg.prefix_cache = false;
    cfg.window_reclaim = false;
    cfg.kv_cache_bytes = 16ull << 20;
    engine::Engine eng(*lm.model, cfg);
    for (const auto* prompt : {&a, &b, &c, &d}) {
      auto s = eng.submit(greedy_request(*prompt, kNew));
      eng.run_until_idle();
      ref.push_back(collect(*s));
    }
  }

  // One sequence at a time, chunks of one block: the window pool gets 2 x (the reserve of one sequence + one
  // chunk's block) = 12 blocks, the main pool the rest of 40 blocks' worth of one pool.
  engine::EngineConfig cfg;
  cfg.max_running = 1;
  cfg.max_batch_tokens = 16;
  cfg.n_threads = 2;
  cfg.kv_cache_bytes = memory.paged_bytes_per_token(cfg.kv_format) * 16 * 40;
  engine::Engine eng(*lm.model, cfg);
  const int32_t reserve = model::window_reserve_blocks(16, 16);
  ASSERT_EQ(eng.counters().n_window_blocks_total, 2 * (reserve + 1));
  ASSERT_GE(eng.counters().n_blocks_total, 40);

  const auto run = [&](const std::vector<int32_t>& prompt) {
    auto s = eng.submit(greedy_request(prompt, kNew));
    int32_t max_main = 0, max_window = 0;
    while (eng.step()) {
      eng.check_invariants();
      max_main = std::max(max_main, eng.counters().n_blocks_in_use);
      max_window = std::max(max_window, eng.counters().n_window_blocks_in_use);
    }
    // The global layers hold every block of the sequence; the windowed ones its window, whatever its length.
    EXPECT_GE(max_main, static_cast<int32_t>(prompt.size()) / 16);
    EXPECT_LE(max_window, reserve + 1);
    EXPECT_EQ(eng.counters().n_window_blocks_in_use, 0);
    return collect(*s);
  };
  const Outcome oa = run(a);
  expect_identical(oa, ref[0], "a cold");
  const engine::CacheExplanation before_b = eng.explain_cache(b, "");
  EXPECT_EQ(before_b.prefix.n_full_hit_tokens, 144);
  EXPECT_EQ(before_b.window_cached_tokens, 144);
  const Outcome ob = run(b);
  expect_identical(ob, ref[1], "b after a");
  EXPECT_EQ(ob.stats.n_cached_tokens, 144);  // needs only a's block 8 in the window pool, still cached
  const Outcome oc = run(c);                 // cycles the 12-block window pool: a's and b's window blocks go
  expect_identical(oc, ref[2], "c cold");
  EXPECT_EQ(oc.stats.n_cached_tokens, 0);
  const Outcome od = run(d);
  expect_identical(od, ref[3], "d after c");
  EXPECT_EQ(od.stats.n_cached_tokens, 176);
  // b's global blocks are still in the main pool, but every window it could resume from was evicted: it
  // recomputes from position 0.
  EXPECT_GE(eng.counters().n_blocks_cached, 9 + 11);
  const engine::CacheExplanation before_b2 = eng.explain_cache(b, "");
  EXPECT_EQ(before_b2.prefix.n_full_hit_tokens, 176);  // b registered its own blocks 9 and 10
  EXPECT_EQ(before_b2.window_cached_tokens, 0) << "the explainer says the window is what is missing";
  const Outcome ob2 = run(b);
  expect_identical(ob2, ref[1], "b after its window blocks were evicted");
  EXPECT_EQ(ob2.stats.n_cached_tokens, 0);
  eng.check_invariants();
}

// With no budget configured, the pool is sized for max_running sequences of the whole context: with the window
// pool, the windowed layers count only what that pool gives a sequence.
TEST(EngineWindowBudget, TheDefaultBudgetCountsOnlyTheWindowOfTheWindowedLayers) {
  auto lm = load_shared_model("synth-gemma4-d128-f16.gguf");
  ASSERT_TRUE(lm.model) << "shared model synth-gemma4-d128-f16.gguf is missing";
  engine::EngineConfig cfg;
  cfg.max_running = 1;
  const model::MemoryLayout& memory = lm.model->memory();
  const auto ctx = static_cast<uint64_t>(lm.model->config().ctx_len);
  const uint64_t all = memory.paged_bytes_per_token(cfg.kv_format) * ctx;
  const uint64_t global = all - memory.windowed_bytes_per_token(cfg.kv_format) * ctx;
  const uint64_t split = engine::default_kv_cache_bytes(*lm.model, cfg);
  EXPECT_GE(split, global);
  EXPECT_LT(split, global + (all - global) / 100);  // the window pool is a sliver of the windowed layers' context
  cfg.window_reclaim = false;
  EXPECT_EQ(engine::default_kv_cache_bytes(*lm.model, cfg), std::min(all, engine::default_kv_cache_bytes()));
}

INSTANTIATE_TEST_SUITE_P(SharedModels, EngineWindow,
                         ::testing::Values("synth-gemma2-d128-f16.gguf", "synth-gemma3-d256-f16.gguf",
                                           "synth-gpt-oss-d128-f16.gguf", "synth-gemma4-d128-f16.gguf"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find('.'));
                           for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

}  // namespace
}  // namespace preface::test
