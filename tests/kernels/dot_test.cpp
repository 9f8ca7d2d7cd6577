// Float-type dots and axpy: scalar and AVX2 against a double-precision reference, including odd sizes/tails.
#include "kernels/dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/kernel_test_util.h"

namespace preface::kernels {
namespace {

using test::random_floats;
using test::sum_tolerance;

const size_t kFloatSizes[] = {0, 1, 7, 8, 31, 32, 33, 64, 100, 4096};

#define REQUIRE_AVX2() \
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C"

// Checks dot(w, x, n) for scalar, AVX2 and the dispatcher against sum of decode(w[i]) * x[i] in double.
template <typename W, typename Decode>
void check_float_dot(const std::vector<W>& w, const std::vector<float>& x, Decode decode,
                     float (*scalar_dot)(const W*, const float*, size_t),
                     float (*avx2_dot)(const W*, const float*, size_t),
                     float (*dispatch_dot)(const W*, const float*, size_t)) {
  const size_t n = x.size();
  double ref = 0;
  double magnitude = 0;
  for (size_t i = 0; i < n; ++i) {
    const double term = double{decode(w[i])} * double{x[i]};
    ref += term;
    magnitude += std::fabs(term);
  }
  const double tol = sum_tolerance(n, magnitude);
  const float s = scalar_dot(w.data(), x.data(), n);
  EXPECT_NEAR(s, ref, tol) << "scalar, n " << n;
  const float d = dispatch_dot(w.data(), x.data(), n);
  EXPECT_NEAR(d, ref, tol) << "dispatch, n " << n;
  if (avx2::available()) {
    const float a = avx2_dot(w.data(), x.data(), n);
    EXPECT_NEAR(a, ref, tol) << "avx2, n " << n;
    EXPECT_NEAR(a, s, 2 * tol) << "avx2 vs scalar, n " << n;
    const char* forced = std::getenv("PREFACE_KERNELS");
    const bool scalar_forced = forced != nullptr && std::string(forced) == "scalar";
    EXPECT_EQ(d, scalar_forced ? s : a) << "the dispatcher picks AVX2 on this CPU unless PREFACE_KERNELS=scalar";
  }
}

TEST(DotF32, MatchesReferenceAllSizes) {
  for (size_t n : kFloatSizes) {
    const auto w = random_floats(n, 1 + static_cast<uint32_t>(n));
    const auto x = random_floats(n, 1000 + static_cast<uint32_t>(n), 3.0f);
    check_float_dot<float>(w, x, [](float v) { return v; }, scalar::dot_f32, avx2::dot_f32, dot_f32);
  }
}

TEST(DotF16, MatchesReferenceAllSizes) {
  for (size_t n : kFloatSizes) {
    const auto w = test::to_f16(random_floats(n, 2 + static_cast<uint32_t>(n)));
    const auto x = random_floats(n, 2000 + static_cast<uint32_t>(n), 3.0f);
    check_float_dot<uint16_t>(w, x, [](uint16_t h) { return f16_to_f32(h); }, scalar::dot_f16, avx2::dot_f16,
                              dot_f16);
  }
}

TEST(DotBf16, MatchesReferenceAllSizes) {
  for (size_t n : kFloatSizes) {
    const auto w = test::to_bf16(random_floats(n, 3 + static_cast<uint32_t>(n)));
    const auto x = random_floats(n, 3000 + static_cast<uint32_t>(n), 3.0f);
    check_float_dot<uint16_t>(w, x, [](uint16_t h) { return bf16_to_f32(h); }, scalar::dot_bf16,
                              avx2::dot_bf16, dot_bf16);
  }
}

TEST(DotF32, EveryElementCounts) {
  // One-hot weights: a kernel that skips or double-counts any position (tails included) fails.
  REQUIRE_AVX2();
  for (size_t n : {1, 7, 33, 100}) {
    const auto x = random_floats(n, 77, 2.0f);
    for (size_t hot = 0; hot < n; ++hot) {
      std::vector<float> w(n, 0.0f);
      w[hot] = 1.0f;
      EXPECT_EQ(avx2::dot_f32(w.data(), x.data(), n), x[hot]) << "n " << n << " hot " << hot;
      EXPECT_EQ(scalar::dot_f32(w.data(), x.data(), n), x[hot]) << "n " << n << " hot " << hot;
    }
  }
}

template <typename V, typename Decode>
void check_axpy(const std::vector<V>& v, Decode decode, void (*scalar_axpy)(float, const V*, float*, size_t),
                void (*avx2_axpy)(float, const V*, float*, size_t)) {
  const size_t n = v.size();
  const float a = -0.7f;
  const auto y0 = random_floats(n, 4242 + static_cast<uint32_t>(n), 2.0f);
  auto ys = y0;
  scalar_axpy(a, v.data(), ys.data(), n);
  auto ya = y0;
  if (avx2::available()) avx2_axpy(a, v.data(), ya.data(), n);
  for (size_t i = 0; i < n; ++i) {
    const double ref = double{y0[i]} + double{a} * double{decode(v[i])};
    const double tol = 2 * FLT_EPSILON * (std::fabs(double{y0[i]}) + std::fabs(double{a} * decode(v[i])));
    EXPECT_NEAR(ys[i], ref, tol) << "scalar, n " << n << " i " << i;
    if (avx2::available()) {
      EXPECT_NEAR(ya[i], ref, tol) << "avx2, n " << n << " i " << i;
    }
  }
}

TEST(Axpy, AllTypesMatchReference) {
  for (size_t n : kFloatSizes) {
    const auto v = random_floats(n, 5 + static_cast<uint32_t>(n));
    check_axpy<float>(v, [](float f) { return f; }, scalar::axpy_f32, avx2::axpy_f32);
    check_axpy<uint16_t>(test::to_f16(v), [](uint16_t h) { return f16_to_f32(h); }, scalar::axpy_f16,
                         avx2::axpy_f16);
    check_axpy<uint16_t>(test::to_bf16(v), [](uint16_t h) { return bf16_to_f32(h); }, scalar::axpy_bf16,
                         avx2::axpy_bf16);
  }
}

TEST(Axpy, DispatcherAddsScaledRow) {
  std::vector<float> y = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> v = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  axpy_f32(0.5f, v.data(), y.data(), y.size());
  EXPECT_EQ(y, (std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f, 8.5f, 10.0f}));
}

}  // namespace
}  // namespace preface::kernels
