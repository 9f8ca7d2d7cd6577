// Q8_0 quantization and the Q8_0 / Q4_0 x Q8_0 dots: scalar, AVX2 and AVX-512 agree, integer block sums are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dot.h"
#include "kernels/kernel_test_util.h"

namespace preface::kernels {
namespace {

using test::random_floats;

const size_t kQuantSizes[] = {32, 64, 96, 160, 224, 256, 1024, 4096};  // 1..128 blocks, with and without groups of 4

int q8_value(const BlockQ8_0& b, size_t j) { return b.qs[j]; }

// Rows with assorted block scales: zeros, tiny, large, mixed signs.
std::vector<float> varied_row(size_t n, uint32_t seed) {
  auto x = random_floats(n, seed);
  for (size_t b = 0; b < n / 32; ++b) {
    const float scale = b % 5 == 0 ? 0.0f : std::ldexp(1.0f, static_cast<int>(b % 11) * 3 - 15);
    for (size_t j = 0; j < 32; ++j) x[b * 32 + j] *= scale;
  }
  return x;
}

TEST(QuantizeQ8_0, ScalarMatchesGgmlDefinition) {
  // A block with amax 127 has d = 1 exactly, so q = roundf(x): halfway cases round away from zero.
  std::vector<float> x(32, 0.0f);
  const float vals[] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, -126.6f, 3.0f};
  for (size_t i = 0; i < 8; ++i) x[i] = vals[i];
  BlockQ8_0 b;
  scalar::quantize_row_q8_0(x.data(), &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f);
  const int expected[] = {127, 3, -3, 1, -1, 1, -127, 3};
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(b.qs[i], expected[i]) << "value " << vals[i];
  for (size_t i = 8; i < 32; ++i) EXPECT_EQ(b.qs[i], 0);

  std::vector<float> zeros(32, 0.0f);
  scalar::quantize_row_q8_0(zeros.data(), &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int8_t q : b.qs) EXPECT_EQ(q, 0);
}

// The SIMD quantizers this CPU can run, by name.
std::vector<std::pair<const char*, void (*)(const float*, BlockQ8_0*, size_t)>> simd_quantizers() {
  std::vector<std::pair<const char*, void (*)(const float*, BlockQ8_0*, size_t)>> q;
  if (avx2::available()) q.emplace_back("avx2", avx2::quantize_row_q8_0);
  if (avx512::available()) q.emplace_back("avx512", avx512::quantize_row_q8_0);
  return q;
}

TEST(QuantizeQ8_0, SimdBytesEqualScalar) {
  const auto quantizers = simd_quantizers();
  if (quantizers.empty()) GTEST_SKIP() << "CPU lacks AVX2";
  // 1..128 blocks, then 15 - 17 and 31 - 33 (whole and partial steps of 16 blocks).
  std::vector<size_t> sizes(std::begin(kQuantSizes), std::end(kQuantSizes));
  for (size_t n_blocks : {15, 17, 31, 33}) sizes.push_back(32 * n_blocks);
  for (const auto& [name, quantize] : quantizers) {
    for (size_t n : sizes) {
      for (uint32_t seed = 0; seed < 5; ++seed) {
        auto x = varied_row(n, seed * 100 + static_cast<uint32_t>(n));
        if (seed == 3) {  // non-finite inputs must not break agreement
          x[1] = std::numeric_limits<float>::quiet_NaN();
          x[40 % n] = std::numeric_limits<float>::infinity();
          x[n - 1] = -std::numeric_limits<float>::infinity();
        }
        if (seed == 4) {  // NaN in either half of a block, and a block of NaNs only
          x[n - 17] = std::numeric_limits<float>::quiet_NaN();
          x[n - 3] = -std::numeric_limits<float>::quiet_NaN();
          for (size_t j = 0; j < 32; ++j) x[j] = std::numeric_limits<float>::quiet_NaN();
        }
        std::vector<BlockQ8_0> s(n / 32), a(n / 32);
        scalar::quantize_row_q8_0(x.data(), s.data(), n);
        quantize(x.data(), a.data(), n);
        ASSERT_EQ(std::memcmp(s.data(), a.data(), s.size() * sizeof(BlockQ8_0)), 0)
            << name << " n " << n << " seed " << seed;
      }
    }
    // Exact halfway products x * id = k + 0.5 (d = 1) across the whole range.
    std::vector<float> x(32 * 8);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = i % 32 == 0 ? 127.0f : (static_cast<float>(i % 254) - 127.0f) + 0.5f * (i % 2 ? 1.0f : -1.0f);
      x[i] = std::fmin(127.0f, std::fmax(-127.0f, x[i]));
    }
    std::vector<BlockQ8_0> s(8), a(8);
    scalar::quantize_row_q8_0(x.data(), s.data(), x.size());
    quantize(x.data(), a.data(), x.size());
    EXPECT_EQ(std::memcmp(s.data(), a.data(), s.size() * sizeof(BlockQ8_0)), 0) << name;
  }
}

TEST(QuantizeQ8_0, RoundTripWithinHalfStep) {
  for (size_t n : kQuantSizes) {
    const auto x = varied_row(n, 7 + static_cast<uint32_t>(n));
    std::vector<BlockQ8_0> q(n / 32);
    quantize_row_q8_0(x.data(), q.data(), n);
    std::vector<float> back(n);
    dequantize_row_q8_0(q.data(), back.data(), n);
    for (size_t b = 0; b < n / 32; ++b) {
      const float d = f16_to_f32(q[b].d);
      float amax = 0;
      for (size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
      const float d_exact = amax / 127.0f;
      EXPECT_EQ(q[b].d, f32_to_f16(d_exact));
      // Half a step, plus q times the f16 rounding error of d (relative 2^-11, or absolute for subnormal d).
      const float tol = 0.5f * d_exact * (1 + 1e-5f) + 127.0f * std::fabs(d - d_exact) + 1e-30f;
      for (size_t j = 0; j < 32; ++j) {
        EXPECT_LE(std::abs(q[b].qs[j]), 127);
        EXPECT_NEAR(back[b * 32 + j], x[b * 32 + j], tol) << "n " << n << " block " << b;
      }
    }
  }
}

TEST(DequantizeQ4_0, NibbleLayout) {
  BlockQ4_0 b;
  b.d = f32_to_f16(0.5f);
  for (size_t j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((15 - j) << 4 | j);
  float out[32];
  dequantize_row_q4_0(&b, out, 32);
  for (size_t j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * (static_cast<float>(j) - 8)) << j;
    EXPECT_EQ(out[j + 16], 0.5f * (7 - static_cast<float>(j))) << j;
  }
}

// With d = 1 for every block and small enough values, every partial sum is an integer below 2^24, so any
// correct kernel returns exactly the integer dot product.
TEST(DotQ8_0, ExactIntegerSums) {
  for (size_t n : kQuantSizes) {
    // Full int8 weight range (incl. -128) needs fewer blocks to stay below 2^24; else weights in [-16, 16].
    const bool full_range = n <= 256;
    auto w = test::random_q8_0(n, 11 + static_cast<uint32_t>(n), full_range ? -128 : -16, full_range ? 127 : 16);
    auto x = test::random_q8_0(n, 12 + static_cast<uint32_t>(n), -127, 127);
    for (auto& b : w) b.d = f32_to_f16(1.0f);
    for (auto& b : x) b.d = f32_to_f16(1.0f);
    if (full_range) {  // extreme products: -128 * -127 and -128 * 127 in one block
      w[0].qs[0] = -128, x[0].qs[0] = -127;
      w[0].qs[1] = -128, x[0].qs[1] = 127;
    }
    const auto ref = test::quant_dot_ref(w.data(), x.data(), n, q8_value);
    int64_t exact = 0;
    for (int64_t s : ref.isum) exact += s;
    EXPECT_EQ(scalar::dot_q8_0(w.data(), x.data(), n), static_cast<float>(exact)) << "n " << n;
    EXPECT_EQ(dot_q8_0(w.data(), x.data(), n), static_cast<float>(exact)) << "n " << n;
    if (avx2::available()) {
      EXPECT_EQ(avx2::dot_q8_0(w.data(), x.data(), n), static_cast<float>(exact)) << "n " << n;
    }
  }
}

TEST(DotQ4_0, ExactIntegerSums) {
  for (size_t n : kQuantSizes) {
    auto w = test::random_q4_0(n, 21 + static_cast<uint32_t>(n));
    auto x = test::random_q8_0(n, 22 + static_cast<uint32_t>(n), -127, 127);
    for (auto& b : w) b.d = f32_to_f16(1.0f);
    for (auto& b : x) b.d = f32_to_f16(1.0f);
    const auto ref = test::quant_dot_ref(w.data(), x.data(), n, test::q4_value);
    int64_t exact = 0;
    for (int64_t s : ref.isum) exact += s;
    EXPECT_EQ(scalar::dot_q4_0(w.data(), x.data(), n), static_cast<float>(exact)) << "n " << n;
    EXPECT_EQ(dot_q4_0(w.data(), x.data(), n), static_cast<float>(exact)) << "n " << n;
    if (avx2::available()) {
      EXPECT_EQ(avx2::dot_q4_0(w.data(), x.data(), n), static_cast<float>(exact)) << "n " << n;
    }
  }
}

// Per-block checks: a one-block dot with d = 1 is the block's integer sum, for every block of a random row.
TEST(DotQ8_0, EveryBlockIntegerSumExact) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  const size_t n = 4096;
  auto w = test::random_q8_0(n, 31);
  auto x = test::random_q8_0(n, 32, -127, 127);
  auto wq4 = test::random_q4_0(n, 33);
  for (size_t b = 0; b < n / 32; ++b) {
    BlockQ8_0 wb = w[b], xb = x[b];
    BlockQ4_0 w4 = wq4[b];
    wb.d = xb.d = w4.d = f32_to_f16(1.0f);
    const auto r8 = test::quant_dot_ref(&wb, &xb, 32, q8_value);
    const auto r4 = test::quant_dot_ref(&w4, &xb, 32, test::q4_value);
    ASSERT_EQ(avx2::dot_q8_0(&wb, &xb, 32), static_cast<float>(r8.isum[0])) << "block " << b;
    ASSERT_EQ(avx2::dot_q4_0(&w4, &xb, 32), static_cast<float>(r4.isum[0])) << "block " << b;
  }
}

TEST(DotQ8_0, RandomScalesMatchDoubleReference) {
  for (size_t n : kQuantSizes) {
    const auto w = test::random_q8_0(n, 41 + static_cast<uint32_t>(n));
    const auto x = test::random_q8_0(n, 42 + static_cast<uint32_t>(n), -127, 127);
    const auto ref = test::quant_dot_ref(w.data(), x.data(), n, q8_value);
    const double tol = test::sum_tolerance(n / 32, ref.magnitude);
    const float s = scalar::dot_q8_0(w.data(), x.data(), n);
    EXPECT_NEAR(s, ref.value, tol) << "n " << n;
    if (avx2::available()) {
      EXPECT_NEAR(avx2::dot_q8_0(w.data(), x.data(), n), ref.value, tol) << "n " << n;
    }
  }
}

TEST(DotQ4_0, RandomScalesMatchDoubleReference) {
  for (size_t n : kQuantSizes) {
    const auto w = test::random_q4_0(n, 51 + static_cast<uint32_t>(n));
    const auto x = test::random_q8_0(n, 52 + static_cast<uint32_t>(n), -127, 127);
    const auto ref = test::quant_dot_ref(w.data(), x.data(), n, test::q4_value);
    const double tol = test::sum_tolerance(n / 32, ref.magnitude);
    EXPECT_NEAR(scalar::dot_q4_0(w.data(), x.data(), n), ref.value, tol) << "n " << n;
    if (avx2::available()) {
      EXPECT_NEAR(avx2::dot_q4_0(w.data(), x.data(), n), ref.value, tol) << "n " << n;
    }
  }
}

TEST(DotQ8_0, QuantizedActivationsApproximateFloatDot) {
  // End to end: quantizing both sides keeps the dot within a few percent of the float dot.
  const size_t n = 1024;
  const auto wf = random_floats(n, 61);
  const auto xf = random_floats(n, 62);
  std::vector<BlockQ8_0> w(n / 32), x(n / 32);
  quantize_row_q8_0(wf.data(), w.data(), n);
  quantize_row_q8_0(xf.data(), x.data(), n);
  double ref = 0, magnitude = 0;
  for (size_t i = 0; i < n; ++i) ref += double{wf[i]} * xf[i], magnitude += std::fabs(double{wf[i]} * xf[i]);
  EXPECT_NEAR(dot_q8_0(w.data(), x.data(), n), ref, 0.02 * magnitude);
}

}  // namespace
}  // namespace preface::kernels
