// The synth quantizers (QuantTraits::quantize): valid blocks whose dequantization stays close to the input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/types.h"
#include "kernels/quant.h"

namespace preface::kernels {
namespace {

using gguf::TensorType;

std::vector<float> normal_values(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);  // [n]
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> round_trip(TensorType type, const std::vector<float>& x) {
  const QuantTraits* t = quant_traits(type);
  std::vector<uint8_t> blocks(gguf::row_bytes(type, x.size()));
  t->quantize(x.data(), blocks.data(), x.size());
  std::vector<float> y(x.size());  // [n]
  t->dequantize(blocks.data(), y.data(), y.size());
  return y;
}

double relative_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    ref += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

struct Case {
  TensorType type;
  double max_rel_rms;  // bits per value set the bound: 4.5 (Q4_K, IQ4_XS, IQ4_NL), 5 - 6 (Q4_1 .. Q5_K), 6.5625
};

TEST(QuantQuantize, DequantizedValuesStayCloseToTheInput) {
  for (const Case c : {Case{TensorType::Q4_K, 0.09}, Case{TensorType::Q5_K, 0.045}, Case{TensorType::Q6_K, 0.025},
                       Case{TensorType::IQ4_XS, 0.09}, Case{TensorType::Q4_1, 0.09}, Case{TensorType::Q5_0, 0.06},
                       Case{TensorType::Q5_1, 0.045}, Case{TensorType::IQ4_NL, 0.09}}) {
    for (const float scale : {0.02f, 1.0f, 300.0f}) {
      const std::vector<float> x = normal_values(4096, 11, scale);
      const std::vector<float> y = round_trip(c.type, x);
      const double e = relative_rms_error(x, y);
      EXPECT_LT(e, c.max_rel_rms) << gguf::tensor_type_name(c.type) << " scale " << scale;
      EXPECT_GT(e, 0.0) << gguf::tensor_type_name(c.type);  // a lossy type; an identity would be a bug here
    }
  }
}

// Groups of very different magnitudes in one super-block still get their own scales (the 6-bit group scales
// and the f16 super-block scale are packed and unpacked consistently).
TEST(QuantQuantize, EachGroupKeepsItsOwnScale) {
  for (const TensorType type : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_XS}) {
    std::vector<float> x = normal_values(256, 5, 1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= static_cast<float>(1 + i / 32);  // groups 1x .. 8x
    const std::vector<float> y = round_trip(type, x);
    for (size_t g = 0; g < 8; ++g) {
      const std::vector<float> xg(x.begin() + 32 * g, x.begin() + 32 * (g + 1));
      const std::vector<float> yg(y.begin() + 32 * g, y.begin() + 32 * (g + 1));
      EXPECT_LT(relative_rms_error(xg, yg), 0.25) << gguf::tensor_type_name(type) << " group " << g;
    }
  }
}

TEST(QuantQuantize, ZerosStayZeroAndOnlySomeTypesHaveAQuantizer) {
  for (const TensorType type : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_XS,
                                TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::IQ4_NL}) {
    const std::vector<float> zeros(512, 0.0f);
    const std::vector<float> y = round_trip(type, zeros);
    for (float v : y) ASSERT_EQ(v, 0.0f) << gguf::tensor_type_name(type);
  }
  EXPECT_EQ(quant_traits(TensorType::Q2_K)->quantize, nullptr);
  EXPECT_EQ(quant_traits(TensorType::Q3_K)->quantize, nullptr);
}

}  // namespace
}  // namespace preface::kernels
