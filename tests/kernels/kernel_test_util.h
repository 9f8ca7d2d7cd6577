// Random inputs and reference arithmetic shared by the kernel tests.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/types.h"
#include "kernels/dot.h"
#include "util/fp16.h"

namespace preface::kernels::test {

// n floats uniform in [-scale, scale].
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-scale, scale);
  std::vector<float> v(n);  // [n]
  for (float& f : v) f = uni(rng);
  return v;
}

// Random blocks of a quant.h type: every byte random except the f16 scales d and dmin (finite, up to 0.1 in
// magnitude) and m (finite, or one time in 16 each 0, -0 and NaN: the scalar dot's `m != 0` branch).
template <typename Block>
std::vector<Block> random_blocks(size_t n_blocks, std::mt19937& rng) {
  std::vector<Block> blocks(n_blocks);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.1f, 0.1f);
  for (Block& b : blocks) {
    auto* p = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof(Block); ++i) p[i] = static_cast<uint8_t>(byte(rng));
    if constexpr (requires { b.d; }) b.d = f32_to_f16(scale(rng));
    if constexpr (requires { b.e; }) {  // MXFP4's E8M0 exponent: mostly near 2^-5, some subnormal and huge scales
      const int kind = byte(rng) % 16;
      b.e = static_cast<uint8_t>(kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? 250 : 112 + byte(rng) % 16);
    }
    if constexpr (requires { b.dmin; }) b.dmin = f32_to_f16(scale(rng));
    if constexpr (requires { b.m; }) {
      const int kind = byte(rng) % 16;
      constexpr uint16_t kSpecial[3] = {0x0000, 0x8000, 0x7e00};  // 0, -0, NaN
      b.m = kind < 3 ? kSpecial[kind] : f32_to_f16(scale(rng));
    }
  }
  return blocks;
}

inline std::vector<uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());  // [n]
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]);
  return h;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());  // [n]
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  return h;
}

// n/32 Q8_0 blocks with random d (a positive f16 up to d_max) and q uniform in [q_min, q_max].
inline std::vector<BlockQ8_0> random_q8_0(size_t n, uint32_t seed, int q_min = -128, int q_max = 127,
                                          float d_max = 0.05f) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(q_min, q_max);
  std::uniform_real_distribution<float> d(d_max / 16, d_max);
  std::vector<BlockQ8_0> blocks(n / gguf::kQuantBlock);  // [n/32]
  for (BlockQ8_0& b : blocks) {
    b.d = f32_to_f16(d(rng));
    for (int8_t& v : b.qs) v = static_cast<int8_t>(q(rng));
  }
  return blocks;
}

// n/32 Q4_0 blocks with random d and random nibbles.
inline std::vector<BlockQ4_0> random_q4_0(size_t n, uint32_t seed, float d_max = 0.05f) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> d(d_max / 16, d_max);
  std::vector<BlockQ4_0> blocks(n / gguf::kQuantBlock);  // [n/32]
  for (BlockQ4_0& b : blocks) {
    b.d = f32_to_f16(d(rng));
    for (uint8_t& v : b.qs) v = static_cast<uint8_t>(byte(rng));
  }
  return blocks;
}

// Value j (< 32) of a Q4_0 block as an integer in [-8, 7].
inline int q4_value(const BlockQ4_0& b, size_t j) {
  return j < 16 ? (b.qs[j] & 0x0f) - 8 : (b.qs[j - 16] >> 4) - 8;
}

// Exact integer block sums isum[b] and the double-precision sum_b d_w[b] * d_x[b] * isum[b], together with
// sum_b |d_w d_x isum| (the scale for a rounding tolerance).
struct QuantDotRef {
  std::vector<int64_t> isum;  // [n_blocks]
  double value = 0;
  double magnitude = 0;
};

template <typename WBlock, typename ValueOf>
QuantDotRef quant_dot_ref(const WBlock* w, const BlockQ8_0* x, size_t n, ValueOf value_of) {
  QuantDotRef ref;
  for (size_t b = 0; b < n / gguf::kQuantBlock; ++b) {
    int64_t isum = 0;
    for (size_t j = 0; j < gguf::kQuantBlock; ++j) isum += int64_t{value_of(w[b], j)} * x[b].qs[j];
    ref.isum.push_back(isum);
    const double term = double{f16_to_f32(w[b].d)} * double{f16_to_f32(x[b].d)} * static_cast<double>(isum);
    ref.value += term;
    ref.magnitude += std::fabs(term);
  }
  return ref;
}

// Rounding tolerance for a float sum of n terms whose absolute values add up to `magnitude`: a few ulps per
// step of a random-walk accumulation, far below the size of any one term of a random input.
inline double sum_tolerance(size_t n_terms, double magnitude) {
  return 4.0 * FLT_EPSILON * std::sqrt(static_cast<double>(n_terms) + 1.0) * magnitude + 1e-30;
}

}  // namespace preface::kernels::test
