// The K-quant GEMM tiles (avx2::gemm_traits, gemm_k_avx2.cpp; avx512::gemm_traits, gemm_k_avx512.cpp) against
// the scalar row dots: every output of every path is the bits of scalar::dot_<type> of its row and token (memcmp),
// for random blocks, odd row counts and row ranges, every batch size from 1 to 19 (each tile shape and its tails)
// and one to three super-blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

// Every byte random except the f16 scales (finite, up to 0.1 in magnitude).
template <typename Block>
std::vector<uint8_t> random_rows(size_t n_blocks, std::mt19937& rng) {
  std::vector<Block> blocks(n_blocks);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.1f, 0.1f);
  for (Block& b : blocks) {
    auto* p = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof(Block); ++i) p[i] = static_cast<uint8_t>(byte(rng));
    b.d = f32_to_f16(scale(rng));
    if constexpr (requires { b.dmin; }) b.dmin = f32_to_f16(scale(rng));
  }
  std::vector<uint8_t> bytes(n_blocks * sizeof(Block));
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
  return bytes;
}

struct Case {
  gguf::TensorType type;
  std::vector<uint8_t> (*rows)(size_t, std::mt19937&);
  float (*dot)(const void*, const BlockQ8_K*, size_t);  // the scalar reference
};

template <typename Block, float (*Dot)(const Block*, const BlockQ8_K*, size_t)>
float dot_of(const void* w, const BlockQ8_K* x, size_t n) {
  return Dot(static_cast<const Block*>(w), x, n);
}

const Case kCases[] = {
    {gguf::TensorType::Q4_K, random_rows<BlockQ4_K>, dot_of<BlockQ4_K, scalar::dot_q4_k>},
    {gguf::TensorType::Q5_K, random_rows<BlockQ5_K>, dot_of<BlockQ5_K, scalar::dot_q5_k>},
    {gguf::TensorType::Q6_K, random_rows<BlockQ6_K>, dot_of<BlockQ6_K, scalar::dot_q6_k>},
    {gguf::TensorType::IQ4_XS, random_rows<BlockIQ4_XS>, dot_of<BlockIQ4_XS, scalar::dot_iq4_xs>},
    {gguf::TensorType::Q2_K, random_rows<BlockQ2_K>, dot_of<BlockQ2_K, scalar::dot_q2_k>},
    {gguf::TensorType::Q3_K, random_rows<BlockQ3_K>, dot_of<BlockQ3_K, scalar::dot_q3_k>},
};

void expect_scalar_row_dots(GemmFn gemm) {
  std::mt19937 rng(24);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const Case& c : kCases) {
    for (int trial = 0; trial < 40; ++trial) {
      const size_t n_cols = kQK * (1 + trial % 3);
      const int64_t n_rows = 1 + trial % 23, n_tokens = 1 + trial % 19;
      const size_t row_bytes = gguf::row_bytes(c.type, n_cols);
      const std::vector<uint8_t> w = c.rows(static_cast<size_t>(n_rows) * (n_cols / kQK), rng);
      std::vector<float> xf(static_cast<size_t>(n_tokens) * n_cols);
      for (float& v : xf) v = trial % 5 == 0 ? std::round(normal(rng)) : normal(rng);  // ties and outliers
      std::vector<BlockQ8_K> x(static_cast<size_t>(n_tokens) * (n_cols / kQK));
      for (int64_t t = 0; t < n_tokens; ++t) {
        quantize_row_q8_k(xf.data() + t * n_cols, x.data() + t * (n_cols / kQK), n_cols);
      }
      GemmArgs a;
      a.type = c.type;
      a.w = w.data();
      a.w_row_bytes = row_bytes;
      a.x = x.data();
      a.x_row_bytes = n_cols / kQK * sizeof(BlockQ8_K);
      a.n_cols = n_cols;
      a.n_rows = n_rows;
      a.n_tokens = n_tokens;
      a.y_stride = static_cast<size_t>(n_rows) + 3;  // a wider output row: untouched columns stay NaN
      std::vector<float> y(static_cast<size_t>(n_tokens) * a.y_stride, std::nanf(""));
      a.y = y.data();
      // Two row ranges that split the rows at an odd point, as a thread's share would.
      const int64_t split = n_rows / 3;
      gemm(a, 0, split);
      gemm(a, split, n_rows);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < n_rows; ++r) {
          const float want = c.dot(w.data() + r * row_bytes, x.data() + t * (n_cols / kQK), n_cols);
          const float got = y[t * a.y_stride + r];
          ASSERT_EQ(std::memcmp(&want, &got, sizeof(float)), 0)
              << gguf::tensor_type_name(c.type) << " trial " << trial << " row " << r << " token " << t << ": "
              << want << " vs " << got;
        }
        for (size_t r = n_rows; r < a.y_stride; ++r) ASSERT_TRUE(std::isnan(y[t * a.y_stride + r]));
      }
    }
  }
}

TEST(GemmK, EveryAvx2OutputIsTheScalarRowDot) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  expect_scalar_row_dots(avx2::gemm_traits);
}

TEST(GemmK, EveryAvx512OutputIsTheScalarRowDot) {
  if (!avx512::quant_available()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI/VBMI";
  expect_scalar_row_dots(avx512::gemm_traits);
}

}  // namespace
}  // namespace preface::kernels
