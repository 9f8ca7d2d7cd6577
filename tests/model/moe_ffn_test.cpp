// The mixture-of-experts FFN (model/layers/moe_ffn.h): routing for each gating kind, the expert keys read or
// refused by name, and bit-exactness when tokens of different sequences share experts in one batch. Agreement with
// llama.cpp is in oracle_test.cpp (synth-qwen3moe, synth-qwen35moe); hit == cold through the engine in
// engine/engine_hybrid_test.cpp (qwen35moe) and model/exactness_test.cpp (qwen3moe).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "model/arch/registry.h"
#include "model/layers/moe_ffn.h"
#include "model_harness.h"
#include "util/error.h"

namespace preface::test {
namespace {

constexpr const char* kQwen3Moe = "synth-qwen3moe-d128-f16.gguf";

model::Config::Moe moe_of(model::Config::ExpertGating gating, int32_t n, int32_t k) {
  model::Config::Moe m;
  m.gating = gating;
  m.n_experts = n;
  m.n_used = k;
  return m;
}

TEST(MoeRoute, SoftmaxThenTopKRenormalized) {
  model::Config::Moe m = moe_of(model::Config::ExpertGating::SoftmaxThenTopK, 5, 2);
  m.norm_weights = true;
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f, 0.0f};
  int32_t experts[2];
  float weights[2];
  model::MoeFfn::route(m, logits.data(), experts, weights);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 3);
  // Renormalized softmax of the two kept = softmax of their logits: e^2 / (e^2 + e^1).
  EXPECT_NEAR(weights[0], 1.0f / (1.0f + std::exp(-1.0f)), 1e-6f);
  EXPECT_NEAR(weights[0] + weights[1], 1.0f, 1e-6f);

  m.norm_weights = false;  // the kept probabilities of all five
  logits = {0.5f, 2.0f, -1.0f, 1.0f, 0.0f};
  model::MoeFfn::route(m, logits.data(), experts, weights);
  double sum = 0.0;
  for (const float l : {0.5f, 2.0f, -1.0f, 1.0f, 0.0f}) sum += std::exp(static_cast<double>(l));
  EXPECT_NEAR(weights[0], std::exp(2.0) / sum, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(1.0) / sum, 1e-6);
}

TEST(MoeRoute, TopKThenSoftmaxAndTies) {
  const model::Config::Moe m = moe_of(model::Config::ExpertGating::TopKThenSoftmax, 4, 3);
  std::vector<float> logits = {1.0f, 3.0f, 1.0f, 1.0f};  // a three-way tie for second place
  int32_t experts[3];
  float weights[3];
  model::MoeFfn::route(m, logits.data(), experts, weights);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 0);  // equal scores: the lower expert first
  EXPECT_EQ(experts[2], 2);
  EXPECT_NEAR(weights[0], std::exp(2.0f) / (std::exp(2.0f) + 2.0f), 1e-6f);
  EXPECT_EQ(weights[1], weights[2]);
}

TEST(MoeRoute, SigmoidScaled) {
  model::Config::Moe m = moe_of(model::Config::ExpertGating::Sigmoid, 3, 2);
  m.weights_scale = 2.5f;
  std::vector<float> logits = {0.0f, -2.0f, 1.0f};
  int32_t experts[2];
  float weights[2];
  model::MoeFfn::route(m, logits.data(), experts, weights);
  EXPECT_EQ(experts[0], 2);
  EXPECT_EQ(experts[1], 0);
  EXPECT_NEAR(weights[0], 2.5f / (1.0f + std::exp(-1.0f)), 1e-6f);
  EXPECT_NEAR(weights[1], 1.25f, 1e-6f);
}

TEST(MoeConfig, SharedFileReadsItsExperts) {
  const auto path = shared_file(std::string("models/") + kQwen3Moe);
  ASSERT_FALSE(path.empty()) << "needs ../shared/models/" << kQwen3Moe;
  auto m = model::Model::load(path.string(), 16);
  const model::Config::Moe& moe = m->config().moe;
  EXPECT_EQ(moe.n_experts, 16);
  EXPECT_EQ(moe.n_used, 4);
  EXPECT_EQ(moe.expert_ffn, 32);
  EXPECT_EQ(moe.shared_ffn, 0);
  EXPECT_TRUE(moe.norm_weights);
  EXPECT_EQ(moe.gating, model::Config::ExpertGating::SoftmaxThenTopK);
}

TEST(MoeConfig, BadKeysAreNamed) {
  struct Case {
    const char* what;
    std::function<void(gguf::Writer&)> edit;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"more used than there are", [](gguf::Writer& w) { w.set_u32("qwen3moe.expert_used_count", 17); },
       "qwen3moe.expert_used_count = 17 is out of range"},
      {"no experts", [](gguf::Writer& w) { w.set_u32("qwen3moe.expert_count", 0); },
       "qwen3moe.expert_count = 0 is out of range"},
      {"unknown gating", [](gguf::Writer& w) { w.set_u32("qwen3moe.expert_gating_func", 7); },
       "expert_gating_func = 7"},
      {"experts of another width", [](gguf::Writer& w) { w.set_u32("qwen3moe.expert_feed_forward_length", 64); },
       "ffn_gate_exps.weight has shape {128, 32, 16}, expected {128, 64, 16}"},
  };
  for (const Case& c : cases) {
    const std::string path = shared_model_copy(kQwen3Moe, "moe-bad", c.edit);
    ASSERT_FALSE(path.empty());
    try {
      model::Model::load(path, 16);
      ADD_FAILURE() << c.what << ": loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << c.what << ": " << e.what();
    }
  }
}

// Each token's experts are its own: two sequences that start with the same tokens route those tokens to the same
// experts in the same step (so the experts' rows hold tokens of both), and every logit still equals the sequence
// run alone; with expert_used_count 2 instead of 4 the logits move (the selection is read).
TEST(MoeBatch, SequencesSharingExpertsMatchEachAlone) {
  const auto path = shared_file(std::string("models/") + kQwen3Moe);
  ASSERT_FALSE(path.empty()) << "needs ../shared/models/" << kQwen3Moe;
  auto m = model::Model::load(path.string(), 64);
  const model::Config& c = m->config();
  const size_t n_vocab = static_cast<size_t>(c.n_vocab);
  constexpr int32_t kBlockSize = 4;
  std::vector<int32_t> a, b;
  for (int32_t i = 0; i < 19; ++i) a.push_back((i * 37 + 5) % c.n_vocab);
  b.assign(a.begin(), a.begin() + 9);  // the same 9 tokens, then different ones
  for (int32_t i = 0; i < 12; ++i) b.push_back((i * 53 + 101) % c.n_vocab);
  ThreadPool pool(2);
  const auto alone = [&](const std::vector<int32_t>& tokens, size_t chunk) {
    const auto n_blocks = static_cast<int32_t>((tokens.size() + kBlockSize - 1) / kBlockSize);
    TestKv kv(c, kernels::KvType::F16, kBlockSize, n_blocks);
    return run_chunked(*m, pool, kv.view, reversed_blocks(n_blocks), tokens, chunk);
  };
  const std::vector<float> alone_a = alone(a, 1), alone_b = alone(b, 1);  // one token per step: no sharing

  const int32_t blocks_a = 5, blocks_b = 6;
  TestKv kv(c, kernels::KvType::F16, kBlockSize, blocks_a + blocks_b);
  const std::vector<int32_t> table_a = reversed_blocks(blocks_a, blocks_b), table_b = reversed_blocks(blocks_b);
  model::ForwardBatch batch;
  batch.block_tables = {&table_a, &table_b};
  for (size_t i = 0; i < a.size(); ++i) batch.add(a[i], static_cast<int32_t>(i), 0, true);
  for (size_t i = 0; i < b.size(); ++i) batch.add(b[i], static_cast<int32_t>(i), 1, true);
  std::vector<float> logits(batch.size() * n_vocab);
  m->forward(batch, kv.view, pool, logits.data());
  EXPECT_EQ(std::memcmp(logits.data(), alone_a.data(), alone_a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(logits.data() + a.size() * n_vocab, alone_b.data(), alone_b.size() * sizeof(float)), 0);

  const std::string two = shared_model_copy(kQwen3Moe, "moe-two", [](gguf::Writer& w) {
    w.set_u32("qwen3moe.expert_used_count", 2);
  });
  auto m2 = model::Model::load(two, 64);
  const auto n_blocks = static_cast<int32_t>((a.size() + kBlockSize - 1) / kBlockSize);
  TestKv kv2(m2->config(), kernels::KvType::F16, kBlockSize, n_blocks);
  const std::vector<float> fewer = run_chunked(*m2, pool, kv2.view, reversed_blocks(n_blocks), a, a.size());
  EXPECT_NE(std::memcmp(fewer.data(), alone_a.data(), alone_a.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace preface::test
