// AVX2 GEMM tiles for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS weights with Q8_K activations (Q4_1, Q5_0, Q5_1
// and IQ4_NL go to gemm_q32). A tile is R weight rows x T tokens (R * T <= 8): each super-block's levels are unpacked
// once per row and multiplied with the T tokens' activations, and the tile's (up to) 8 integer sums are reduced
// together into one vector, whose lane i is output (i / T, i % T).
//
// Exactness: per output and super-block, the integer sums (sum over groups of scale * sum(q * x), the min or
// level-bias term from the activations' bsums) are exact int32, so they equal the scalar unpacked sums whatever
// the lane order; the float operations that follow, lane by lane, are the scalar ones (quant_dot.cpp dot_k:
// acc += d * x.d * isum, then acc -= dmin * x.d * imin) in super-block order. So every output is the bits of the
// scalar traits dot of its row and token, whatever the tile shape, row range or batch.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {

namespace {

// What a row contributes to a super-block, prepared once per (row, super-block): the scales (K::kPairScales:
// one per 16 values, sc[2s] and sc[2s + 1] for the two halves of step s; else sc[s] for the 32 values of step
// s), the f16 scales as f32, and the 16 int16 lanes that multiply the activations' bsums (the mins per 16 values
// for Q4_K/Q5_K, the 16 scales for Q6_K's level bias).
struct RowPrep {
  alignas(32) int16_t sc[16];
  __m256i bsum_weights;
  uint16_t d, dmin;  // f16 bits; converted 8 at a time (F16C: exact, as f16_to_f32 for every finite value)
};

template <typename K>
inline __m256i step_scale(const RowPrep& p, int s) {
  if constexpr (K::kPairScales) {
    return _mm256_set_m128i(_mm_set1_epi16(p.sc[2 * s + 1]), _mm_set1_epi16(p.sc[2 * s]));
  } else {
    return _mm256_set1_epi16(p.sc[s]);
  }
}

// Q4_K / Q5_K: step s is group s (values 32s..32s+31), 6-bit scale and min. The 12 packed bytes become 8 scale
// bytes then 8 min bytes with 32-bit masks (the layout scale_min_k4 reads: scales 0..3 and mins 0..3 in the low 6
// bits of bytes 0..7, scales and mins 4..7 split between bytes 8..11 and the top 2 bits of bytes 0..7).
template <typename Block>
void prep_k4(const Block& b, RowPrep& p) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, b.scales, sizeof(u));
  const uint32_t sc[2] = {u[0] & kLow6, (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4)};
  const uint32_t mn[2] = {u[1] & kLow6, ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4)};
  _mm_store_si128(reinterpret_cast<__m128i*>(p.sc),
                  _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(sc[1]), static_cast<int>(sc[0]))));
  // Each min twice: the activations' bsums are per 16 values, two per group.
  const __m128i mins = _mm_set_epi32(0, 0, static_cast<int>(mn[1]), static_cast<int>(mn[0]));
  p.bsum_weights = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins, mins));
  p.d = b.d;
  p.dmin = b.dmin;
}

struct Q4K {
  using Block = BlockQ4_K;
  static constexpr bool kMin = true, kBias = false, kPairScales = false;
  static void prep(const Block& b, RowPrep& p) { prep_k4(b, p); }
  static __m256i levels(const Block& b, int s) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (s / 2)));
    return _mm256_and_si256(s % 2 == 0 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0xF));
  }
  // maddubs: pairs of (0..31) * int8, at most 2 * 31 * 128 in magnitude: no saturation (also Q5_K).
  static __m256i mul(__m256i u, __m256i x) { return _mm256_maddubs_epi16(u, x); }
};

struct Q5K {
  using Block = BlockQ5_K;
  static constexpr bool kMin = true, kBias = false, kPairScales = false;
  static void prep(const Block& b, RowPrep& p) { prep_k4(b, p); }
  static __m256i levels(const Block& b, int s) {
    // Bit s of qh[l] is the fifth bit of value l of group s.
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    const __m256i h = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, s), _mm256_set1_epi8(1)), 4);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (s / 2)));
    return _mm256_or_si256(_mm256_and_si256(s % 2 == 0 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0xF)), h);
  }
  static __m256i mul(__m256i u, __m256i x) { return _mm256_maddubs_epi16(u, x); }
};

// Q6_K: step s = 4h + k covers groups 2s and 2s + 1 (16 values each); the unsigned levels u = q + 32 are used
// and 32 * sum(scale * bsum) is subtracted (kBias).
struct Q6K {
  using Block = BlockQ6_K;
  static constexpr bool kMin = false, kBias = true, kPairScales = true;
  static constexpr int kBiasShift = 5;
  static void prep(const Block& b, RowPrep& p) {
    p.bsum_weights = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc), p.bsum_weights);
    p.d = b.d;
    p.dmin = 0;
  }
  static __m256i levels(const Block& b, int s) {
    const int h = s / 4, k = s % 4;
    const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32 * (k % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    const __m256i lo = _mm256_and_si256(k < 2 ? l : _mm256_srli_epi16(l, 4), _mm256_set1_epi8(0xF));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  }
  // maddubs: pairs of (0..63) * int8, at most 2 * 63 * 128 in magnitude: no saturation.
  static __m256i mul(__m256i u, __m256i x) { return _mm256_maddubs_epi16(u, x); }
};

// Q2_K: step s = 4h + k covers values 32s..32s+31, the 2-bit fields k of qs[32h..32h+31]; a 4-bit scale (pair
// scales: one per 16 values) and a 4-bit min per 16 values.
struct Q2K {
  using Block = BlockQ2_K;
  static constexpr bool kMin = true, kBias = false, kPairScales = true;
  static void prep(const Block& b, RowPrep& p) {
    const __m256i packed = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc), _mm256_and_si256(packed, _mm256_set1_epi16(0xF)));
    p.bsum_weights = _mm256_srli_epi16(packed, 4);
    p.d = b.d;
    p.dmin = b.dmin;
  }
  static __m256i fields2(const uint8_t* qs, int s) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (s / 4)));
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * (s % 4)), _mm256_set1_epi8(3));
  }
  static __m256i levels(const Block& b, int s) { return fields2(b.qs, s); }
  // maddubs: pairs of (0..7) * int8: no saturation (also Q3_K).
  static __m256i mul(__m256i u, __m256i x) { return _mm256_maddubs_epi16(u, x); }
};

// Q3_K: Q2_K's fields plus bit s of hmask[i] (s = 4h + k) as the third bit; the unsigned levels u = q + 4 are
// used and 4 * sum(scale * bsum) is subtracted (kBias). 6-bit signed scales per 16 values (q3_k_scales).
struct Q3K {
  using Block = BlockQ3_K;
  static constexpr bool kMin = false, kBias = true, kPairScales = true;
  static constexpr int kBiasShift = 2;
  static void prep(const Block& b, RowPrep& p) {
    alignas(16) int8_t sc[16];
    q3_k_scales(b.scales, sc);
    p.bsum_weights = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(sc)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc), p.bsum_weights);
    p.d = b.d;
    p.dmin = 0;
  }
  static __m256i levels(const Block& b, int s) {
    const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
    const __m256i hbit = _mm256_and_si256(_mm256_srli_epi16(m, s), _mm256_set1_epi8(1));
    return _mm256_or_si256(Q2K::fields2(b.qs, s), _mm256_slli_epi16(hbit, 2));
  }
  static __m256i mul(__m256i u, __m256i x) { return _mm256_maddubs_epi16(u, x); }
};

// IQ4_XS: step s is group s; levels are the signed table values.
struct IQ4XS {
  using Block = BlockIQ4_XS;
  static constexpr bool kMin = false, kBias = false, kPairScales = false;
  static void prep(const Block& b, RowPrep& p) {
    for (int s = 0; s < 8; ++s) {
      const int ls = ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
      p.sc[s] = static_cast<int16_t>(ls - 32);
    }
    p.bsum_weights = _mm256_setzero_si256();
    p.d = b.d;
    p.dmin = 0;
  }
  static __m256i levels(const Block& b, int s) {
    const __m128i m4 = _mm_set1_epi8(0xF);
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * s));
    // Group s's 32 values: low nibbles of its 16 bytes, then high nibbles.
    const __m256i n = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), n);
  }
  // Signed x signed through maddubs: |v| * (x with v's sign); |v| <= 127, so pairs stay below 2^15.
  static __m256i mul(__m256i v, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(x, v));
  }
};

constexpr size_t kPrefetchTiles = 2;

// Outputs y[t0 + t][r0 + r] for r < R, t < T: w points at row r0, x at token t0's activations.
template <typename K, int R, int T>
void tile(const GemmArgs& a, int64_t r0, int64_t t0) {
  static_assert(R * T <= 8);
  using Block = typename K::Block;
  const Block* w[R];
  const BlockQ8_K* x[T];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + static_cast<size_t>(r0 + r) * a.w_row_bytes);
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a.x) +
                                             static_cast<size_t>(t0 + t) * a.x_row_bytes);
  }
  __m256 acc = _mm256_setzero_ps();
  for (size_t b = 0; b < a.n_cols / kQK; ++b) {
    __m256i sum[8], bias[8];
    for (int i = R * T; i < 8; ++i) sum[i] = bias[i] = _mm256_setzero_si256();
    alignas(16) uint16_t d[8] = {}, dmin[8] = {};
    alignas(32) float xd[8] = {};
    // One row at a time: its T sums stay in registers over the 8 steps.
    for (int r = 0; r < R; ++r) {
      // Decode streams the weights from memory once: fetch the same super-block kPrefetchTiles tiles ahead
      // (rows past the matrix's end are only prefetched, never read).
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(w[r] + b) + kPrefetchTiles * R * a.w_row_bytes;
      for (size_t off = 0; off < sizeof(Block); off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
      }
      RowPrep prep;
      K::prep(w[r][b], prep);
      for (int t = 0; t < T; ++t) sum[r * T + t] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const __m256i u = K::levels(w[r][b], s);
        const __m256i scale = step_scale<K>(prep, s);
        for (int t = 0; t < T; ++t) {
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs + 32 * s));
          sum[r * T + t] = _mm256_add_epi32(sum[r * T + t], _mm256_madd_epi16(K::mul(u, xv), scale));
        }
      }
      for (int t = 0; t < T; ++t) {
        if constexpr (K::kMin || K::kBias) {
          const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].bsums));
          bias[r * T + t] = _mm256_madd_epi16(prep.bsum_weights, bs);
        }
        d[r * T + t] = prep.d;
        dmin[r * T + t] = prep.dmin;
        xd[r * T + t] = x[t][b].d;
      }
    }
    __m256i isum = reduce8_i32(sum);
    if constexpr (K::kBias) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(reduce8_i32(bias), K::kBiasShift));
    const __m256 vxd = _mm256_load_ps(xd);
    const __m256 vd = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d)));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(vd, vxd), _mm256_cvtepi32_ps(isum)));
    if constexpr (K::kMin) {
      const __m256 imin = _mm256_cvtepi32_ps(reduce8_i32(bias));
      const __m256 vdmin = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dmin)));
      acc = _mm256_sub_ps(acc, _mm256_mul_ps(_mm256_mul_ps(vdmin, vxd), imin));
    }
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, acc);
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      a.y[static_cast<size_t>(t0 + t) * a.y_stride + static_cast<size_t>(r0 + r)] = out[r * T + t];
    }
  }
}

// Tokens [t0, t0 + T) for rows [row_begin, row_end): R rows at a time, then single rows.
template <typename K, int R, int T>
void token_tile(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t t0) {
  int64_t r = row_begin;
  for (; r + R <= row_end; r += R) tile<K, R, T>(a, r, t0);
  for (; r < row_end; ++r) tile<K, 1, T>(a, r, t0);
}

template <typename K>
void gemm_k(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  int64_t t = 0;
  for (; t + 8 <= a.n_tokens; t += 8) token_tile<K, 1, 8>(a, row_begin, row_end, t);
  if (t + 4 <= a.n_tokens) token_tile<K, 2, 4>(a, row_begin, row_end, t), t += 4;
  if (t + 2 <= a.n_tokens) token_tile<K, 4, 2>(a, row_begin, row_end, t), t += 2;
  if (t < a.n_tokens) token_tile<K, 8, 1>(a, row_begin, row_end, t);
}

}  // namespace

void gemm_traits(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.type) {
    case gguf::TensorType::Q2_K:
      return gemm_k<Q2K>(a, row_begin, row_end);
    case gguf::TensorType::Q3_K:
      return gemm_k<Q3K>(a, row_begin, row_end);
    case gguf::TensorType::Q4_K:
      return gemm_k<Q4K>(a, row_begin, row_end);
    case gguf::TensorType::Q5_K:
      return gemm_k<Q5K>(a, row_begin, row_end);
    case gguf::TensorType::Q6_K:
      return gemm_k<Q6K>(a, row_begin, row_end);
    case gguf::TensorType::IQ4_XS:
      return gemm_k<IQ4XS>(a, row_begin, row_end);
    case gguf::TensorType::Q4_1:
    case gguf::TensorType::Q5_0:
    case gguf::TensorType::Q5_1:
    case gguf::TensorType::IQ4_NL:
    case gguf::TensorType::MXFP4:
      return gemm_q32(a, row_begin, row_end);
    default:
      return scalar::gemm_traits(a, row_begin, row_end);
  }
}

}  // namespace preface::kernels::avx2
