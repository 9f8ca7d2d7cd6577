// Bit-exactness of the paged-KV forward pass: a token's logits must not depend on how its sequence was fed
// (whole, one token at a time, chunks of 7), on the thread count, or on other sequences sharing the batch; for
// every KV format the model's rows can hold (block types, mixed K/V types, rotation).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/model.h"
#include "util/error.h"
#include "model_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

constexpr int32_t kBlockSize = 4;  // small, so a sequence spans many blocks
constexpr size_t kSeqLen = 37;

// Deterministic, well spread token ids.
std::vector<int32_t> test_tokens(int32_t n_vocab, size_t n, uint32_t salt) {
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7919u + salt * 104729u + 11u) % n_vocab);
  return ids;
}

// Index of the first differing float, or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

class Exactness : public ::testing::TestWithParam<std::string> {};

TEST_P(Exactness, IncrementalEqualsFullRecomputeAtAnyThreadCount) {
  const auto path = shared_file("models/" + GetParam());
  if (path.empty()) return;
  auto m = model::Model::load(path.string(), 64);
  const model::Config& c = m->config();
  const std::vector<int32_t> tokens = test_tokens(c.n_vocab, kSeqLen, 1);
  const int32_t n_blocks = (kSeqLen + kBlockSize - 1) / kBlockSize;
  const std::vector<int32_t> table = reversed_blocks(n_blocks);

  // Every single type, a mixed pair and rotated formats, where the model's rows and heads can hold them.
  using kernels::KvFormat;
  using kernels::KvType;
  std::vector<KvFormat> kv_types;
  for (KvType t : kernels::kAllKvTypes) kv_types.emplace_back(t);
  kv_types.emplace_back(KvType::Q8_0, KvType::Q4_0);
  kv_types.emplace_back(KvType::Q8_0, KvType::Q4_0, true, true);
  kv_types.emplace_back(KvType::F16, KvType::IQ4_NL, false, true);
  for (const KvFormat& kv_type : kv_types) {
    try {
      m->memory().check_type_fits(kv_type);
    } catch (const Error&) {
      continue;  // rows not of whole blocks, or heads too small to rotate
    }
    std::vector<float> reference;  // full recompute, 1 thread
    for (int n_threads : {1, 2}) {
      ThreadPool pool(n_threads);
      for (size_t chunk : {kSeqLen, size_t{1}, size_t{7}}) {
        TestKv kv(c, kv_type, kBlockSize, n_blocks);
        const std::vector<float> logits = run_chunked(*m, pool, kv.view, table, tokens, chunk);
        if (reference.empty()) {
          reference = logits;
          continue;
        }
        const int64_t diff = first_difference(reference, logits);
        EXPECT_EQ(diff, -1) << "kv " << kv_type.name() << ", threads " << n_threads << ", chunk "
                            << chunk << ": first difference at position " << diff / c.n_vocab << ", token "
                            << diff % c.n_vocab;
      }
    }
  }
}

// The attention of a new token must come from the stored K/V rows: wiping the storage changes its logits.
TEST_P(Exactness, AttentionReadsTheStorage) {
  const auto path = shared_file("models/" + GetParam());
  if (path.empty()) return;
  auto m = model::Model::load(path.string(), 64);
  const model::Config& c = m->config();
  const std::vector<int32_t> tokens = test_tokens(c.n_vocab, 12, 5);
  const std::vector<int32_t> table = {0, 1, 2};
  ThreadPool pool(1);
  TestKv kv(c, kernels::KvType::F32, kBlockSize, 3);
  const std::vector<float> reference = run_chunked(*m, pool, kv.view, table, tokens, tokens.size());

  TestKv wiped(c, kernels::KvType::F32, kBlockSize, 3);
  const std::vector<int32_t> head(tokens.begin(), tokens.end() - 1);
  run_chunked(*m, pool, wiped.view, table, head, head.size());
  std::fill(wiped.bytes.begin(), wiped.bytes.end(), 0);
  model::ForwardBatch batch;
  batch.block_tables = {&table};
  batch.add(tokens.back(), static_cast<int32_t>(head.size()), 0, true);
  std::vector<float> last(static_cast<size_t>(c.n_vocab));
  m->forward(batch, wiped.view, pool, last.data());
  const std::vector<float> expected(reference.end() - c.n_vocab, reference.end());
  EXPECT_NE(first_difference(expected, last), -1);
}

TEST_P(Exactness, SequencesSharingABatchMatchEachAlone) {
  const auto path = shared_file("models/" + GetParam());
  if (path.empty()) return;
  auto m = model::Model::load(path.string(), 64);
  const model::Config& c = m->config();
  const size_t n_vocab = static_cast<size_t>(c.n_vocab);
  const std::vector<int32_t> a = test_tokens(c.n_vocab, 23, 2);
  const std::vector<int32_t> b = test_tokens(c.n_vocab, 17, 3);
  const int32_t blocks_a = (23 + kBlockSize - 1) / kBlockSize, blocks_b = (17 + kBlockSize - 1) / kBlockSize;
  ThreadPool pool(2);

  TestKv alone_kv(c, kernels::KvType::F16, kBlockSize, blocks_a);
  const std::vector<int32_t> alone_table = reversed_blocks(blocks_a);
  const std::vector<float> alone_a = run_chunked(*m, pool, alone_kv.view, alone_table, a, a.size());
  TestKv alone_kv_b(c, kernels::KvType::F16, kBlockSize, blocks_b);
  const std::vector<int32_t> alone_table_b = reversed_blocks(blocks_b);
  const std::vector<float> alone_b = run_chunked(*m, pool, alone_kv_b.view, alone_table_b, b, b.size());

  // Both sequences in one storage, interleaved in each batch: A's first 11 tokens with all of B, then the rest.
  TestKv kv(c, kernels::KvType::F16, kBlockSize, blocks_a + blocks_b);
  const std::vector<int32_t> table_a = reversed_blocks(blocks_a, blocks_b);
  const std::vector<int32_t> table_b = reversed_blocks(blocks_b);
  model::ForwardBatch batch;
  batch.block_tables = {&table_a, &table_b};
  std::vector<float> got_a(a.size() * n_vocab), got_b(b.size() * n_vocab);
  std::vector<float> logits;
  for (size_t i = 0; i < std::max<size_t>(11, b.size()); ++i) {
    if (i < 11) batch.add(a[i], static_cast<int32_t>(i), 0, true);
    if (i < b.size()) batch.add(b[i], static_cast<int32_t>(i), 1, true);
  }
  logits.resize(batch.size() * n_vocab);
  m->forward(batch, kv.view, pool, logits.data());
  for (size_t t = 0; t < batch.size(); ++t) {
    std::vector<float>& dst = batch.seq[t] == 0 ? got_a : got_b;
    std::memcpy(dst.data() + static_cast<size_t>(batch.pos[t]) * n_vocab, logits.data() + t * n_vocab,
                n_vocab * sizeof(float));
  }
  batch.clear();
  for (size_t i = 11; i < a.size(); ++i) batch.add(a[i], static_cast<int32_t>(i), 0, true);
  m->forward(batch, kv.view, pool, got_a.data() + 11 * n_vocab);

  EXPECT_EQ(first_difference(alone_a, got_a), -1);
  EXPECT_EQ(first_difference(alone_b, got_b), -1);
}

TEST_P(Exactness, OnlyTokensWantingLogitsGetThemInBatchOrder) {
  const auto path = shared_file("models/" + GetParam());
  if (path.empty()) return;
  auto m = model::Model::load(path.string(), 64);
  const model::Config& c = m->config();
  const size_t n_vocab = static_cast<size_t>(c.n_vocab);
  const std::vector<int32_t> tokens = test_tokens(c.n_vocab, 9, 4);
  ThreadPool pool(1);
  const std::vector<int32_t> table = {0, 1, 2};
  TestKv kv_all(c, kernels::KvType::F16, kBlockSize, 3);
  const std::vector<float> all = run_chunked(*m, pool, kv_all.view, table, tokens, tokens.size());

  TestKv kv(c, kernels::KvType::F16, kBlockSize, 3);
  model::ForwardBatch batch;
  batch.block_tables = {&table};
  for (size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, i == 2 || i == 8);
  std::vector<float> two(2 * n_vocab);
  m->forward(batch, kv.view, pool, two.data());
  EXPECT_EQ(std::memcmp(two.data(), all.data() + 2 * n_vocab, n_vocab * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(two.data() + n_vocab, all.data() + 8 * n_vocab, n_vocab * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, Exactness,
                         ::testing::Values("stories260K.gguf", "synth-spm-d128-f16.gguf", "synth-spm-d128-q8_0.gguf",
                                           "synth-spm-d128-q4_0.gguf", "synth-gpt2-d128-q8_0-tied.gguf",
                                           "synth-qwen2-d128-bf16.gguf", "synth-llama-d256-q4_k_m.gguf",
                                           "synth-llama-d256-q2_k.gguf", "synth-llama-d256-q5_k_m.gguf",
                                           "synth-llama-d256-q5_0.gguf", "synth-qwen3-d256-f16.gguf",
                                           "synth-phi3-d256-f16.gguf", "synth-llama-rope-linear-d256-f16.gguf",
                                           "synth-gemma2-d128-f16.gguf", "synth-gemma3-d256-f16.gguf",
                                           "synth-qwen3moe-d128-f16.gguf", "synth-gpt-oss-d128-f16.gguf",
                                           "2026/synth-gpt-oss-d128-mxfp4.gguf", "synth-gemma4-d128-f16.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.size() - 5);
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace preface::test
