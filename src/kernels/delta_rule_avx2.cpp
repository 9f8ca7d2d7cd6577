// The delta rule 8 lanes over m at a time (kernels/delta_rule.h): the scalar operations, lane by lane.
#include <immintrin.h>

#include "kernels/delta_rule.h"

namespace preface::kernels::avx2 {

void delta_rule(float* S, const float* q, const float* k, const float* v, float beta, float decay, float* out,
                float* scratch, size_t d) {
  if (d % 8 != 0) {
    scalar::delta_rule(S, q, k, v, beta, decay, out, scratch, d);
    return;
  }
  float* kv = scratch;
  const __m256 vdecay = _mm256_set1_ps(decay);
  for (size_t m = 0; m < d; m += 8) _mm256_storeu_ps(kv + m, _mm256_setzero_ps());
  for (size_t i = 0; i < d; ++i) {
    float* row = S + i * d;
    const __m256 ki = _mm256_set1_ps(k[i]);
    for (size_t m = 0; m < d; m += 8) {
      const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + m), vdecay);
      _mm256_storeu_ps(row + m, s);
      _mm256_storeu_ps(kv + m, _mm256_add_ps(_mm256_loadu_ps(kv + m), _mm256_mul_ps(s, ki)));
    }
  }
  const __m256 vbeta = _mm256_set1_ps(beta);
  for (size_t m = 0; m < d; m += 8) {
    _mm256_storeu_ps(kv + m, _mm256_mul_ps(vbeta, _mm256_sub_ps(_mm256_loadu_ps(v + m), _mm256_loadu_ps(kv + m))));
    _mm256_storeu_ps(out + m, _mm256_setzero_ps());
  }
  for (size_t i = 0; i < d; ++i) {
    float* row = S + i * d;
    const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
    for (size_t m = 0; m < d; m += 8) {
      const __m256 s = _mm256_add_ps(_mm256_loadu_ps(row + m), _mm256_mul_ps(ki, _mm256_loadu_ps(kv + m)));
      _mm256_storeu_ps(row + m, s);
      _mm256_storeu_ps(out + m, _mm256_add_ps(_mm256_loadu_ps(out + m), _mm256_mul_ps(s, qi)));
    }
  }
}

}  // namespace preface::kernels::avx2
