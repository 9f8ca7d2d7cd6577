// AVX-512 Q8_0 quantization of activation rows, byte-identical to scalar::quantize_row_q8_0 and
// avx2::quantize_row_q8_0 (dot.h: d = absmax / 127 stored as f16, id = d ? 1 / d : 0, q = roundf(x * id)).
//
// The AVX2 version finds each block's absmax with a horizontal reduction and then divides twice in scalar code,
// one block after another (a large part of a decode step's per-token passes; measurements in
// docs/perf-log/session-13.md). Here 16 blocks go together: their 16 absmax vectors are folded into one vector
// whose lane i is block i's absmax, so the two divisions and the f16 conversion run once per 16 blocks. max is
// exact and, with NaN lanes dropped first (as the AVX2 version drops them), independent of order, so the absmax is
// the same value.
//
// Standard headers come before the target pragma, and nothing here instantiates library templates, so no code
// compiled for AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dot.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace preface::kernels::avx512 {
namespace {

constexpr size_t kBlocksPerStep = 16;  // blocks whose scales are computed together (one per lane)

// roundf (halfway cases away from zero) for 16 lanes, exact for |v| < 2^23: trunc(v), plus sign(v) when the
// dropped fraction is >= 0.5. NaN lanes become 0. (avx2::round_away, 16 lanes wide.)
inline __m512 round_away(__m512 v) {
  const __m512 sign_mask = _mm512_set1_ps(-0.0f);
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_andnot_ps(sign_mask, _mm512_sub_ps(v, t));  // |v - t|, exact
  const __mmask16 bump = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 signed_one = _mm512_or_ps(_mm512_and_ps(v, sign_mask), _mm512_set1_ps(1.0f));
  const __m512 rounded = _mm512_mask_add_ps(t, bump, t, signed_one);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), rounded);
}

// Blocks x[0 .. n_blocks) (n_blocks <= 16; [n_blocks][32] floats) -> out[0 .. n_blocks).
void quantize_step(const float* x, BlockQ8_0* out, size_t n_blocks) {
  const __m512 sign_mask = _mm512_set1_ps(-0.0f);
  const __m512 zero = _mm512_setzero_ps();
  // a[i]: 16 partial absmaxes of block i (0 for blocks past n_blocks). max_ps returns its second operand when
  // either is NaN, so NaN inputs are skipped and no lane holds NaN.
  __m512 a[kBlocksPerStep];
  for (size_t i = 0; i < kBlocksPerStep; ++i) {
    if (i < n_blocks) {
      const __m512 lo = _mm512_andnot_ps(sign_mask, _mm512_loadu_ps(x + 32 * i));
      const __m512 hi = _mm512_andnot_ps(sign_mask, _mm512_loadu_ps(x + 32 * i + 16));
      a[i] = _mm512_max_ps(hi, _mm512_max_ps(lo, zero));
    } else {
      a[i] = zero;
    }
  }
  // Fold: b[k] holds blocks 2k, 2k + 1 in 256-bit halves (8 partials each); c[k] blocks 4k .. 4k + 3 in 128-bit
  // lanes (4 each); d[k] per 128-bit lane j: blocks 8k + j, 8k + 4 + j (2 each); m per 128-bit lane j: blocks j,
  // 4 + j, 8 + j, 12 + j (lane 4j + r holds block 4r + j).
  __m512 b[8], c[4], d[2];
  for (int k = 0; k < 8; ++k) {
    b[k] = _mm512_max_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int k = 0; k < 4; ++k) {
    c[k] = _mm512_max_ps(_mm512_shuffle_f32x4(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  for (int k = 0; k < 2; ++k) {
    d[k] = _mm512_max_ps(_mm512_shuffle_ps(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 m = _mm512_max_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // amax[i] = absmax of block i: lane 4 (i % 4) + i / 4 of m.
  const __m512 amax = _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), m);
  const __m512 dv = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
  const __mmask16 nonzero = _mm512_cmp_ps_mask(dv, zero, _CMP_NEQ_UQ);
  alignas(64) float id[kBlocksPerStep];  // [block] 1 / d, or 0 where d == 0
  _mm512_store_ps(id, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), dv));
  alignas(32) uint16_t d_f16[kBlocksPerStep];  // [block]
  _mm256_store_si256(reinterpret_cast<__m256i*>(d_f16),
                     _mm512_cvtps_ph(dv, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (size_t i = 0; i < n_blocks; ++i) {
    const __m512 scale = _mm512_set1_ps(id[i]);
    const __m512i q_lo = _mm512_cvtps_epi32(round_away(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * i), scale)));
    const __m512i q_hi = _mm512_cvtps_epi32(round_away(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * i + 16), scale)));
    out[i].d = d_f16[i];
    // Saturating narrowing, as the AVX2 version's packs; |q| <= 127 here anyway.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[i].qs), _mm512_cvtsepi32_epi8(q_lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[i].qs + 16), _mm512_cvtsepi32_epi8(q_hi));
  }
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* out, size_t n) {
  const size_t n_blocks = n / kQuantBlock;
  for (size_t b = 0; b < n_blocks; b += kBlocksPerStep) {
    const size_t step = n_blocks - b < kBlocksPerStep ? n_blocks - b : kBlocksPerStep;
    quantize_step(x + b * kQuantBlock, out + b, step);
  }
}

}  // namespace preface::kernels::avx512
