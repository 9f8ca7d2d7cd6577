// AVX2+FMA+F16C row kernels: axpy, f32 -> f16/bf16 row conversion, swiglu, geglu and softcap (the float row dots are 1 x 1
// GEMM tiles, gemm_avx2.cpp).
//
// This file must not call inline functions shared with baseline code (e.g. util/fp16.h): the linker may keep
// this AVX2-compiled copy for every caller. Tails therefore reuse the vector code on a padded copy.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/dot.h"
#include "kernels/ops.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {

namespace {

// y[i] = fma(a, v[i], y[i]) for every i, vector and tail alike.
template <typename V, typename LoadVec, typename LoadOne>
void axpy_impl(float a, const V* v, float* y, size_t n, LoadVec load_vec, LoadOne load_one) {
  const __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_vec(v + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = __builtin_fmaf(a, load_one(v[i]), y[i]);  // one vfmadd with -mfma
}

const auto load_f32 = [](const float* p) { return _mm256_loadu_ps(p); };
const auto one_f32 = [](float v) { return v; };
const auto load_f16 = [](const uint16_t* p) { return load_f16x8(p); };
const auto one_f16 = [](uint16_t h) { return half_to_float(h); };
const auto load_bf16 = [](const uint16_t* p) { return load_bf16x8(p); };
const auto one_bf16 = [](uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
};

// Converts n_tail < 8 values through an 8-wide kernel via zero-padded copies.
template <typename Convert8>
void convert_tail(const float* x, uint16_t* out, size_t n_tail, Convert8 convert8) {
  float in8[8] = {};
  uint16_t out8[8];
  std::memcpy(in8, x, n_tail * sizeof(float));
  convert8(in8, out8);
  std::memcpy(out, out8, n_tail * sizeof(uint16_t));
}

// f32 -> f16 for 8 values. F16C rounds to nearest even like f32_to_f16; only NaNs differ (F16C keeps payload
// bits), so NaN lanes are replaced with f32_to_f16's canonical quiet NaN, sign | 0x7e00.
void f16_x8(const float* x, uint16_t* out) {
  const __m256 v = _mm256_loadu_ps(x);
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));  // [8] 0 / -1
  const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
  const __m128i canon = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(static_cast<int16_t>(0x8000))),
                                     _mm_set1_epi16(0x7e00));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_blendv_epi8(h, canon, nan16));
}

// f32 -> bf16 for 8 values: f32_to_bf16's integer rounding (bits + 0x7fff + lsb, keep the top 16 bits);
// NaN lanes become (bits >> 16) | 0x40.
void bf16_x8(const float* x, uint16_t* out) {
  const __m256 v = _mm256_loadu_ps(x);
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i top = _mm256_srli_epi32(bits, 16);
  const __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
  const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256i rounded = _mm256_srli_epi32(biased, 16);
  const __m256i nan_value = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
  const __m256i nan_mask = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i r32 = _mm256_blendv_epi8(rounded, nan_value, nan_mask);  // [8] values in 0..0xffff
  // packus works per 128-bit lane: [r0..r3 r0..r3 | r4..r7 r4..r7]; gather qwords 0 and 2.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r32, r32), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(packed));
}

// silu(g) * u for 8 lanes: g / (1 + exp(-g)) * u.
inline __m256 swiglu_x8(__m256 g, __m256 u) {
  const __m256 e = exp_x8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

// ops.h's scalar::geglu per lane: 0.5 v (1 + tanh(c v (1 + a v v))) u, operations in the same order.
inline __m256 geglu_x8(__m256 v, __m256 u) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 inner = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.79788456080286535587989211986876f), v),
                                     _mm256_add_ps(one, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), v), v)));
  const __m256 half_v = _mm256_mul_ps(_mm256_set1_ps(0.5f), v);
  return _mm256_mul_ps(_mm256_mul_ps(half_v, _mm256_add_ps(one, tanh_x8(inner))), u);
}

// fn(x8, u8) over n values (u may be null), the tail through a zero-padded vector so that every value takes the
// same arithmetic.
template <typename Fn>
void map_x8(float* x, const float* u, size_t n, Fn fn) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(x + i, fn(_mm256_loadu_ps(x + i), u ? _mm256_loadu_ps(u + i) : _mm256_setzero_ps()));
  }
  if (i < n) {
    float a[8] = {}, b[8] = {};
    std::memcpy(a, x + i, (n - i) * sizeof(float));
    if (u) std::memcpy(b, u + i, (n - i) * sizeof(float));
    _mm256_storeu_ps(a, fn(_mm256_loadu_ps(a), _mm256_loadu_ps(b)));
    std::memcpy(x + i, a, (n - i) * sizeof(float));
  }
}

}  // namespace

void geglu(float* gate, const float* up, size_t n) { map_x8(gate, up, n, geglu_x8); }

void softcap(float* x, size_t n, float cap) {
  const __m256 vcap = _mm256_set1_ps(cap), vinv = _mm256_set1_ps(1.0f / cap);
  map_x8(x, nullptr, n, [&](__m256 v, __m256) { return _mm256_mul_ps(vcap, tanh_x8(_mm256_mul_ps(v, vinv))); });
}

void axpy_f32(float a, const float* v, float* y, size_t n) { axpy_impl(a, v, y, n, load_f32, one_f32); }
void axpy_f16(float a, const uint16_t* v, float* y, size_t n) { axpy_impl(a, v, y, n, load_f16, one_f16); }
void axpy_bf16(float a, const uint16_t* v, float* y, size_t n) { axpy_impl(a, v, y, n, load_bf16, one_bf16); }

void f32_to_f16_row(const float* x, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) f16_x8(x + i, out + i);
  if (i < n) convert_tail(x + i, out + i, n - i, f16_x8);
}

void f32_to_bf16_row(const float* x, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) bf16_x8(x + i, out + i);
  if (i < n) convert_tail(x + i, out + i, n - i, bf16_x8);
}

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

LogitStats logit_stats(const float* x, size_t n) {
  // The max: lanes reduced by max_ps(x, m), which keeps m when x is NaN, like the scalar x > m ? x : m.
  __m256 vm = _mm256_set1_ps(-INFINITY);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(_mm256_loadu_ps(x + i), vm);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vm);
  LogitStats st;
  st.max = -INFINITY;
  for (float v : lanes) st.max = v > st.max ? v : st.max;
  for (; i < n; ++i) st.max = x[i] > st.max ? x[i] : st.max;
  // Lane j accumulates the values i with i % 8 == j in index order; a tail is padded with -inf (exp gives 0).
  const __m256 m = _mm256_set1_ps(st.max);
  __m256 acc = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, exp_x8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m)));
  if (i < n) {
    alignas(32) float tail[8];
    for (float& v : tail) v = -INFINITY;
    std::memcpy(tail, x + i, (n - i) * sizeof(float));
    acc = _mm256_add_ps(acc, exp_x8(_mm256_sub_ps(_mm256_load_ps(tail), m)));
  }
  _mm256_store_ps(lanes, acc);
  st.sum_exp = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  return st;
}

}  // namespace preface::kernels::avx2
