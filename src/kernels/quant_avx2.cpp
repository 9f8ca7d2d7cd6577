// AVX2 Q8_0 quantization of activation rows (the Q8_0 / Q4_0 row dots are 1 x 1 GEMM tiles, gemm_avx2.cpp).
//
// Must not call inline functions shared with baseline code (see dot_avx2.cpp).
#include <immintrin.h>

#include "kernels/dot.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {

namespace {

// roundf (halfway cases away from zero) for 8 lanes, exact for |v| < 2^23: trunc(v), plus sign(v) when the
// dropped fraction is >= 0.5. NaN lanes become 0.
inline __m256 round_away(__m256 v) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign_mask, _mm256_sub_ps(v, t));  // |v - t|, exact
  const __m256 bump = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 signed_one = _mm256_or_ps(_mm256_and_ps(v, sign_mask), _mm256_set1_ps(1.0f));
  const __m256 rounded = _mm256_add_ps(t, _mm256_and_ps(bump, signed_one));
  return _mm256_and_ps(rounded, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* out, size_t n) {
  const size_t n_blocks = n / kQuantBlock;
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (size_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * kQuantBlock;  // [32]
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      // max_ps returns its second operand when either is NaN: NaN inputs are skipped, as fmax does.
      amax = _mm256_max_ps(_mm256_andnot_ps(sign_mask, v[k]), amax);
    }
    const float d = hmax(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];  // [4][8] i32 in [-127, 127]
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v[k], vid)));
    // Packing interleaves 128-bit lanes: i32 -> i16 -> i8 leaves dwords in order 0 4 1 5 2 6 3 7.
    const __m256i q16_01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q16_23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_packs_epi16(q16_01, q16_23);
    const __m256i ordered = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), ordered);
  }
}

}  // namespace preface::kernels::avx2
