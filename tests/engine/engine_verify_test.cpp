// Shadow verification (EngineConfig::verify_fraction): with F = 1 every cache hit is recomputed cold when the
// engine is idle and its first generated position's logits compared bit for bit. Over the exactness scenarios
// (full hits, extended prompts, copy-on-write partial blocks, chunked prefill, batches, 1 and 2 threads) there is
// no mismatch; a cached K row corrupted behind the engine's back is caught, counted and logged with the request id
// and the first differing logit. Shadows yield to live work and the fraction is honoured.
#include <gtest/gtest.h>

#include <random>

#include "engine/engine_harness.h"
#include "engine/fault_backend.h"

namespace preface::test {
namespace {

engine::EngineConfig verify_config(int32_t max_batch_tokens, int32_t n_threads, double fraction) {
  engine::EngineConfig cfg;
  cfg.block_size = 16;
  cfg.max_batch_tokens = max_batch_tokens;
  cfg.n_threads = n_threads;
  cfg.kv_cache_bytes = 256ull * 16 * 640;  // stories260K f16: 640 bytes per token
  cfg.verify_fraction = fraction;
  return cfg;
}

class EngineVerify : public ::testing::Test {
 protected:
  void SetUp() override {
    lm_ = load_shared_model("stories260K.gguf");
    ASSERT_TRUE(lm_.model) << "needs ../shared/models/stories260K.gguf";
  }
  std::vector<int32_t> prompt(uint64_t seed, size_t n) const {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> out(n);
    for (auto& t : out) t = 3 + static_cast<int32_t>(rng() % static_cast<uint64_t>(lm_.model->config().n_vocab - 3));
    return out;
  }
  // Submits every prompt at once, runs to idle; returns how many of them hit the cache.
  int run_batch(engine::Engine& eng, const std::vector<std::vector<int32_t>>& prompts) {
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (const auto& p : prompts) streams.push_back(eng.submit(greedy_request(p, 3)));
    eng.run_until_idle();
    int hits = 0;
    for (auto& s : streams) hits += collect(*s).stats.n_cached_tokens > 0 ? 1 : 0;
    return hits;
  }
  LoadedModel lm_;
};

TEST_F(EngineVerify, ExactnessScenariosGiveNoMismatch) {
  for (const auto& [batch_tokens, threads] : {std::pair{64, 1}, std::pair{16, 1}, std::pair{512, 2}}) {
    engine::Engine eng(*lm_.model, engine::with_eog(verify_config(batch_tokens, threads, 1.0), *lm_.tokenizer));
    const auto base = prompt(7, 60);  // three full blocks and a tail
    auto extended = base;
    for (int32_t t : prompt(8, 30)) extended.push_back(t);
    auto partial = std::vector<int32_t>(base.begin(), base.begin() + 40);  // block 2 partly shared: copy-on-write
    for (int32_t t : prompt(9, 9)) partial.push_back(t);
    auto other = prompt(10, 50);

    int hits = run_batch(eng, {base, other});
    EXPECT_EQ(hits, 0);
    hits += run_batch(eng, {base});
    hits += run_batch(eng, {extended, partial, other});  // a batch of hits
    hits += run_batch(eng, {extended, partial});
    const engine::EngineCounters c = eng.counters();
    SCOPED_TRACE("max_batch_tokens " + std::to_string(batch_tokens) + ", threads " + std::to_string(threads));
    EXPECT_EQ(hits, 6);
    EXPECT_EQ(c.n_verify_match, hits);
    EXPECT_EQ(c.n_verify_mismatch, 0);
    EXPECT_EQ(c.n_verify_pending, 0);
    EXPECT_EQ(c.n_verify_dropped, 0);
    EXPECT_EQ(c.n_requests_finished, c.n_requests) << "shadows are not counted as requests";
    EXPECT_EQ(c.n_blocks_in_use, 0);
    EXPECT_NO_THROW(eng.check_invariants());
  }
}

TEST_F(EngineVerify, CorruptedCachedKRowIsCountedAndLogged) {
  const auto cfg = engine::with_eog(verify_config(64, 1, 1.0), *lm_.tokenizer);
  auto backend = std::make_unique<FaultBackend>(*lm_.model, cfg, /*fault_pos=*/1 << 30);
  FaultBackend* raw = backend.get();
  engine::Engine eng(std::move(backend), cfg);
  const auto p = prompt(21, 50);
  ASSERT_EQ(run_batch(eng, {p}), 0);

  // The first block of the cached chain: layer 0's K row of position 1, every value negated (sign bit of f16).
  int32_t first_block = -1;
  for (const engine::CachedBlockInfo& b : eng.cached_blocks()) {
    if (b.key.parent_hash == b.key.root) first_block = b.id;
  }
  ASSERT_GE(first_block, 0);
  std::vector<uint8_t> record(raw->block_bytes());
  raw->read_block(first_block, record);
  const size_t row_bytes = record.size() / (2 * static_cast<size_t>(lm_.model->config().n_layers) * 16);
  for (size_t i = row_bytes; i < 2 * row_bytes; i += 2) record[i + 1] ^= 0x80;  // the record opens with layer 0 K
  raw->write_block(first_block, record);

  testing::internal::CaptureStderr();
  auto s = eng.submit(greedy_request(p, 2));
  eng.run_until_idle();
  const std::string log = testing::internal::GetCapturedStderr();
  const Outcome hit = collect(*s);
  ASSERT_GT(hit.stats.n_cached_tokens, 0);
  const engine::EngineCounters c = eng.counters();
  EXPECT_EQ(c.n_verify_mismatch, 1);
  EXPECT_EQ(c.n_verify_match, 0);
  EXPECT_NE(log.find("cache verification MISMATCH: request " + std::to_string(hit.stats.request_id) + " "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("logit["), std::string::npos) << log;
  EXPECT_NO_THROW(eng.check_invariants());
}

TEST_F(EngineVerify, ShadowYieldsToLiveWorkAndFinishesLater) {
  engine::Engine eng(*lm_.model, engine::with_eog(verify_config(16, 1, 1.0), *lm_.tokenizer));
  const auto p = prompt(31, 70);
  ASSERT_EQ(run_batch(eng, {p}), 0);
  auto hit = eng.submit(greedy_request(p, 1));
  while (!hit->finished()) eng.step();  // the hit's step also starts its shadow (nothing live is left)
  EXPECT_EQ(eng.counters().n_verify_pending, 1);
  eng.step();  // the shadow runs one chunk of 16 of its 70 tokens
  auto live = eng.submit(greedy_request(prompt(32, 20), 2));
  eng.step();  // live work: the shadow is cancelled and queued again; the live request runs
  EXPECT_EQ(eng.counters().n_verify_pending, 1);
  EXPECT_EQ(eng.counters().n_running, 1);
  eng.run_until_idle();
  EXPECT_EQ(collect(*live).tokens.size(), 2u);
  const engine::EngineCounters c = eng.counters();
  EXPECT_EQ(c.n_verify_match, 1);
  EXPECT_EQ(c.n_verify_pending, 0);
  EXPECT_EQ(c.n_blocks_in_use, 0);
}

TEST_F(EngineVerify, FractionSelectsEveryKthHit) {
  for (const auto& [fraction, expected] : {std::pair{0.0, 0}, std::pair{0.25, 2}, std::pair{0.5, 4}}) {
    engine::Engine eng(*lm_.model, engine::with_eog(verify_config(64, 1, fraction), *lm_.tokenizer));
    const auto p = prompt(41, 40);
    run_batch(eng, {p});
    for (int i = 0; i < 8; ++i) ASSERT_EQ(run_batch(eng, {p}), 1);
    EXPECT_EQ(eng.counters().n_verify_match, expected) << "fraction " << fraction;
  }
}

}  // namespace
}  // namespace preface::test
