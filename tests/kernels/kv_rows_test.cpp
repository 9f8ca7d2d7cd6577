// The KV row codec (kernels/kv_rows.h): stored bytes follow ggml's reference quantizers, kv_value decodes them as
// the weight dequantizers do, and rows round-trip within each type's step; the Hadamard rotation (hadamard.h).
#include "kernels/kv_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "kernels/dot.h"
#include "kernels/hadamard.h"
#include "kernels/kernel_test_util.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

std::vector<uint8_t> write(KvType t, const std::vector<float>& x) {
  std::vector<uint8_t> out(kv_row_bytes(t, x.size()));
  kv_write_row(t, x.data(), out.data(), x.size());
  return out;
}

std::vector<float> values(KvType t, const std::vector<uint8_t>& row, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = kv_value(t, row.data(), i);
  return out;
}

// Rows of random blocks, a block of zeros and a block whose largest magnitude is negative.
std::vector<float> test_row(uint32_t seed) {
  std::vector<float> x = test::random_floats(32 * 6, seed, 5.0f);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  x[70] = -40.0f;
  return x;
}

TEST(KvRows, Q8_0AndQ4_0BytesEqualTheGgufCodec) {
  for (uint32_t seed = 0; seed < 8; ++seed) {
    const std::vector<float> x = test_row(seed);
    EXPECT_EQ(write(KvType::Q8_0, x), gguf::encode_values(gguf::TensorType::Q8_0, x.data(), x.size()));
    EXPECT_EQ(write(KvType::Q4_0, x), gguf::encode_values(gguf::TensorType::Q4_0, x.data(), x.size()));
  }
}

// kv_value reads the stored blocks as the weight dequantizers read the same layouts (ggml's), bit for bit.
TEST(KvRows, ValuesEqualTheWeightDequantizers) {
  for (uint32_t seed = 0; seed < 8; ++seed) {
    const std::vector<float> x = test_row(100 + seed);
    const size_t n = x.size();
    std::vector<float> want(n);
    const auto check = [&](KvType t) {
      EXPECT_EQ(std::memcmp(values(t, write(t, x), n).data(), want.data(), n * sizeof(float)), 0)
          << kv_type_name(t) << " seed " << seed;
    };
    std::vector<uint8_t> row = write(KvType::Q8_0, x);
    dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(row.data()), want.data(), n);
    check(KvType::Q8_0);
    row = write(KvType::Q4_0, x);
    dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(row.data()), want.data(), n);
    check(KvType::Q4_0);
    row = write(KvType::Q4_1, x);
    scalar::dequantize_row_q4_1(reinterpret_cast<const BlockQ4_1*>(row.data()), want.data(), n);
    check(KvType::Q4_1);
    row = write(KvType::Q5_0, x);
    scalar::dequantize_row_q5_0(reinterpret_cast<const BlockQ5_0*>(row.data()), want.data(), n);
    check(KvType::Q5_0);
    row = write(KvType::Q5_1, x);
    scalar::dequantize_row_q5_1(reinterpret_cast<const BlockQ5_1*>(row.data()), want.data(), n);
    check(KvType::Q5_1);
    row = write(KvType::IQ4_NL, x);
    scalar::dequantize_row_iq4_nl(reinterpret_cast<const BlockIQ4_NL*>(row.data()), want.data(), n);
    check(KvType::IQ4_NL);
  }
}

// Every type round-trips within its step: f32 exactly, f16/bf16 by their rounding, a block type by about half its
// scale per value (q4_0/q5_0 a whole step at the capped end; iq4_nl's levels are uneven: within its widest gap).
TEST(KvRows, RoundTripWithinTheTypesStep) {
  const std::vector<float> x = test_row(7);
  for (KvType t : kAllKvTypes) {
    const std::vector<float> y = values(t, write(t, x), x.size());
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float amax = 0.0f;
      for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
      float tol = 0.0f;
      switch (t) {
        case KvType::F32: tol = 0.0f; break;
        case KvType::F16: tol = amax * 1e-3f; break;
        case KvType::BF16: tol = amax * 8e-3f; break;
        case KvType::Q8_0: tol = amax / 127.0f * 0.51f; break;
        // ggml caps the level at 15 (31): a value of the opposite sign to the block's largest may lose a whole step.
        case KvType::Q4_0: tol = amax / 8.0f * 1.01f; break;
        case KvType::Q5_0: tol = amax / 16.0f * 1.01f; break;
        case KvType::Q4_1: tol = 2 * amax / 15.0f * 0.51f + 1e-3f * amax; break;
        case KvType::Q5_1: tol = 2 * amax / 31.0f * 0.51f + 1e-3f * amax; break;
        case KvType::IQ4_NL: tol = amax * 24.0f / 127.0f; break;
        case KvType::Q8_PC:
        case KvType::Q4_PC: ADD_FAILURE() << "not a row type"; break;
      }
      for (size_t j = 0; j < 32; ++j) {
        EXPECT_NEAR(y[32 * b + j], x[32 * b + j], tol) << kv_type_name(t) << " block " << b << " value " << j;
      }
    }
  }
}

// ggml's reference choices, by hand: q4_0 of -16..15 has d = -16 / -8 = 2 and levels (x / 2 + 8.5) truncated,
// capped at 15; q4_1 of 0..31 has d = 31 / 15, m = 0; iq4_nl's scale is refitted by least squares.
TEST(KvRows, QuantizersFollowGgmlsReference) {
  std::vector<float> ramp(32);
  for (int j = 0; j < 32; ++j) ramp[static_cast<size_t>(j)] = static_cast<float>(j - 16);
  const std::vector<uint8_t> q4 = write(KvType::Q4_0, ramp);
  uint16_t d;
  std::memcpy(&d, q4.data(), 2);
  EXPECT_EQ(f16_to_f32(d), 2.0f);
  for (int j = 0; j < 32; ++j) {
    const int level = std::min(15, static_cast<int>(static_cast<float>(j - 16) * 0.5f + 8.5f));
    EXPECT_EQ(kv_value(KvType::Q4_0, q4.data(), static_cast<size_t>(j)), 2.0f * static_cast<float>(level - 8)) << j;
  }
  for (float& v : ramp) v += 16.0f;  // 0..31
  const std::vector<uint8_t> q41 = write(KvType::Q4_1, ramp);
  uint16_t dm[2];
  std::memcpy(dm, q41.data(), 4);
  EXPECT_EQ(dm[0], f32_to_f16(31.0f / 15.0f));
  EXPECT_EQ(f16_to_f32(dm[1]), 0.0f);
  // A block of one level's multiples: iq4_nl stores it exactly (the refit finds d = 1/4).
  std::vector<float> levels(32);
  for (int j = 0; j < 32; ++j) levels[static_cast<size_t>(j)] = static_cast<float>(kIq4nlValues[j % 16]) / 4.0f;
  EXPECT_EQ(values(KvType::IQ4_NL, write(KvType::IQ4_NL, levels), 32), levels);
}

// A row holding NaN or infinity (a diverged activation) is stored without an undefined conversion, and only its own
// block is affected: the other blocks of the row keep their values.
TEST(KvRows, NonFiniteValuesStayInTheirBlock) {
  std::vector<float> x = test_row(11);
  const std::vector<float> clean = x;
  x[3] = NAN;
  x[40] = INFINITY;
  for (KvType t : kAllKvTypes) {
    if (!kv_type_is_quantized(t)) continue;
    const std::vector<float> y = values(t, write(t, x), x.size());
    const std::vector<float> want = values(t, write(t, clean), clean.size());
    EXPECT_EQ(std::memcmp(y.data() + 64, want.data() + 64, (x.size() - 64) * sizeof(float)), 0) << kv_type_name(t);
  }
}

TEST(Hadamard, SelfInverseOrthonormalAndBlockwise) {
  EXPECT_EQ(hadamard_k_block(128), 128u);
  EXPECT_EQ(hadamard_k_block(192), 64u);
  EXPECT_EQ(hadamard_k_block(256), 256u);
  EXPECT_EQ(hadamard_k_block(320), 64u);
  std::vector<float> e(64, 0.0f);
  e[0] = 1.0f;
  hadamard_rotate(e.data(), 64, 64);
  for (float v : e) EXPECT_EQ(v, 0.125f);  // the first column of H / 8
  const std::vector<float> x = test::random_floats(256, 3, 2.0f), y = test::random_floats(256, 4, 2.0f);
  std::vector<float> rx = x, ry = y;
  hadamard_rotate(rx.data(), 256, 128);
  hadamard_rotate(ry.data(), 256, 128);
  double dot = 0, rdot = 0;
  for (size_t i = 0; i < 256; ++i) {
    dot += double{x[i]} * y[i];
    rdot += double{rx[i]} * ry[i];
  }
  EXPECT_NEAR(rdot, dot, 1e-4 * (1 + std::fabs(dot)));
  std::vector<float> back = rx;
  hadamard_rotate(back.data(), 256, 128);
  for (size_t i = 0; i < 256; ++i) EXPECT_NEAR(back[i], x[i], 1e-5f * (1 + std::fabs(x[i]))) << i;
  // Blocks are independent: changing the second block leaves the first's rotation alone.
  std::vector<float> z = x;
  z[200] += 1.0f;
  hadamard_rotate(z.data(), 256, 128);
  EXPECT_EQ(std::memcmp(z.data(), rx.data(), 128 * sizeof(float)), 0);
}

}  // namespace
}  // namespace preface::kernels
