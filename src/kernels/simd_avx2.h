// Small AVX2 helpers shared by the *_avx2.cpp kernels. Include only from files compiled with
// -mavx2 -mfma -mf16c.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace preface::kernels::avx2 {

// Sum of the 8 lanes in a fixed order: (lane i + lane i+4), then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
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

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

}  // namespace preface::kernels::avx2
