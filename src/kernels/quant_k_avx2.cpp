// AVX2 Q8_K activation quantization, and row dots for Q4_K, Q5_K, Q6_K and IQ4_XS with Q8_K activations. The
// integer part of each super-block (sum over groups of scale * sum(q * x), and the min term from the activations'
// bsums) is exact, so it equals the scalar unpacked sum whatever the lane order; the float operations that follow
// are the scalar ones (quant_dot.cpp dot_k), so the results are the same bits.
#include <immintrin.h>

#include <cstring>

#include "kernels/quant.h"
#include "kernels/simd_avx2.h"
#include "util/fp16.h"

namespace preface::kernels::avx2 {

namespace {

// Q4_K and Q5_K: per super-block, groups 2p and 2p + 1 (p < 4) hold unsigned levels (0..15, or 0..31 with the
// fifth bit) with 6-bit scales and mins. levels(block, p, &lo, &hi) gives the two groups' 32 levels each.
template <typename Block, typename Levels>
float dot_k4(const Block* w, const BlockQ8_K* x, size_t n, Levels levels) {
  float acc = 0.0f;
  for (size_t b = 0; b < n / kQK; ++b) {
    uint8_t sc[8], mn[8];
    int32_t imin = 0;
    for (int j = 0; j < 8; ++j) {
      scale_min_k4(j, w[b].scales, &sc[j], &mn[j]);
      imin += mn[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
    }
    __m256i sum = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      __m256i lo, hi;
      levels(w[b], p, &lo, &hi);
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 64 * p));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 64 * p + 32));
      // maddubs: pairs of (0..31) * int8, at most 2 * 31 * 128 in magnitude: no saturation.
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_set1_epi16(sc[2 * p]));
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), _mm256_set1_epi16(sc[2 * p + 1]));
      sum = _mm256_add_epi32(sum, _mm256_add_epi32(p0, p1));
    }
    const int32_t isum = hsum_i32(sum);
    acc += f16_to_f32(w[b].d) * x[b].d * static_cast<float>(isum);
    acc -= f16_to_f32(w[b].dmin) * x[b].d * static_cast<float>(imin);
  }
  return acc;
}

}  // namespace

float dot_q4_k(const BlockQ4_K* w, const BlockQ8_K* x, size_t n) {
  return dot_k4(w, x, n, [](const BlockQ4_K& b, int p, __m256i* lo, __m256i* hi) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
  });
}

float dot_q5_k(const BlockQ5_K* w, const BlockQ8_K* x, size_t n) {
  return dot_k4(w, x, n, [](const BlockQ5_K& b, int p, __m256i* lo, __m256i* hi) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    // Bit 2p (2p + 1) of qh[l] is the fifth bit of value l of group 2p (2p + 1).
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one), 4);
    *lo = _mm256_or_si256(_mm256_and_si256(q, m4), h0);
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1);
  });
}

float dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8_K* x, size_t n) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  const __m256i values = _mm256_set_m128i(table, table);
  float acc = 0.0f;
  for (size_t b = 0; b < n / kQK; ++b) {
    __m256i sum = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {  // groups 2p and 2p + 1, 16 bytes of qs each
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 32 * p));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 32 * p + 16));
      // Group g's 32 values: low nibbles of its 16 bytes, then high nibbles.
      const __m256i n0 = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q0, 4), _mm256_castsi256_si128(m4)),
                                          _mm_and_si128(q0, _mm256_castsi256_si128(m4)));
      const __m256i n1 = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q1, 4), _mm256_castsi256_si128(m4)),
                                          _mm_and_si128(q1, _mm256_castsi256_si128(m4)));
      const __m256i v0 = _mm256_shuffle_epi8(values, n0);
      const __m256i v1 = _mm256_shuffle_epi8(values, n1);
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 64 * p));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 64 * p + 32));
      // Signed x signed through maddubs: |v| * (x with v's sign); |v| <= 127, so pairs stay below 2^15.
      const __m256i d0 = _mm256_maddubs_epi16(_mm256_sign_epi8(v0, v0), _mm256_sign_epi8(x0, v0));
      const __m256i d1 = _mm256_maddubs_epi16(_mm256_sign_epi8(v1, v1), _mm256_sign_epi8(x1, v1));
      const int ls0 = ((w[b].scales_l[p] & 0xF) | (((w[b].scales_h >> (4 * p)) & 3) << 4)) - 32;
      const int ls1 = ((w[b].scales_l[p] >> 4) | (((w[b].scales_h >> (4 * p + 2)) & 3) << 4)) - 32;
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(d0, _mm256_set1_epi16(static_cast<int16_t>(ls0))));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(d1, _mm256_set1_epi16(static_cast<int16_t>(ls1))));
    }
    acc += f16_to_f32(w[b].d) * x[b].d * static_cast<float>(hsum_i32(sum));
  }
  return acc;
}

float dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* x, size_t n) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m2 = _mm256_set1_epi8(3);
  float acc = 0.0f;
  for (size_t b = 0; b < n / kQK; ++b) {
    const int8_t* sc = w[b].scales;
    // Levels are u - 32 with u in 0..63: sum(u * x) - 32 * bsum per group of 16.
    int32_t bias = 0;
    for (int g = 0; g < 16; ++g) bias += sc[g] * x[b].bsums[g];
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * h));
      const __m256i u[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4)),
          _mm256_or_si256(_mm256_and_si256(l1, m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4)),
      };
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * h + 2 * k;  // groups g (lanes 0..7 of the products) and g + 1 (lanes 8..15)
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 128 * h + 32 * k));
        const __m256i scale = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        // maddubs: pairs of (0..63) * int8, at most 2 * 63 * 128 in magnitude: no saturation.
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u[k], xv), scale));
      }
    }
    const int32_t isum = hsum_i32(sum) - 32 * bias;
    acc += f16_to_f32(w[b].d) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

// The bytes of scalar::quantize_row_q8_k: the same max (vmaxps returns its second operand, the running maximum,
// when the first is NaN, as the scalar `|x| > amax` skips NaN; the first index holding it), the same float steps
// per value (x * iscale, then + 1.5 * 2^23, no fusing) and integer steps on the sum's bits.
void quantize_row_q8_k(const float* x, BlockQ8_K* out, size_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    __m256 m = _mm256_setzero_ps();
    for (size_t j = 0; j < kQK; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float amax = _mm_cvtss_f32(m4);
    BlockQ8_K& o = out[b];
    if (amax == 0.0f) {
      o = BlockQ8_K{};  // d = 0, every q and bsum 0
      continue;
    }
    float max = 0.0f;
    const __m256 vamax = _mm256_set1_ps(amax);
    for (size_t j = 0; j < kQK; j += 8) {
      const __m256 ax = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(ax, vamax, _CMP_EQ_OQ));
      if (hit != 0) {
        max = x[j + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(hit)))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vscale = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.0f);
    const __m256i mantissa = _mm256_set1_epi32(0x007fffff), half = _mm256_set1_epi32(0x00400000);
    const __m256i top = _mm256_set1_epi32(127);
    const __m256i low_byte = _mm256_set1_epi32(0xff);
    // Each q's low byte (q is far outside int8 when iscale overflows, as for denormal blocks: the scalar int8
    // cast keeps the low byte), so the unsigned saturating packs below never saturate.
    const auto level = [&](size_t j) {
      const __m256 v = _mm256_add_ps(_mm256_mul_ps(vscale, _mm256_loadu_ps(x + j)), magic);
      const __m256i q = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), mantissa), half);
      return _mm256_and_si256(_mm256_min_epi32(q, top), low_byte);
    };
    for (size_t j = 0; j < kQK; j += 32) {
      const __m256i q16a = _mm256_packus_epi32(level(j), level(j + 8));
      const __m256i q16b = _mm256_packus_epi32(level(j + 16), level(j + 24));
      const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(q16a, q16b),
                                                     _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.qs + j), q8);
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int g = 0; g < 16; ++g) {
      const __m256i q = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(o.qs + 16 * g)));
      o.bsums[g] = static_cast<int16_t>(hsum_i32(_mm256_madd_epi16(q, ones)));
    }
    o.d = 1.0f / iscale;
  }
}

}  // namespace preface::kernels::avx2
