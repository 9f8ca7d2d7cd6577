// The GEMM tiles of the quant.h types (avx2::gemm_traits: gemm_k_avx2.cpp and gemm_q32_avx2.cpp;
// avx512::gemm_traits: gemm_k_avx512.cpp and gemm_q32_avx512.cpp) against the scalar row dots: every output of
// every path is the bits of scalar::dot_<type> of its row and token (memcmp), for random blocks, odd row counts
// and row ranges, every batch size from 1 to 19 (each tile shape and its tails, the token-lane tiles of the
// 32-value types from 4 tokens) and one to three super-blocks (K-quants) or one to nine blocks (32-value types);
// and the same for matrices packed into row groups (repack.h: the K-quants and IQ4_XS
// through avx512::gemm_k_groups), with row ranges on and off group boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/kernel_test_util.h"
#include "kernels/quant.h"
#include "kernels/repack.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

struct Case {
  gguf::TensorType type;
  std::vector<uint8_t> (*rows)(size_t, std::mt19937&);  // n blocks of the type as bytes
  float (*dot)(const void*, const void*, size_t);       // the scalar reference
};

template <typename Block>
std::vector<uint8_t> random_rows(size_t n_blocks, std::mt19937& rng) {
  const std::vector<Block> blocks = test::random_blocks<Block>(n_blocks, rng);
  std::vector<uint8_t> bytes(n_blocks * sizeof(Block));
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
  return bytes;
}

template <typename Block, typename Act, float (*Dot)(const Block*, const Act*, size_t)>
constexpr Case row_case(gguf::TensorType type) {
  return {type, random_rows<Block>, [](const void* w, const void* x, size_t n) {
            return Dot(static_cast<const Block*>(w), static_cast<const Act*>(x), n);
          }};
}

const Case kCases[] = {
    row_case<BlockQ4_K, BlockQ8_K, scalar::dot_q4_k>(gguf::TensorType::Q4_K),
    row_case<BlockQ5_K, BlockQ8_K, scalar::dot_q5_k>(gguf::TensorType::Q5_K),
    row_case<BlockQ6_K, BlockQ8_K, scalar::dot_q6_k>(gguf::TensorType::Q6_K),
    row_case<BlockIQ4_XS, BlockQ8_K, scalar::dot_iq4_xs>(gguf::TensorType::IQ4_XS),
    row_case<BlockQ2_K, BlockQ8_K, scalar::dot_q2_k>(gguf::TensorType::Q2_K),
    row_case<BlockQ3_K, BlockQ8_K, scalar::dot_q3_k>(gguf::TensorType::Q3_K),
    row_case<BlockQ4_1, BlockQ8_0, scalar::dot_q4_1>(gguf::TensorType::Q4_1),
    row_case<BlockQ5_0, BlockQ8_0, scalar::dot_q5_0>(gguf::TensorType::Q5_0),
    row_case<BlockQ5_1, BlockQ8_0, scalar::dot_q5_1>(gguf::TensorType::Q5_1),
    row_case<BlockIQ4_NL, BlockQ8_0, scalar::dot_iq4_nl>(gguf::TensorType::IQ4_NL),
    row_case<BlockMXFP4, BlockQ8_0, scalar::dot_mxfp4>(gguf::TensorType::MXFP4),
};

// Activation rows of n_cols values in the format a type's dot wants (quant.h ActFormat) as bytes, and the size
// of one row.
std::vector<uint8_t> quantize_activations(gguf::TensorType type, const std::vector<float>& xf, size_t n_cols,
                                          size_t* row_bytes) {
  const size_t n_tokens = xf.size() / n_cols;
  const bool q8_k = quant_traits(type)->act == ActFormat::Q8_K;
  *row_bytes = q8_k ? n_cols / kQK * sizeof(BlockQ8_K) : n_cols / kQuantBlock * sizeof(BlockQ8_0);
  std::vector<uint8_t> x(n_tokens * *row_bytes);
  for (size_t t = 0; t < n_tokens; ++t) {
    uint8_t* out = x.data() + t * *row_bytes;
    if (q8_k) {
      quantize_row_q8_k(xf.data() + t * n_cols, reinterpret_cast<BlockQ8_K*>(out), n_cols);
    } else {
      scalar::quantize_row_q8_0(xf.data() + t * n_cols, reinterpret_cast<BlockQ8_0*>(out), n_cols);
    }
  }
  return x;
}

bool same_bits_or_nan(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0 || (std::isnan(a) && std::isnan(b));
}

// packed: only the types with a row-group layout, packed (at least one whole group), rows split on a group boundary
// in even trials and off one in odd ones.
void expect_scalar_row_dots(GemmFn gemm, bool packed = false) {
  std::mt19937 rng(24);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const Case& c : kCases) {
    if (packed && !row_group_type(c.type)) continue;
    const size_t block_values = gguf::type_block_values(c.type);
    for (int trial = 0; trial < 40; ++trial) {
      const size_t n_blocks = block_values == kQK ? 1 + trial % 3 : 1 + trial % 9;
      const size_t n_cols = block_values * n_blocks;
      const int64_t n_rows = packed ? 16 + trial % 41 : 1 + trial % 23, n_tokens = 1 + trial % 19;
      const size_t row_bytes = gguf::row_bytes(c.type, n_cols);
      const std::vector<uint8_t> w = c.rows(static_cast<size_t>(n_rows) * n_blocks, rng);
      std::vector<uint8_t> storage;
      const uint8_t* w_data = w.data();
      if (packed) {
        w_data = pack_row_groups(Matrix{c.type, w.data(), n_rows, static_cast<int64_t>(n_cols)}, storage).data;
      }
      std::vector<float> xf(static_cast<size_t>(n_tokens) * n_cols);
      for (float& v : xf) v = trial % 5 == 0 ? std::round(normal(rng)) : normal(rng);  // ties and outliers
      if (trial % 7 == 3) std::fill(xf.begin(), xf.begin() + 32, 0.0f);              // an all-zero block
      size_t x_row_bytes = 0;
      const std::vector<uint8_t> x = quantize_activations(c.type, xf, n_cols, &x_row_bytes);
      GemmArgs a;
      a.type = c.type;
      a.w = w_data;
      a.row_groups = packed;
      a.w_row_bytes = row_bytes;
      a.x = x.data();
      a.x_row_bytes = x_row_bytes;
      a.n_cols = n_cols;
      a.n_rows = n_rows;
      a.n_tokens = n_tokens;
      a.y_stride = static_cast<size_t>(n_rows) + 3;  // a wider output row: untouched columns stay NaN
      std::vector<float> y(static_cast<size_t>(n_tokens) * a.y_stride, std::nanf(""));
      a.y = y.data();
      // Two row ranges that split the rows at an odd point or (packed, even trials) on a group boundary, as a
      // thread's share would.
      const int64_t split = packed && trial % 2 == 0 ? n_rows / 32 * kRowGroupRows : n_rows / 3;
      gemm(a, 0, split);
      gemm(a, split, n_rows);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < n_rows; ++r) {
          const float want = c.dot(w.data() + r * row_bytes, x.data() + t * x_row_bytes, n_cols);
          const float got = y[t * a.y_stride + r];
          ASSERT_TRUE(same_bits_or_nan(want, got))
              << gguf::tensor_type_name(c.type) << " trial " << trial << " row " << r << " token " << t << ": "
              << want << " vs " << got;
        }
        for (size_t r = n_rows; r < a.y_stride; ++r) ASSERT_TRUE(std::isnan(y[t * a.y_stride + r]));
      }
    }
  }
}

TEST(GemmTraits, EveryAvx2OutputIsTheScalarRowDot) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  expect_scalar_row_dots(avx2::gemm_traits);
}

TEST(GemmTraits, EveryAvx512OutputIsTheScalarRowDot) {
  if (!avx512::quant_available()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI/VBMI";
  expect_scalar_row_dots(avx512::gemm_traits);
}

TEST(GemmTraits, EveryPackedAvx512OutputIsTheScalarRowDot) {
  if (!avx512::quant_available()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI/VBMI";
  expect_scalar_row_dots(avx512::gemm_traits, true);
}

}  // namespace
}  // namespace preface::kernels
