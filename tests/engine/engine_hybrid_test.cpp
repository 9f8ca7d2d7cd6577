// A hybrid model (qwen35: Gated DeltaNet layers with a recurrent state per sequence, and gated attention layers;
// qwen35moe: the same trunk with mixture-of-experts FFNs, so batched tokens of different sequences share experts)
// through the engine: every way tokens arrive gives memcmp-identical logits, since each sequence's state is updated
// token by token in one fixed order (model/layers/delta_net.h) and lives in a state slot the scheduler holds while
// the sequence runs. Covered: prefill chunk sizes 1/7/64/512, 1 and 2 threads, three requests batched together, a
// reply decoded and then sent back as a prompt, and preemption (a pool too small for all three, so a sequence is
// stopped, gives back its blocks and its slot, and resumes from a snapshot or position 0). Prefix hits resume from a
// state snapshot (kv/state_snapshots.h) taken at the last full block before each prompt's last token: the same
// prompt again and a prompt that extends it hit there, with the same bits as cold; a prompt sharing only a shorter
// prefix has no snapshot to resume from and computes cold.
#include <gtest/gtest.h>

#include "engine/engine_harness.h"

namespace preface::test {
namespace {

constexpr int32_t kNew = 6;

std::vector<std::vector<int32_t>> prompts(const Tokenizer& tok) {
  const auto a = tok.encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
      "friends, and every day she would run to the big tree at the end of the road",
      tok.add_bos_default());
  auto b = std::vector<int32_t>(a.begin(), a.begin() + 20);
  const auto tail = tok.encode(" and then a dog came by and barked at the bird", false);
  b.insert(b.end(), tail.begin(), tail.end());
  const auto c = tok.encode("The sun went down over the hills and the stars came out one by one.", true);
  auto d = a;  // extends a
  const auto more = tok.encode(" to look for birds and shiny stones", false);
  d.insert(d.end(), more.begin(), more.end());
  auto e = std::vector<int32_t>(a.begin(), a.begin() + 20);  // shares 20 tokens with a and b, short of a snapshot
  const auto other = tok.encode(" and the cat slept all afternoon in the warm sun by the window", false);
  e.insert(e.end(), other.begin(), other.end());
  return {a, b, c, d, e};
}

class EngineHybrid : public ::testing::TestWithParam<std::string> {};

engine::EngineConfig config_for(int32_t chunk, int32_t threads, uint64_t kv_bytes = 8ull << 20) {
  engine::EngineConfig cfg;
  cfg.kv_cache_bytes = kv_bytes;
  cfg.max_batch_tokens = chunk;
  cfg.n_threads = threads;
  cfg.max_running = 4;
  return cfg;
}

// Each prompt alone on a cold engine without a prefix cache, one chunk, one thread.
std::vector<Outcome> references(const LoadedModel& lm, const std::vector<std::vector<int32_t>>& ps) {
  auto cfg = config_for(512, 1);
  cfg.prefix_cache = false;
  engine::Engine eng(*lm.model, engine::with_eog(cfg, *lm.tokenizer));
  std::vector<Outcome> out;
  for (const auto& p : ps) {
    auto s = eng.submit(greedy_request(p, kNew));
    eng.run_until_idle();
    out.push_back(collect(*s));
  }
  return out;
}

TEST_P(EngineHybrid, BatchedChunkedThreadedIdentical) {
  auto lm = load_shared_model(GetParam());
  ASSERT_TRUE(lm.model) << "needs ../shared/models/" << GetParam();
  const auto ps = prompts(*lm.tokenizer);
  const std::vector<Outcome> ref = references(lm, ps);
  for (int32_t threads : {1, 2}) {
    for (int32_t chunk : {1, 7, 64, 512}) {
      const std::string what = "threads=" + std::to_string(threads) + " chunk=" + std::to_string(chunk);
      engine::Engine eng(*lm.model, engine::with_eog(config_for(chunk, threads), *lm.tokenizer));
      EXPECT_GT(eng.describe().snapshot_budget_bytes, 0u);
      std::vector<std::shared_ptr<engine::RequestStream>> streams;
      for (size_t i = 0; i < 3; ++i) streams.push_back(eng.submit(greedy_request(ps[i], kNew)));
      while (eng.step()) eng.check_invariants();
      for (size_t i = 0; i < 3; ++i) {
        const Outcome o = collect(*streams[i]);
        expect_identical(o, ref[i], what + " prompt " + std::to_string(i));
        EXPECT_EQ(o.stats.n_cached_tokens, 0) << what;
      }
      // a again, and d (which extends a), batched: both resume at a's snapshot, the last full block before a's
      // last token; b again resumes at its own; e shares 20 tokens with a and b: b found a's first block cached
      // with no snapshot after it and left a junction snapshot there, where e resumes.
      const auto n_a = static_cast<int32_t>(ps[0].size());
      const int32_t snapshot = (n_a - 1) / 16 * 16;
      ASSERT_GT(snapshot, 0);
      auto again = eng.submit(greedy_request(ps[0], kNew));
      auto extended = eng.submit(greedy_request(ps[3], kNew));
      auto b_again = eng.submit(greedy_request(ps[1], kNew));
      auto shorter = eng.submit(greedy_request(ps[4], kNew));
      while (eng.step()) eng.check_invariants();
      const Outcome a2 = collect(*again), d = collect(*extended), b2 = collect(*b_again), e = collect(*shorter);
      expect_identical(a2, ref[0], what + " repeated");
      expect_identical(d, ref[3], what + " extended");
      expect_identical(b2, ref[1], what + " b repeated");
      expect_identical(e, ref[4], what + " shorter shared prefix");
      EXPECT_EQ(a2.stats.n_cached_tokens, snapshot) << what;
      EXPECT_EQ(d.stats.n_cached_tokens, snapshot) << what;
      EXPECT_EQ(b2.stats.n_cached_tokens, (static_cast<int32_t>(ps[1].size()) - 1) / 16 * 16) << what;
      EXPECT_EQ(e.stats.n_cached_tokens, 16) << what;
      eng.check_invariants();
      EXPECT_EQ(eng.counters().n_blocks_in_use, 0) << what;
    }
  }
}

// A reply decoded token by token and then sent back as part of the next prompt gives the state decode had: the
// logits of the position after it equal the ones decode produced there, computed cold and resumed from the
// snapshot the first request left.
TEST_P(EngineHybrid, ReplySentBackEqualsDecode) {
  auto lm = load_shared_model(GetParam());
  ASSERT_TRUE(lm.model) << "needs ../shared/models/" << GetParam();
  const auto ps = prompts(*lm.tokenizer);
  const Outcome first = references(lm, {ps[0]})[0];
  const size_t n_vocab = static_cast<size_t>(lm.model->config().n_vocab);
  for (int32_t chunk : {3, 512}) {
    std::vector<int32_t> resent = ps[0];
    resent.insert(resent.end(), first.tokens.begin(), first.tokens.end() - 1);  // all but the last reply token
    for (const bool after_first : {false, true}) {
      engine::Engine eng(*lm.model, engine::with_eog(config_for(chunk, 2), *lm.tokenizer));
      if (after_first) {
        auto s = eng.submit(greedy_request(ps[0], kNew));
        eng.run_until_idle();
        expect_identical(collect(*s), first, "first request");
      }
      auto s = eng.submit(greedy_request(resent, 1));
      eng.run_until_idle();
      const Outcome o = collect(*s);
      ASSERT_EQ(o.tokens.size(), 1u);
      EXPECT_EQ(o.tokens[0], first.tokens.back());
      EXPECT_EQ(0, std::memcmp(o.logits.data(), first.logits.data() + (kNew - 1) * n_vocab, n_vocab * sizeof(float)))
          << "chunk " << chunk << ": the re-sent reply's state differs from decode's";
      if (after_first) {
        // The first request left a snapshot at the end of its prompt and one at its last block boundary of prompt
        // + reply (it computed all but its last token); the re-sent reply resumes at the later one it reaches.
        const auto n_a = static_cast<int32_t>(ps[0].size());
        const int32_t reply_end = (n_a + kNew - 1) / 16 * 16;
        const bool reaches = reply_end >= n_a && reply_end <= static_cast<int32_t>(resent.size()) - 1;
        EXPECT_EQ(o.stats.n_cached_tokens, reaches ? reply_end : (n_a - 1) / 16 * 16);
      }
    }
  }
}

// A pool of 6 blocks for three sequences that need 5-6 each: sequences are preempted (their blocks and state slot
// given back) and recomputed from position 0, with identical results.
TEST_P(EngineHybrid, PreemptedSequencesRecomputeIdentically) {
  auto lm = load_shared_model(GetParam());
  ASSERT_TRUE(lm.model) << "needs ../shared/models/" << GetParam();
  const auto ps = prompts(*lm.tokenizer);
  const std::vector<Outcome> ref = references(lm, ps);
  const uint64_t block_bytes = 16 * lm.model->memory().paged_bytes_per_token(kernels::KvType::F16);
  engine::Engine eng(*lm.model, engine::with_eog(config_for(7, 2, 6 * block_bytes), *lm.tokenizer));
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (size_t i = 0; i < 3; ++i) streams.push_back(eng.submit(greedy_request(ps[i], kNew)));
  while (eng.step()) eng.check_invariants();
  for (size_t i = 0; i < 3; ++i) expect_identical(collect(*streams[i]), ref[i], "prompt " + std::to_string(i));
  EXPECT_GT(eng.counters().n_preemptions, 0);
  eng.check_invariants();
}

// A snapshot budget of one: a's snapshot is evicted by c's, so a again finds its blocks but no snapshot to resume
// from, and computes cold with the same bits. One token each, so that no request files a reply snapshot.
TEST_P(EngineHybrid, EvictedSnapshotMeansACompute) {
  auto lm = load_shared_model(GetParam());
  ASSERT_TRUE(lm.model) << "needs ../shared/models/" << GetParam();
  const auto ps = prompts(*lm.tokenizer);
  const std::vector<Outcome> ref = references(lm, ps);
  auto cfg = config_for(64, 2);
  cfg.state_snapshot_bytes = lm.model->memory().state_bytes_per_sequence();
  engine::Engine eng(*lm.model, engine::with_eog(cfg, *lm.tokenizer));
  for (const size_t i : {size_t{0}, size_t{2}, size_t{0}}) {
    ASSERT_NE(ps[i].size() % 16, 0u) << "prompt " << i << " ends on a block boundary: its first token files one";
    auto s = eng.submit(greedy_request(ps[i], 1));
    eng.run_until_idle();
    const Outcome o = collect(*s);
    ASSERT_EQ(o.tokens.size(), 1u);
    EXPECT_EQ(o.tokens[0], ref[i].tokens[0]) << "prompt " << i;
    EXPECT_EQ(0, std::memcmp(o.logits.data(), ref[i].logits.data(), o.logits.size() * sizeof(float))) << i;
    EXPECT_EQ(o.stats.n_cached_tokens, 0) << "prompt " << i;
    eng.check_invariants();
  }
  auto hit = eng.submit(greedy_request(ps[0], kNew));  // a's snapshot was filed again just now
  eng.run_until_idle();
  const Outcome o = collect(*hit);
  expect_identical(o, ref[0], "hit");
  EXPECT_GT(o.stats.n_cached_tokens, 0);
}

// Shadow verification (--verify-fraction 1) recomputes every snapshot hit cold and compares the first generated
// position's logits bit for bit: all match.
TEST_P(EngineHybrid, ShadowVerificationOfSnapshotHitsMatches) {
  auto lm = load_shared_model(GetParam());
  ASSERT_TRUE(lm.model) << "needs ../shared/models/" << GetParam();
  const auto ps = prompts(*lm.tokenizer);
  auto cfg = config_for(16, 2);
  cfg.verify_fraction = 1.0;
  engine::Engine eng(*lm.model, engine::with_eog(cfg, *lm.tokenizer));
  int hits = 0;
  for (const size_t i : {size_t{0}, size_t{3}, size_t{0}, size_t{1}, size_t{1}}) {
    auto s = eng.submit(greedy_request(ps[i], 3));
    eng.run_until_idle();
    hits += collect(*s).stats.n_cached_tokens > 0 ? 1 : 0;
    eng.check_invariants();
  }
  const engine::EngineCounters c = eng.counters();
  EXPECT_EQ(hits, 3);  // d extends a, a again, b again
  EXPECT_EQ(c.n_verify_match, hits);
  EXPECT_EQ(c.n_verify_mismatch, 0);
  EXPECT_EQ(c.n_verify_dropped, 0);
}

INSTANTIATE_TEST_SUITE_P(Hybrids, EngineHybrid,
                         ::testing::Values("synth-qwen35-d128-f16.gguf", "synth-qwen35moe-d128-f16.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.find("moe") != std::string::npos ? std::string("qwen35moe")
                                                                                : std::string("qwen35");
                         });

}  // namespace
}  // namespace preface::test
