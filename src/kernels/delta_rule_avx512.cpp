// The delta rule 16 lanes over m at a time (kernels/delta_rule.h): the scalar operations, lane by lane.
#pragma GCC target("avx512f")
#include <immintrin.h>

#include "kernels/delta_rule.h"

namespace preface::kernels::avx512 {

void delta_rule(float* S, const float* q, const float* k, const float* v, float beta, float decay, float* out,
                float* scratch, size_t d) {
  if (d % 16 != 0) {
    scalar::delta_rule(S, q, k, v, beta, decay, out, scratch, d);
    return;
  }
  float* kv = scratch;
  const __m512 vdecay = _mm512_set1_ps(decay);
  for (size_t m = 0; m < d; m += 16) _mm512_storeu_ps(kv + m, _mm512_setzero_ps());
  for (size_t i = 0; i < d; ++i) {
    float* row = S + i * d;
    const __m512 ki = _mm512_set1_ps(k[i]);
    for (size_t m = 0; m < d; m += 16) {
      const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(row + m), vdecay);
      _mm512_storeu_ps(row + m, s);
      _mm512_storeu_ps(kv + m, _mm512_add_ps(_mm512_loadu_ps(kv + m), _mm512_mul_ps(s, ki)));
    }
  }
  const __m512 vbeta = _mm512_set1_ps(beta);
  for (size_t m = 0; m < d; m += 16) {
    _mm512_storeu_ps(kv + m, _mm512_mul_ps(vbeta, _mm512_sub_ps(_mm512_loadu_ps(v + m), _mm512_loadu_ps(kv + m))));
    _mm512_storeu_ps(out + m, _mm512_setzero_ps());
  }
  for (size_t i = 0; i < d; ++i) {
    float* row = S + i * d;
    const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
    for (size_t m = 0; m < d; m += 16) {
      const __m512 s = _mm512_add_ps(_mm512_loadu_ps(row + m), _mm512_mul_ps(ki, _mm512_loadu_ps(kv + m)));
      _mm512_storeu_ps(row + m, s);
      _mm512_storeu_ps(out + m, _mm512_add_ps(_mm512_loadu_ps(out + m), _mm512_mul_ps(s, qi)));
    }
  }
}

}  // namespace preface::kernels::avx512
