// The GEMM tiles of the 32-value block types (Q4_1, Q5_0, Q5_1, IQ4_NL; avx2::gemm_q32, avx512::gemm_q32 and the
// gemm_traits that route to them) against the scalar row dots: every output of every path is the bits of
// scalar::dot_<type> of its row and token (memcmp), for random blocks (m = 0, -0 and NaN included), odd row counts
// and row ranges, every batch size from 1 to 19 (each tile shape and its tails) and 1 to 9 blocks.
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

// Every byte random except the f16 d (finite, up to 0.1 in magnitude) and m (finite, or 0, -0 or NaN).
template <typename Block>
std::vector<uint8_t> random_rows(size_t n_blocks, std::mt19937& rng) {
  std::vector<Block> blocks(n_blocks);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.1f, 0.1f);
  for (Block& b : blocks) {
    auto* p = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof(Block); ++i) p[i] = static_cast<uint8_t>(byte(rng));
    b.d = f32_to_f16(scale(rng));
    if constexpr (requires { b.m; }) {
      const int kind = byte(rng) % 16;
      b.m = kind == 0 ? 0 : kind == 1 ? 0x8000 : kind == 2 ? 0x7e00 : f32_to_f16(scale(rng));
    }
  }
  std::vector<uint8_t> bytes(n_blocks * sizeof(Block));
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
  return bytes;
}

struct Case {
  gguf::TensorType type;
  std::vector<uint8_t> (*rows)(size_t, std::mt19937&);
  float (*dot)(const void*, const BlockQ8_0*, size_t);  // the scalar reference
};

template <typename Block, float (*Dot)(const Block*, const BlockQ8_0*, size_t)>
float dot_of(const void* w, const BlockQ8_0* x, size_t n) {
  return Dot(static_cast<const Block*>(w), x, n);
}

const Case kCases[] = {
    {gguf::TensorType::Q4_1, random_rows<BlockQ4_1>, dot_of<BlockQ4_1, scalar::dot_q4_1>},
    {gguf::TensorType::Q5_0, random_rows<BlockQ5_0>, dot_of<BlockQ5_0, scalar::dot_q5_0>},
    {gguf::TensorType::Q5_1, random_rows<BlockQ5_1>, dot_of<BlockQ5_1, scalar::dot_q5_1>},
    {gguf::TensorType::IQ4_NL, random_rows<BlockIQ4_NL>, dot_of<BlockIQ4_NL, scalar::dot_iq4_nl>},
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

void expect_scalar_row_dots(GemmFn gemm) {
  std::mt19937 rng(32);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const Case& c : kCases) {
    for (int trial = 0; trial < 40; ++trial) {
      const size_t n_blocks = 1 + trial % 9, n_cols = kQuantBlock * n_blocks;
      const int64_t n_rows = 1 + trial % 23, n_tokens = 1 + trial % 19;
      const size_t row_bytes = gguf::row_bytes(c.type, n_cols);
      const std::vector<uint8_t> w = c.rows(static_cast<size_t>(n_rows) * n_blocks, rng);
      std::vector<float> xf(static_cast<size_t>(n_tokens) * n_cols);
      for (float& v : xf) v = trial % 5 == 0 ? std::round(normal(rng)) : normal(rng);  // ties and outliers
      if (trial % 7 == 3) std::fill(xf.begin(), xf.begin() + kQuantBlock, 0.0f);    // an all-zero block
      std::vector<BlockQ8_0> x(static_cast<size_t>(n_tokens) * n_blocks);
      for (int64_t t = 0; t < n_tokens; ++t) {
        scalar::quantize_row_q8_0(xf.data() + t * n_cols, x.data() + t * n_blocks, n_cols);
      }
      GemmArgs a;
      a.type = c.type;
      a.w = w.data();
      a.w_row_bytes = row_bytes;
      a.x = x.data();
      a.x_row_bytes = n_blocks * sizeof(BlockQ8_0);
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
          const float want = c.dot(w.data() + r * row_bytes, x.data() + t * n_blocks, n_cols);
          const float got = y[t * a.y_stride + r];
          ASSERT_TRUE(same_bits(want, got) || (std::isnan(want) && std::isnan(got)))
              << gguf::tensor_type_name(c.type) << " trial " << trial << " row " << r << " token " << t << ": "
              << want << " vs " << got;
        }
        for (size_t r = n_rows; r < a.y_stride; ++r) ASSERT_TRUE(std::isnan(y[t * a.y_stride + r]));
      }
    }
  }
}

TEST(GemmQ32, EveryAvx2OutputIsTheScalarRowDot) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  expect_scalar_row_dots(avx2::gemm_q32);
  expect_scalar_row_dots(avx2::gemm_traits);
}

TEST(GemmQ32, EveryAvx512OutputIsTheScalarRowDot) {
  if (!avx512::quant_available()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI/VBMI";
  expect_scalar_row_dots(avx512::gemm_q32);
  expect_scalar_row_dots(avx512::gemm_traits);
}

}  // namespace
}  // namespace preface::kernels
