// The engine's exception boundary: a step that throws (here a backend that fails on purpose) finishes the
// requests it touched with FinishReason::Error and a message, releases their blocks, and the engine goes on
// serving: later requests give exactly the tokens and logits of a healthy engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/engine_harness.h"
#include "engine/fault_backend.h"

namespace preface::test {
namespace {

// Only a prompt longer than this reaches it; the healthy requests here stay far below.
constexpr int32_t kFaultPos = 300;

engine::EngineConfig fault_config() {
  engine::EngineConfig cfg;
  cfg.block_size = 16;
  cfg.max_batch_tokens = 64;
  cfg.n_threads = 1;
  cfg.kv_cache_bytes = 128ull * 16 * 640;  // stories260K f16: 640 bytes per token
  return cfg;
}

class EngineFault : public ::testing::Test {
 protected:
  void SetUp() override {
    lm_ = load_shared_model("stories260K.gguf");
    ASSERT_TRUE(lm_.model) << "needs ../shared/models/stories260K.gguf";
    const auto cfg = engine::with_eog(fault_config(), *lm_.tokenizer);
    auto backend = std::make_unique<FaultBackend>(*lm_.model, cfg, kFaultPos);
    backend_ = backend.get();
    eng_ = std::make_unique<engine::Engine>(std::move(backend), cfg);
  }
  std::vector<int32_t> prompt(uint64_t seed, size_t n) const {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> out(n);
    for (auto& t : out) t = 3 + static_cast<int32_t>(rng() % static_cast<uint64_t>(lm_.model->config().n_vocab - 3));
    return out;
  }
  Outcome healthy(const std::vector<int32_t>& p, int32_t n_new) {
    engine::Engine ref(*lm_.model, engine::with_eog(fault_config(), *lm_.tokenizer));
    auto s = ref.submit(greedy_request(p, n_new));
    ref.run_until_idle();
    return collect(*s);
  }
  void expect_clean() {
    EXPECT_NO_THROW(eng_->check_invariants());
    EXPECT_EQ(eng_->counters().n_blocks_in_use, 0) << "a failed request leaked KV blocks";
  }

  LoadedModel lm_;
  FaultBackend* backend_ = nullptr;
  std::unique_ptr<engine::Engine> eng_;
};

TEST_F(EngineFault, FailedForwardEndsItsRequestAndTheEngineServesOn) {
  const auto p = prompt(1, kFaultPos + 20);  // fails in its fifth prefill chunk: blocks are already held
  auto bad = eng_->submit(greedy_request(p, 4));
  eng_->run_until_idle();
  const Outcome failed = collect(*bad);
  EXPECT_EQ(failed.stats.finish, engine::FinishReason::Error);
  EXPECT_NE(failed.stats.error.find("injected fault"), std::string::npos) << failed.stats.error;
  EXPECT_TRUE(failed.tokens.empty());
  EXPECT_EQ(backend_->n_faults.load(), 1);
  EXPECT_EQ(eng_->counters().n_failed_steps, 1);
  expect_clean();

  const auto good = prompt(2, 50);
  auto s = eng_->submit(greedy_request(good, 8));
  eng_->run_until_idle();
  const Outcome after = collect(*s);
  EXPECT_EQ(after.stats.finish, engine::FinishReason::Length);
  expect_identical(after, healthy(good, 8), "after a failed step");
  expect_clean();
}

// A request that fails while another decodes in the same batch takes that batch down with it (one forward pass),
// but nothing else: a request still waiting runs afterwards, exactly.
TEST_F(EngineFault, OnlyTheFailedBatchIsAffected) {
  eng_->start();
  const auto a = prompt(3, 30), c = prompt(5, 30);
  auto sa = eng_->submit(greedy_request(a, 200));
  ASSERT_TRUE(sa->next().has_value());  // a is decoding
  const auto p = prompt(4, kFaultPos + 1);
  auto sb = eng_->submit(greedy_request(p, 4));
  const Outcome b = collect(*sb);
  EXPECT_EQ(b.stats.finish, engine::FinishReason::Error);
  const Outcome a_out = collect(*sa);  // Error when it shared b's batch (or Length had it finished before)
  EXPECT_TRUE(a_out.stats.finish == engine::FinishReason::Error || a_out.stats.finish == engine::FinishReason::Length);
  auto sc = eng_->submit(greedy_request(c, 6));
  const Outcome c_out = collect(*sc);
  eng_->stop();
  expect_identical(c_out, healthy(c, 6), "a request after the failed batch");
  expect_clean();
}

// A failure inside scheduling (a block copy for a partial prefix hit) fails the requests the scheduler held; the
// next request is served.
TEST_F(EngineFault, FailedSchedulingStepIsContained) {
  const auto shared = prompt(6, 60);  // registers blocks [0, 48)
  auto s1 = eng_->submit(greedy_request(shared, 2));
  eng_->run_until_idle();
  ASSERT_EQ(collect(*s1).stats.finish, engine::FinishReason::Length);
  backend_->copy_fault = true;
  auto longer = shared;
  longer.resize(40);  // hits [0, 32) and rows [32, 40) of the third block: copy-on-write
  longer.push_back(9);
  auto s2 = eng_->submit(greedy_request(longer, 2));
  eng_->run_until_idle();
  const Outcome failed = collect(*s2);
  EXPECT_EQ(failed.stats.finish, engine::FinishReason::Error);
  EXPECT_NE(failed.stats.error.find("block copy"), std::string::npos) << failed.stats.error;
  expect_clean();
  const auto next = prompt(7, 25);
  auto s3 = eng_->submit(greedy_request(next, 5));
  eng_->run_until_idle();
  expect_identical(collect(*s3), healthy(next, 5), "after a failed scheduling step");
  expect_clean();
}

}  // namespace
}  // namespace preface::test
