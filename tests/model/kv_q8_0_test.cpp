// Q8_0 KV storage in the forward pass, on models whose head_dim is a multiple of 32 (synth_kv_models.h): logits are
// bit-identical however the sequence is fed and at any thread count; rows are stored as the GGUF codec's Q8_0
// bytes of the f32 rows; the logits stay close to those with F16 storage (same argmax almost everywhere) without
// being the same; and storage a model cannot hold (rows not of whole blocks, rotation of small heads) is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/model.h"
#include "model_harness.h"
#include "support/shared_data.h"
#include "synth_kv_models.h"
#include "util/error.h"

namespace preface::test {
namespace {

constexpr int32_t kBlockSize = 16;

std::vector<int32_t> spread_tokens(int32_t n_vocab, size_t n, uint32_t salt) {
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7919u + salt * 104729u + 3u) % n_vocab);
  return ids;
}

size_t argmax(const float* x, size_t n) { return static_cast<size_t>(std::max_element(x, x + n) - x); }

// Index of the first differing float, or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

class KvQ8_0 : public ::testing::TestWithParam<std::string> {};

// Whole, one token at a time and chunks of 7, at 1 and 2 threads, block size 4 (many blocks): memcmp-equal.
TEST_P(KvQ8_0, IncrementalEqualsFullRecomputeAtAnyThreadCount) {
  const std::string path = q8_0_kv_model_path(GetParam());
  if (path.empty()) return;
  auto m = model::Model::load(path, 64);
  const model::Config& c = m->config();
  ASSERT_EQ(c.head_dim % 32, 0);
  constexpr size_t kSeqLen = 45;
  const std::vector<int32_t> tokens = spread_tokens(c.n_vocab, kSeqLen, 1);
  const int32_t n_blocks = (kSeqLen + 3) / 4;
  const std::vector<int32_t> table = reversed_blocks(n_blocks);
  std::vector<float> reference;  // full recompute, 1 thread
  for (int n_threads : {1, 2}) {
    ThreadPool pool(n_threads);
    for (size_t chunk : {kSeqLen, size_t{1}, size_t{7}}) {
      TestKv kv(c, kernels::KvType::Q8_0, 4, n_blocks);
      const std::vector<float> logits = run_chunked(*m, pool, kv.view, table, tokens, chunk);
      if (reference.empty()) {
        reference = logits;
        continue;
      }
      const int64_t diff = first_difference(reference, logits);
      EXPECT_EQ(diff, -1) << "threads " << n_threads << ", chunk " << chunk << ": first difference at position "
                          << diff / c.n_vocab << ", token " << diff % c.n_vocab;
    }
  }
}

// Layer 0's K and V rows do not depend on the KV type (they come from the embeddings alone), so the Q8_0 bytes
// stored for them must be the codec's encoding, head by head, of the f32 rows stored by an F32 run.
TEST_P(KvQ8_0, StoredRowsAreTheCodecsEncodingOfTheF32Rows) {
  const std::string path = q8_0_kv_model_path(GetParam());
  if (path.empty()) return;
  auto m = model::Model::load(path, 64);
  const model::Config& c = m->config();
  ASSERT_EQ(c.head_dim % 32, 0);
  const std::vector<int32_t> tokens = spread_tokens(c.n_vocab, 21, 1);
  const std::vector<int32_t> table = reversed_blocks(2);
  ThreadPool pool(2);
  TestKv f32(c, kernels::KvType::F32, kBlockSize, 2), q8(c, kernels::KvType::Q8_0, kBlockSize, 2);
  run_chunked(*m, pool, f32.view, table, tokens, tokens.size());
  run_chunked(*m, pool, q8.view, table, tokens, 5);
  const size_t head_dim = static_cast<size_t>(c.head_dim);
  ASSERT_EQ(q8.view.k_row_bytes(0), static_cast<size_t>(c.n_kv_heads) * head_dim / 32 * 34);
  for (int32_t p = 0; p < static_cast<int32_t>(tokens.size()); ++p) {
    const int32_t block = table[static_cast<size_t>(p / kBlockSize)], slot = p % kBlockSize;
    for (bool is_k : {true, false}) {
      const auto* x = reinterpret_cast<const float*>(is_k ? f32.view.k_row(0, block, slot)
                                                          : f32.view.v_row(0, block, slot));
      const uint8_t* got = is_k ? q8.view.k_row(0, block, slot) : q8.view.v_row(0, block, slot);
      for (int32_t h = 0; h < c.n_kv_heads; ++h) {
        const auto want = gguf::encode_values(gguf::TensorType::Q8_0, x + h * head_dim, head_dim);
        ASSERT_EQ(std::memcmp(got + want.size() * static_cast<size_t>(h), want.data(), want.size()), 0)
            << (is_k ? "K" : "V") << " position " << p << " head " << h;
      }
    }
  }
}

// Q8_0 KV moves the logits a little from F16 KV: measured max |diff| (64 positions, every logit) is printed;
// the bound is loose, relative to the logits' spread. The argmax must agree on at least 90% of the positions.
TEST_P(KvQ8_0, LogitsCloseToF16Kv) {
  const std::string path = q8_0_kv_model_path(GetParam());
  if (path.empty()) return;
  auto m = model::Model::load(path, 64);
  const model::Config& c = m->config();
  const size_t n_vocab = static_cast<size_t>(c.n_vocab), n = 64;
  const std::vector<int32_t> tokens = spread_tokens(c.n_vocab, n, 7);
  const std::vector<int32_t> table = reversed_blocks(4);
  ThreadPool pool(2);
  TestKv f16(c, kernels::KvType::F16, kBlockSize, 4), q8(c, kernels::KvType::Q8_0, kBlockSize, 4);
  const std::vector<float> a = run_chunked(*m, pool, f16.view, table, tokens, n);
  const std::vector<float> b = run_chunked(*m, pool, q8.view, table, tokens, n);
  double max_diff = 0.0, max_abs = 0.0;
  size_t same_argmax = 0;
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < n_vocab; ++i) {
      ASSERT_TRUE(std::isfinite(b[t * n_vocab + i]));
      max_diff = std::max(max_diff, std::fabs(double{a[t * n_vocab + i]} - b[t * n_vocab + i]));
      max_abs = std::max(max_abs, std::fabs(double{a[t * n_vocab + i]}));
    }
    same_argmax += argmax(&a[t * n_vocab], n_vocab) == argmax(&b[t * n_vocab], n_vocab) ? 1 : 0;
  }
  std::printf("[ measured ] %s: q8_0 vs f16 KV max |diff| %.6g (max |logit| %.4g), argmax agrees %zu/%zu\n",
              GetParam().c_str(), max_diff, max_abs, same_argmax, n);
  RecordProperty("max_abs_diff", std::to_string(max_diff));
  EXPECT_GT(max_diff, 0.0) << "q8_0 KV gave exactly the f16 KV logits: is it really stored as Q8_0?";
  EXPECT_LT(max_diff, 0.05 * max_abs);
  EXPECT_GE(same_argmax * 10, n * 9);
}

INSTANTIATE_TEST_SUITE_P(Models, KvQ8_0, ::testing::ValuesIn(q8_0_kv_model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return q8_0_kv_model_test_name(info.param);
                         });

// A block type needs rows (KV heads x head size) of whole 32-value blocks, rotation heads of multiples of 64:
// forward refuses other storage before writing anything. Rows of 24 values (one KV head of 24) hold no Q8_0 block;
// stories260K's rows of 4 x 8 values are one block, but its heads are too small to rotate.
void expect_refused(model::Model& m, const kernels::KvFormat& f, const std::string& needle) {
  const model::Config& c = m.config();
  TestKv kv(c, f, kBlockSize, 1);
  const std::vector<int32_t> table = {0};
  model::ForwardBatch batch;
  batch.block_tables = {&table};
  batch.add(1, 0, 0, true);
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  ThreadPool pool(1);
  try {
    m.forward(batch, kv.view, pool, logits.data());
    FAIL() << "forward accepted " << f.name();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::all_of(kv.bytes.begin(), kv.bytes.end(), [](uint8_t b) { return b == 0; }));
}

TEST(KvQ8_0Refused, RowsNotOfWholeBlocksAndHeadsTooSmallToRotate) {
  const std::string row24 = q8_0_kv_model_path("llama-row24-f16");
  if (row24.empty()) return;
  auto m = model::Model::load(row24, 64);
  ASSERT_EQ(m->config().kv_row_values(), 24);
  expect_refused(*m, kernels::KvType::Q8_0, "rows of 24 values");
  expect_refused(*m, kernels::KvFormat(kernels::KvType::F16, kernels::KvType::Q4_0), "q4_0");
  auto stories = model::Model::load(shared_file("models/stories260K.gguf").string(), 64);
  expect_refused(*stories, kernels::KvFormat(kernels::KvType::Q8_0, kernels::KvType::Q8_0, true, false),
                 "multiple of 64");
}

}  // namespace
}  // namespace preface::test
