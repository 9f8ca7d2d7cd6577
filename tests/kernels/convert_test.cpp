// f32 -> f16 / bf16 row conversions: the AVX2 rows equal util/fp16.h's scalar conversions bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/dot.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// A sweep of f32 bit patterns (every 997th, which hits every exponent with many mantissas and both signs),
// plus values that stress rounding: halfway cases, the f16 overflow and subnormal edges, infinities, NaNs with
// payloads, denormals. The length is odd so the tail path runs too.
std::vector<float> conversion_inputs() {
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 997) x.push_back(from_bits(static_cast<uint32_t>(bits)));
  const uint32_t specials[] = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xffbfffff,
      0x7fa5a5a5, 0x00000001, 0x807fffff, 0x33000000, 0x33000001, 0x387fe000, 0x387ff000, 0x38800000,
      0x477fe000, 0x477fefff, 0x477ff000, 0x3f801000, 0x3f803000, 0x3f808000, 0x3f818000, 0x3f7fffff,
      0x7f7fffff, 0x7f7f8000, 0x3f800001, 0x3f807fff, 0x3f808001,
  };
  for (uint32_t s : specials) x.push_back(from_bits(s));
  if (x.size() % 8 == 0) x.push_back(1.0f);
  x.push_back(-3.5f);
  return x;
}

TEST(ConvertRow, F16EqualsScalarEverywhere) {
  const auto x = conversion_inputs();
  std::vector<uint16_t> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = f32_to_f16(x[i]);

  std::vector<uint16_t> got(x.size());
  scalar::f32_to_f16_row(x.data(), got.data(), x.size());
  EXPECT_EQ(got, expected);
  f32_to_f16_row(x.data(), got.data(), x.size());
  EXPECT_EQ(got, expected);
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks F16C";
  std::fill(got.begin(), got.end(), 0xdead);
  avx2::f32_to_f16_row(x.data(), got.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    ASSERT_EQ(got[i], expected[i]) << std::hex << "input bits 0x" << bits;
  }
}

TEST(ConvertRow, Bf16EqualsScalarEverywhere) {
  const auto x = conversion_inputs();
  std::vector<uint16_t> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = f32_to_bf16(x[i]);

  std::vector<uint16_t> got(x.size());
  scalar::f32_to_bf16_row(x.data(), got.data(), x.size());
  EXPECT_EQ(got, expected);
  f32_to_bf16_row(x.data(), got.data(), x.size());
  EXPECT_EQ(got, expected);
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  std::fill(got.begin(), got.end(), 0xdead);
  avx2::f32_to_bf16_row(x.data(), got.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    ASSERT_EQ(got[i], expected[i]) << std::hex << "input bits 0x" << bits;
  }
}

TEST(ConvertRow, TailsTouchOnlyTheirOutputs) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  for (size_t n = 0; n <= 17; ++n) {
    std::vector<float> x(n, 1.5f);
    std::vector<uint16_t> out(n + 1, 0x1234);  // [n] + a guard element
    avx2::f32_to_f16_row(x.data(), out.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], 0x3e00);  // 1.5 in f16
    EXPECT_EQ(out[n], 0x1234) << "n " << n;
    avx2::f32_to_bf16_row(x.data(), out.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], 0x3fc0);  // 1.5 in bf16
    EXPECT_EQ(out[n], 0x1234) << "n " << n;
  }
}

}  // namespace
}  // namespace preface::kernels
