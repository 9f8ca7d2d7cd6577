// avx2::tanh_x8 (simd_avx2.h), which the AVX2 and AVX-512 attention paths soft-cap scores with, gives softcap_tanh's
// bits (ops.h) lane by lane, so the soft-capping is one function on every path.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernel_test_util.h"
#include "kernels/ops.h"

#ifndef __clang__  // clang ignores target pragmas; its builds cover this through the attention tests
#pragma GCC target("avx2,fma,f16c")
#include "kernels/simd_avx2.h"

namespace preface::kernels {
namespace {

TEST(TanhX8, BitIdenticalToSoftcapTanh) {
  if (!avx2::available()) GTEST_SKIP() << "CPU lacks AVX2";
  std::vector<float> x = test::random_floats(1 << 16, 5, 12.0f);
  for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 43.0f, 44.0f, 100.0f, INFINITY, -INFINITY, NAN}) x.push_back(v);
  while (x.size() % 8 != 0) x.push_back(0.5f);
  for (size_t i = 0; i < x.size(); i += 8) {
    float got[8];
    _mm256_storeu_ps(got, avx2::tanh_x8(_mm256_loadu_ps(x.data() + i)));
    for (size_t k = 0; k < 8; ++k) {
      const float want = softcap_tanh(x[i + k]);
      ASSERT_EQ(std::memcmp(&got[k], &want, sizeof(float)), 0) << "x = " << x[i + k];
    }
  }
}

}  // namespace
}  // namespace preface::kernels
#endif
