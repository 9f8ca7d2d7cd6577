// AVX2 Q8_0 quantization and Q8_0 / Q4_0 x Q8_0 dot products.
//
// Dots: each block's 32 int8 products are summed exactly in integers (|isum| <= 32 * 128 * 127 < 2^24, so the
// conversion to float is exact too). Four blocks at a time: their integer sums and their scales d_w * d_x form
// 4-lane vectors and acc = fma(d, isum, acc), so lane k accumulates blocks b = k mod 4. Then the lanes are summed
// in a fixed order and the n_blocks % 4 remaining blocks are added one by one: the order depends on n only.
// (Gathering four blocks' scales into one f16 -> f32 conversion is what makes this faster than one fma per
// block: the scale path, not the integer work, dominates a 34-byte block.)
//
// Must not call inline functions shared with baseline code (see dot_avx2.cpp).
#include <immintrin.h>

#include "kernels/dot.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {

namespace {

inline __m256i load_32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Exact int8 products of a Q8_0 weight block and an activation block, summed in groups of 4 into 8 int32 lanes.
// maddubs needs one unsigned operand, so it multiplies |w| (as u8: |-128| = 128 is right) by x carrying w's
// sign. Negating x is exact because |x| <= 127 (dot.h's precondition), and each i16 pair sum is
// <= 2 * 128 * 127 < 2^15: no saturation.
inline __m256i block_products(const BlockQ8_0& w, const BlockQ8_0& x) {
  const __m256i wq = load_32(w.qs);
  const __m256i abs_w = _mm256_sign_epi8(wq, wq);
  const __m256i signed_x = _mm256_sign_epi8(load_32(x.qs), wq);
  const __m256i pairs = _mm256_maddubs_epi16(abs_w, signed_x);  // [16] i16
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));       // [8] i32
}

// The same for a Q4_0 weight block, values (nibble - 8): maddubs(nibble, x) - maddubs(8, x) per i16 pair
// (|pair| <= 2 * 15 * 127 and 2 * 8 * 128: exact), which keeps the shift/sign/multiply ports less busy than
// unpacking to signed bytes. Nibble layout: byte j holds value j (low) and value j + 16 (high).
inline __m256i block_products(const BlockQ4_0& w, const BlockQ8_0& x) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
  const __m256i nibbles =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0f));  // [32] u8
  const __m256i xq = load_32(x.qs);
  const __m256i pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(nibbles, xq),
                                         _mm256_maddubs_epi16(_mm256_set1_epi8(8), xq));  // [16] i16
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));                                  // [8] i32
}

// Sum of the 8 int32 lanes (exact: no overflow for block sums).
inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Lane k = total of p_k's 8 lanes.
inline __m128i hsum4_i32(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i s01 = _mm256_hadd_epi32(p0, p1);  // [p0 p0 p1 p1 | p0 p0 p1 p1] pair sums
  const __m256i s23 = _mm256_hadd_epi32(p2, p3);
  const __m256i s = _mm256_hadd_epi32(s01, s23);  // [p0 p1 p2 p3 | p0 p1 p2 p3] half sums
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// Lane k = f32(w[k].d) * f32(x[k].d) for k < 4, with one 8-wide f16 conversion.
template <typename WBlock>
inline __m128 scales4(const WBlock* w, const BlockQ8_0* x) {
  const auto pair = [](uint16_t lo, uint16_t hi) { return static_cast<int>(lo | static_cast<uint32_t>(hi) << 16); };
  const __m128i halves = _mm_setr_epi32(pair(w[0].d, w[1].d), pair(w[2].d, w[3].d), pair(x[0].d, x[1].d),
                                        pair(x[2].d, x[3].d));
  const __m256 f = _mm256_cvtph_ps(halves);  // [dw0 dw1 dw2 dw3 dx0 dx1 dx2 dx3]
  return _mm_mul_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
}

template <typename WBlock>
float dot_blocks(const WBlock* w, const BlockQ8_0* x, size_t n) {
  const size_t n_blocks = n / kQuantBlock;
  __m128 acc = _mm_setzero_ps();  // lane k: blocks b with b % 4 == k
  size_t b = 0;
  for (; b + 4 <= n_blocks; b += 4) {
    const __m256i p0 = block_products(w[b], x[b]);
    const __m256i p1 = block_products(w[b + 1], x[b + 1]);
    const __m256i p2 = block_products(w[b + 2], x[b + 2]);
    const __m256i p3 = block_products(w[b + 3], x[b + 3]);
    acc = _mm_fmadd_ps(scales4(w + b, x + b), _mm_cvtepi32_ps(hsum4_i32(p0, p1, p2, p3)), acc);
  }
  __m128 s = _mm_add_ps(acc, _mm_movehl_ps(acc, acc));  // lanes (0 + 2), (1 + 3)
  float sum = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  for (; b < n_blocks; ++b) {
    const int32_t isum = hsum_i32(block_products(w[b], x[b]));
    sum += (half_to_float(w[b].d) * half_to_float(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

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

float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n) {
  return dot_blocks(w, x, n);
}

float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, size_t n) {
  return dot_blocks(w, x, n);
}

}  // namespace preface::kernels::avx2
