// CpuBackend's block records: a block read out and written into another block (of this backend or a second one
// on the same model) makes the next token's logits identical, by memcmp, to attending over the original block.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/cpu_backend.h"
#include "engine_harness.h"
#include "util/error.h"

namespace preface::test {
namespace {

constexpr int32_t kBlock = 16;

// Prefills prompt (whole blocks) into table, then returns the logits of token `next` after it.
std::vector<float> prefill(engine::Backend& b, const std::vector<int32_t>& prompt, const std::vector<int32_t>& table) {
  model::ForwardBatch batch;
  batch.block_tables = {&table};
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
  }
  std::vector<float> logits(static_cast<size_t>(b.config().n_vocab));
  b.forward(batch, logits.data());
  return logits;
}

std::vector<float> next_logits(engine::Backend& b, int32_t token, int32_t pos, const std::vector<int32_t>& table) {
  model::ForwardBatch batch;
  batch.block_tables = {&table};
  batch.add(token, pos, 0, true);
  std::vector<float> logits(static_cast<size_t>(b.config().n_vocab));
  b.forward(batch, logits.data());
  return logits;
}

TEST(CpuBackend, ABlockRecordRestoresTheSameLogits) {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  ASSERT_TRUE(lm.model) << "needs ../shared/models/stories260K.gguf";
  engine::CpuBackend a(*lm.model, kernels::KvType::F16, kBlock, 8, 2);
  engine::CpuBackend b(*lm.model, kernels::KvType::F16, kBlock, 8, 1);
  std::vector<int32_t> prompt = lm.tokenizer->encode("Once upon a time, there was a little girl named Lily. She", true);
  prompt.resize(2 * kBlock, prompt.back());
  ASSERT_EQ(a.block_bytes(), a.kv_bytes() / 8);

  prefill(a, prompt, {1, 4});
  const std::vector<float> want = next_logits(a, 42, 2 * kBlock, {1, 4, 6});

  // The two records, out of a and into other block ids of a and of b (1 thread: same bits).
  std::vector<uint8_t> r0(a.block_bytes()), r1(a.block_bytes());
  a.read_block(1, r0);
  a.read_block(4, r1);
  a.write_block(2, r0);
  a.write_block(7, r1);
  b.write_block(0, r0);
  b.write_block(3, r1);
  std::vector<uint8_t> back(b.block_bytes());
  b.read_block(3, back);
  EXPECT_EQ(back, r1);

  const std::vector<float> same_pool = next_logits(a, 42, 2 * kBlock, {2, 7, 5});
  const std::vector<float> other_pool = next_logits(b, 42, 2 * kBlock, {0, 3, 5});
  ASSERT_EQ(std::memcmp(same_pool.data(), want.data(), want.size() * sizeof(float)), 0);
  ASSERT_EQ(std::memcmp(other_pool.data(), want.data(), want.size() * sizeof(float)), 0);

  // A record that was never written does not give those logits (the test can fail).
  const std::vector<float> unwritten = next_logits(b, 42, 2 * kBlock, {0, 6, 5});
  EXPECT_NE(std::memcmp(unwritten.data(), want.data(), want.size() * sizeof(float)), 0);
}

TEST(CpuBackend, BlockRecordsCheckIdsAndSizes) {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  ASSERT_TRUE(lm.model) << "needs ../shared/models/stories260K.gguf";
  engine::CpuBackend a(*lm.model, kernels::KvType::BF16, kBlock, 3, 1);
  std::vector<uint8_t> r(a.block_bytes());
  EXPECT_THROW(a.read_block(3, r), Error);
  EXPECT_THROW(a.write_block(-1, r), Error);
  std::vector<uint8_t> short_record(a.block_bytes() - 1);
  EXPECT_THROW(a.read_block(0, short_record), Error);
  EXPECT_THROW(a.write_block(0, short_record), Error);
}

}  // namespace
}  // namespace preface::test
