// kernels::delta_rule: the scalar path equals the four-pass formulation written out (decay, prediction, update,
// output) bit for bit, and the AVX2 and AVX-512 paths equal the scalar one bit for bit over many steps, for the
// head sizes real and synthetic qwen35 files use and a size no lane width divides.
#include "kernels/delta_rule.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dot.h"
#include "kernels/kernel_test_util.h"

namespace preface::kernels {
namespace {

using test::random_floats;
using Fn = void (*)(float*, const float*, const float*, const float*, float, float, float*, float*, size_t);

// The formulation of model/layers/delta_net.h, one pass per step.
void four_pass(float* S, const float* q, const float* k, const float* v, float beta, float decay, float* out,
               size_t d) {
  std::vector<float> kv(d, 0.0f);
  for (size_t e = 0; e < d * d; ++e) S[e] *= decay;
  for (size_t i = 0; i < d; ++i) {
    for (size_t m = 0; m < d; ++m) kv[m] += S[i * d + m] * k[i];
  }
  for (size_t m = 0; m < d; ++m) kv[m] = beta * (v[m] - kv[m]);
  for (size_t i = 0; i < d; ++i) {
    for (size_t m = 0; m < d; ++m) S[i * d + m] += k[i] * kv[m];
  }
  for (size_t m = 0; m < d; ++m) out[m] = 0.0f;
  for (size_t i = 0; i < d; ++i) {
    for (size_t m = 0; m < d; ++m) out[m] += S[i * d + m] * q[i];
  }
}

// 20 steps of fn from one random state; the final state and every step's output, concatenated.
std::vector<float> run(Fn fn, size_t d) {
  std::vector<float> S = random_floats(d * d, 3, 0.5f), out(d), scratch(d), all;
  for (uint32_t step = 0; step < 20; ++step) {
    const auto q = random_floats(d, 10 + step), k = random_floats(d, 40 + step), v = random_floats(d, 70 + step);
    const float beta = 0.3f + 0.03f * static_cast<float>(step), decay = 0.99f - 0.01f * static_cast<float>(step);
    if (fn == nullptr) {
      four_pass(S.data(), q.data(), k.data(), v.data(), beta, decay, out.data(), d);
    } else {
      fn(S.data(), q.data(), k.data(), v.data(), beta, decay, out.data(), scratch.data(), d);
    }
    all.insert(all.end(), out.begin(), out.end());
  }
  all.insert(all.end(), S.begin(), S.end());
  return all;
}

TEST(DeltaRule, EveryPathEqualsTheScalarBits) {
  for (const size_t d : {size_t{16}, size_t{32}, size_t{128}, size_t{20}}) {
    const std::vector<float> ref = run(nullptr, d);
    const std::vector<float> sc = run(scalar::delta_rule, d);
    ASSERT_EQ(ref.size(), sc.size());
    EXPECT_EQ(0, std::memcmp(ref.data(), sc.data(), ref.size() * sizeof(float))) << "scalar, d " << d;
    if (avx2::available()) {
      const std::vector<float> v = run(avx2::delta_rule, d);
      EXPECT_EQ(0, std::memcmp(ref.data(), v.data(), ref.size() * sizeof(float))) << "avx2, d " << d;
    }
    if (avx512::available()) {
      const std::vector<float> v = run(avx512::delta_rule, d);
      EXPECT_EQ(0, std::memcmp(ref.data(), v.data(), ref.size() * sizeof(float))) << "avx512, d " << d;
    }
    const std::vector<float> dispatched = run(delta_rule, d);
    EXPECT_EQ(0, std::memcmp(ref.data(), dispatched.data(), ref.size() * sizeof(float))) << "dispatched, d " << d;
  }
}

}  // namespace
}  // namespace preface::kernels
