// Small AVX2 helpers shared by the SIMD kernels. Include only from files compiled with AVX2+FMA+F16C enabled
// (*_avx2.cpp, or after a target pragma). Internal linkage: each translation unit keeps its own copies, compiled
// for its own target, so a wider target's copy is never picked for another file.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace preface::kernels::avx2 {
namespace {

// Sum of the 8 lanes in a fixed order: (lane i + lane i+4), then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of the 8 int32 lanes (exact when it fits).
inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Largest of the 8 lanes (order does not matter for max).
inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 8 f16 values at p -> 8 floats.
inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 8 bf16 values at p -> 8 floats (bf16 is the top half of an f32).
inline __m256 load_bf16x8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// Lane i = sum of the 8 lanes of a[i], each by the same fixed tree: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
inline __m256 hsum_8x8(const __m256 a[8]) {
  const __m256 s01 = _mm256_hadd_ps(a[0], a[1]);  // [a0 01 23, a1 01 23 | a0 45 67, a1 45 67]
  const __m256 s23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 s45 = _mm256_hadd_ps(a[4], a[5]);
  const __m256 s67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 s0123 = _mm256_hadd_ps(s01, s23);  // [a0..a3 (01+23) | a0..a3 (45+67)]
  const __m256 s4567 = _mm256_hadd_ps(s45, s67);
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// Lane i = the (exact, wrapping) sum of the 8 int32 lanes of v[i].
inline __m256i reduce8_i32(const __m256i v[8]) {
  const __m256i s01 = _mm256_hadd_epi32(v[0], v[1]), s23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i s45 = _mm256_hadd_epi32(v[4], v[5]), s67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i s0123 = _mm256_hadd_epi32(s01, s23), s4567 = _mm256_hadd_epi32(s45, s67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
                          _mm256_permute2x128_si256(s0123, s4567, 0x31));
}

// Eight 16-bit lanes, lane i = f(i) (built in registers: eight scalar stores read back as one vector would stall
// store forwarding).
template <typename F>
inline __m128i lanes_u16(F f) {
  return _mm_setr_epi16(static_cast<int16_t>(f(0)), static_cast<int16_t>(f(1)), static_cast<int16_t>(f(2)),
                        static_cast<int16_t>(f(3)), static_cast<int16_t>(f(4)), static_cast<int16_t>(f(5)),
                        static_cast<int16_t>(f(6)), static_cast<int16_t>(f(7)));
}

// e^x for 8 lanes (Cephes expf: x = n ln2 + r, |r| <= ln2 / 2, degree-7 polynomial, scale by 2^n), within a
// few ulps for x in [-87.33, 88]; x < -87.33 (and -inf) gives 0 (results that would be subnormal are flushed),
// x > 88 gives +inf, NaN stays NaN. exp(0) = 1 exactly.
inline __m256 exp_x8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654475f);
  const __m256 hi = _mm256_set1_ps(88.0f);
  // Lanes below lo (the masked scores' -inf among them) are computed from 0 and zeroed at the end: clamped to lo
  // they would form a denormal product, which costs a microcode assist per instruction on some CPUs (a large
  // share of a short decode attention call, where most lanes are masked; figures in docs/perf-log/).
  const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 xc = _mm256_andnot_ps(below, _mm256_min_ps(_mm256_max_ps(x, lo), hi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);  // [-126, 127]
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 e = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
  e = _mm256_andnot_ps(below, e);
  e = _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// softcap_tanh (ops.h) for 8 lanes, bit for bit: sign(x) (1 - t) / (1 + t), t = exp_x8(-2 |x|).
inline __m256 tanh_x8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 t = exp_x8(_mm256_mul_ps(_mm256_andnot_ps(sign, x), _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 r = _mm256_div_ps(_mm256_sub_ps(one, t), _mm256_add_ps(one, t));
  return _mm256_or_ps(_mm256_andnot_ps(sign, r), _mm256_and_ps(sign, x));
}

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

}  // namespace
}  // namespace preface::kernels::avx2
