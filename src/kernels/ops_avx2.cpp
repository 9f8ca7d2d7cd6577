// AVX2 elementwise ops (ops.h).
//
// Must not call inline functions shared with baseline code (see dot_avx2.cpp).
#include <immintrin.h>

#include <cstring>

#include "kernels/ops.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {
namespace {

// silu(g) * u for 8 lanes: g / (1 + exp(-g)) * u.
inline __m256 swiglu_x8(__m256 g, __m256 u) {
  const __m256 e = exp_x8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

}  // namespace

void swiglu(float* gate, const float* up, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(gate + i, swiglu_x8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {  // the tail through a zero-padded vector, so every value takes the same arithmetic
    float g[8] = {}, u[8] = {};
    std::memcpy(g, gate + i, (n - i) * sizeof(float));
    std::memcpy(u, up + i, (n - i) * sizeof(float));
    _mm256_storeu_ps(g, swiglu_x8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
    std::memcpy(gate + i, g, (n - i) * sizeof(float));
  }
}

}  // namespace preface::kernels::avx2
