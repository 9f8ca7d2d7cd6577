// KV formats in the forward pass beyond one type: rotated rows are the Hadamard rotation of the rows an unrotated
// pool stores (K by the head's largest power-of-two blocks, V by 64s), a rotated pool's logits are those of the
// unrotated one up to rounding, and K and V of different types are each stored as their own type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/hadamard.h"
#include "kernels/kv_rows.h"
#include "model/model.h"
#include "model_harness.h"
#include "synth_kv_models.h"

namespace preface::test {
namespace {

constexpr int32_t kBlockSize = 16;

std::vector<int32_t> spread_tokens(int32_t n_vocab, size_t n) {
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7919u + 104729u + 3u) % n_vocab);
  return ids;
}

using kernels::KvFormat;
using kernels::KvType;

// Layer 0's rows come from the embeddings alone, whatever the pool stores: so a rotated F32 pool's rows must be
// the rotation of an unrotated F32 pool's, bit for bit, and a mixed pool's each side the codec's row of them.
TEST(KvFormats, StoredRowsAreTheRotationAndTheTypesOfTheF32Rows) {
  const std::string path = q8_0_kv_model_path("llama-h64-gqa-q8_0");  // heads of 64: rotation applies
  if (path.empty()) return;
  auto m = model::Model::load(path, 64);
  const model::Config& c = m->config();
  const std::vector<int32_t> tokens = spread_tokens(c.n_vocab, 21);
  const std::vector<int32_t> table = reversed_blocks(2);
  ThreadPool pool(2);
  TestKv plain(c, KvType::F32, kBlockSize, 2), rotated(c, KvFormat(KvType::F32, KvType::F32, true, true), kBlockSize, 2);
  TestKv mixed(c, KvFormat(KvType::Q8_0, KvType::Q4_1), kBlockSize, 2);
  run_chunked(*m, pool, plain.view, table, tokens, tokens.size());
  run_chunked(*m, pool, rotated.view, table, tokens, 5);
  run_chunked(*m, pool, mixed.view, table, tokens, 7);
  const size_t row = static_cast<size_t>(c.kv_row_values()), head_dim = static_cast<size_t>(c.head_dim);
  for (int32_t p = 0; p < static_cast<int32_t>(tokens.size()); ++p) {
    const int32_t block = table[static_cast<size_t>(p / kBlockSize)], slot = p % kBlockSize;
    for (bool is_k : {true, false}) {
      std::vector<float> x(row);
      std::memcpy(x.data(), is_k ? plain.view.k_row(0, block, slot) : plain.view.v_row(0, block, slot),
                  row * sizeof(float));
      std::vector<uint8_t> want(kernels::kv_row_bytes(is_k ? KvType::Q8_0 : KvType::Q4_1, row));
      kernels::kv_write_row(is_k ? KvType::Q8_0 : KvType::Q4_1, x.data(), want.data(), row);
      const uint8_t* got_mixed = is_k ? mixed.view.k_row(0, block, slot) : mixed.view.v_row(0, block, slot);
      ASSERT_EQ(std::memcmp(got_mixed, want.data(), want.size()), 0) << (is_k ? "K" : "V") << " position " << p;
      kernels::hadamard_rotate(x.data(), row, is_k ? kernels::hadamard_k_block(head_dim) : kernels::kHadamardVBlock);
      const uint8_t* got = is_k ? rotated.view.k_row(0, block, slot) : rotated.view.v_row(0, block, slot);
      ASSERT_EQ(std::memcmp(got, x.data(), row * sizeof(float)), 0) << (is_k ? "K" : "V") << " position " << p;
    }
  }
}

// Rotation is orthonormal: with F32 rows the logits move only by rounding (they do move: the rows are really
// rotated) and every position's argmax stays.
TEST(KvFormats, RotatedF32LogitsEqualUnrotatedUpToRounding) {
  const std::string path = q8_0_kv_model_path("llama-h128-bf16");
  if (path.empty()) return;
  auto m = model::Model::load(path, 64);
  const model::Config& c = m->config();
  const size_t n = 40, n_vocab = static_cast<size_t>(c.n_vocab);
  const std::vector<int32_t> tokens = spread_tokens(c.n_vocab, n);
  const std::vector<int32_t> table = reversed_blocks(3);
  ThreadPool pool(2);
  TestKv plain(c, KvType::F32, kBlockSize, 3), rotated(c, KvFormat(KvType::F32, KvType::F32, true, true), kBlockSize, 3);
  const std::vector<float> a = run_chunked(*m, pool, plain.view, table, tokens, n);
  const std::vector<float> b = run_chunked(*m, pool, rotated.view, table, tokens, n);
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double{a[i]} - b[i]));
    max_abs = std::max(max_abs, std::fabs(double{a[i]}));
  }
  EXPECT_GT(max_diff, 0.0) << "rotated rows gave the unrotated logits' bits: are the rows rotated?";
  EXPECT_LT(max_diff, 1e-4 * max_abs);
  for (size_t t = 0; t < n; ++t) {
    const float* la = a.data() + t * n_vocab;
    const float* lb = b.data() + t * n_vocab;
    EXPECT_EQ(std::max_element(la, la + n_vocab) - la, std::max_element(lb, lb + n_vocab) - lb) << t;
  }
}

}  // namespace
}  // namespace preface::test
