// AVX-512 GEMM tiles for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS weights with Q8_K activations: gemm_k_avx2.cpp's
// tiles with 64-value steps. A super-block is 4 steps; step p covers values 64p..64p+63 of the row and of each
// token's activations (Q4_K/Q5_K/IQ4_XS: groups 2p and 2p + 1; Q6_K: AVX2 steps 2p and 2p + 1). Per step, one row's
// levels are unpacked once into a 64-byte register, then per token: vpmaddubsw (levels x activations, pairs in
// int16) and vpdpwssd (x the step's int16 scales, summed into int32 lanes).
//
// Exactness: per output and super-block the integer sum (sum over groups of scale * sum(q * x), and the min or
// level-bias term from the activations' bsums) is exact int32 (no product pair exceeds int16: 2 * 63 * 127), so
// it equals the scalar unpacked sum whatever the lane order; the float operations that follow are the AVX2
// tiles' (and the scalar dot's) lane by lane in super-block order. So every output is the bits of the scalar
// traits dot of its row and token, whatever the tile shape, row range or batch.
//
// Only called where avx512::quant_available() (AVX-512 F/BW/VL/DQ, VNNI, VBMI). Standard headers come before the
// target pragma; this file defines only internal-linkage code besides avx512::gemm_traits.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "kernels/repack.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/lanes_avx512.h"  // after the target pragma: their inline code is compiled for AVX-512 here
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx512 {

namespace {

// Lane i of the result = the (exact, wrapping) sum of the 16 lanes of v[i].
inline __m256i reduce8(const __m512i* v) {
  __m256i h[8];
  for (int i = 0; i < 8; ++i) {
    h[i] = _mm256_add_epi32(_mm512_castsi512_si256(v[i]), _mm512_extracti64x4_epi64(v[i], 1));
  }
  return avx2::reduce8_i32(h);
}

// What a row contributes to a super-block, prepared once per (row, super-block): the int16 scales of each step
// (32 words: one per pair of values) and, for types with a min or a level bias, the 16 int16 lanes that multiply
// the activations' bsums (the mins per 16 values for Q2_K/Q4_K/Q5_K, the 16 scales for Q3_K's and Q6_K's bias).
// The f16 scales d and dmin are read from the blocks by the epilogue, 8 at a time (F16C: exact, as f16_to_f32 for
// every finite value).
struct RowPrep {
  __m512i scale[4];
  __m256i bsum_weights;
};

// Q4_K / Q5_K / IQ4_XS: step p is groups 2p (words 0..15) and 2p + 1 (words 16..31), one scale each; `sc` holds
// the 8 group scales in words 0..7.
alignas(64) constexpr int16_t kGroupScaleIndex[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7},
};
inline void group_scales(__m128i sc, RowPrep& p) {
  const __m512i all = _mm512_castsi128_si512(sc);
  for (int s = 0; s < 4; ++s) p.scale[s] = _mm512_permutexvar_epi16(_mm512_load_si512(kGroupScaleIndex[s]), all);
}

// The 6-bit scales and mins of Q4_K/Q5_K (ggml's scale_min_k4 layout: scales 0..3 and mins 0..3 in the low 6
// bits of bytes 0..7, scales and mins 4..7 split between bytes 8..11 and the top 2 bits of bytes 0..7).
template <typename Block>
void prep_k4(const Block& b, RowPrep& p) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, b.scales, sizeof(u));
  const uint32_t sc[2] = {u[0] & kLow6, (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4)};
  const uint32_t mn[2] = {u[1] & kLow6, ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4)};
  group_scales(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(sc[1]), static_cast<int>(sc[0]))), p);
  // Each min twice: the activations' bsums are per 16 values, two per group.
  const __m128i mins = _mm_set_epi32(0, 0, static_cast<int>(mn[1]), static_cast<int>(mn[0]));
  p.bsum_weights = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins, mins));
}

// Shift counts per 16-bit word: `lo` in words 0..15, `hi` in 16..31.
inline __m512i shifts(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<int16_t>(lo))),
                            _mm256_set1_epi16(static_cast<int16_t>(hi)), 1);
}

// Q4_K / Q5_K groups 2p and 2p + 1: the low and the high nibbles of qs[32p..32p+31].
inline __m512i nibbles(const uint8_t* qs, int p) {
  const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * p)));
  return _mm512_and_si512(_mm512_srlv_epi16(q, shifts(0, 4)), _mm512_set1_epi8(0xF));
}

struct Q4K {
  using Block = BlockQ4_K;
  static constexpr bool kMin = true, kBias = false;
  static void prep(const Block& b, RowPrep& p) { prep_k4(b, p); }
  static __m512i levels(const Block& b, int p) { return nibbles(b.qs, p); }
  // maddubs: pairs of (0..31) * int8, at most 2 * 31 * 127 in magnitude: no saturation (also Q5_K).
  static __m512i mul(__m512i u, __m512i x) { return _mm512_maddubs_epi16(u, x); }
};

struct Q5K {
  using Block = BlockQ5_K;
  static constexpr bool kMin = true, kBias = false;
  static void prep(const Block& b, RowPrep& p) { prep_k4(b, p); }
  static __m512i levels(const Block& b, int p) {
    // Bit g of qh[l] is the fifth bit of value l of group g.
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    const __m512i h = _mm512_and_si512(_mm512_srlv_epi16(qh, shifts(2 * p, 2 * p + 1)), _mm512_set1_epi8(1));
    return _mm512_or_si512(nibbles(b.qs, p), _mm512_slli_epi16(h, 4));
  }
  static __m512i mul(__m512i u, __m512i x) { return _mm512_maddubs_epi16(u, x); }
};

// Scales per 16 values (Q2_K, Q3_K, Q6_K): word w of step p's scales is scale 4p + w / 8 (128-bit lane j of step
// p has scale 4p + j); `all` holds the 16 scales in words 0..15.
alignas(64) constexpr int16_t kPairScaleIndex[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13,
     14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15},
};
inline void pair_scales(__m256i sc16, RowPrep& p) {
  const __m512i all = _mm512_castsi256_si512(sc16);
  for (int s = 0; s < 4; ++s) p.scale[s] = _mm512_permutexvar_epi16(_mm512_load_si512(kPairScaleIndex[s]), all);
}

// Q2_K: step p covers values 64p..64p+63, i.e. 2-bit fields s0 = 2 (p % 2) and s0 + 1 of qs[32h..32h+31]
// (h = p / 2); 4-bit scale and min per 16 values.
struct Q2K {
  using Block = BlockQ2_K;
  static constexpr bool kMin = true, kBias = false;
  static void prep(const Block& b, RowPrep& p) {
    const __m256i packed = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    pair_scales(_mm256_and_si256(packed, _mm256_set1_epi16(0xF)), p);
    p.bsum_weights = _mm256_srli_epi16(packed, 4);
  }
  static __m512i fields2(const uint8_t* qs, int p) {
    const int s0 = 2 * (p % 2);
    const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (p / 2))));
    return _mm512_and_si512(_mm512_srlv_epi16(q, shifts(2 * s0, 2 * s0 + 2)), _mm512_set1_epi8(3));
  }
  static __m512i levels(const Block& b, int p) { return fields2(b.qs, p); }
  // maddubs: pairs of (0..7) * int8: no saturation (also Q3_K).
  static __m512i mul(__m512i u, __m512i x) { return _mm512_maddubs_epi16(u, x); }
};

// Q3_K: Q2_K's fields plus bit 4h + s of hmask[i] as the third bit; the unsigned levels u = q + 4 are used and
// 4 * sum(scale * bsum) is subtracted (kBias). 6-bit signed scales per 16 values (q3_k_scales' layout).
struct Q3K {
  using Block = BlockQ3_K;
  static constexpr bool kMin = false, kBias = true;
  static constexpr int kBiasShift = 2;
  static void prep(const Block& b, RowPrep& p) {
    // Scale i: low nibble packed[i] (i < 8) or packed[i - 8] >> 4, high bits (packed[8 + i % 4] >> 2 (i / 4)) & 3.
    uint64_t l;
    uint32_t h;
    std::memcpy(&l, b.scales, sizeof(l));
    std::memcpy(&h, b.scales + 8, sizeof(h));
    const __m128i low = _mm_set_epi64x(static_cast<long long>((l >> 4) & 0x0F0F0F0F0F0F0F0FULL),
                                       static_cast<long long>(l & 0x0F0F0F0F0F0F0F0FULL));
    const __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(h)), _mm_setr_epi32(0, 2, 4, 6)),
                                       _mm_set1_epi8(3));
    const __m128i sc8 = _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
    p.bsum_weights = _mm256_cvtepi8_epi16(sc8);
    pair_scales(p.bsum_weights, p);
  }
  static __m512i levels(const Block& b, int p) {
    const int h = p / 2, s0 = 2 * (p % 2);
    const __m512i m = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
    const __m512i hbit = _mm512_and_si512(_mm512_srlv_epi16(m, shifts(4 * h + s0, 4 * h + s0 + 1)),
                                          _mm512_set1_epi8(1));
    return _mm512_or_si512(Q2K::fields2(b.qs, p), _mm512_slli_epi16(hbit, 2));
  }
  static __m512i mul(__m512i u, __m512i x) { return _mm512_maddubs_epi16(u, x); }
};

// Q6_K: step p = AVX2 steps 2p and 2p + 1 (h = p / 2, k = 2 (p % 2) and k + 1), 16 values per scale. The unsigned
// levels u = q + 32 are used and 32 * sum(scale * bsum) is subtracted (kBias).
struct Q6K {
  using Block = BlockQ6_K;
  static constexpr bool kMin = false, kBias = true;
  static constexpr int kBiasShift = 5;
  static void prep(const Block& b, RowPrep& p) {
    p.bsum_weights = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    pair_scales(p.bsum_weights, p);
  }
  static __m512i levels(const Block& b, int p) {
    const int h = p / 2, k = 2 * (p % 2);
    const __m512i l = _mm512_loadu_si512(b.ql + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
    const __m512i lo = _mm512_and_si512(k == 0 ? l : _mm512_srli_epi16(l, 4), _mm512_set1_epi8(0xF));
    const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, shifts(2 * k, 2 * k + 2)), _mm512_set1_epi8(3));
    return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
  }
  // maddubs: pairs of (0..63) * int8, at most 2 * 63 * 127 in magnitude: no saturation.
  static __m512i mul(__m512i u, __m512i x) { return _mm512_maddubs_epi16(u, x); }
};

// IQ4_XS: step p is groups 2p and 2p + 1; levels are the signed table values (never 0).
struct IQ4XS {
  using Block = BlockIQ4_XS;
  static constexpr bool kMin = false, kBias = false;
  static void prep(const Block& b, RowPrep& p) {
    group_scales(iq4xs_scales16(b), p);
  }
  static __m512i levels(const Block& b, int p) {
    // Group g's 32 values: the low nibbles of its 16 bytes, then the high nibbles. 128-bit lanes: group 2p's
    // bytes twice, then group 2p + 1's twice; the second of each pair shifted down by 4.
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
    const __m512i qq = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), _mm512_castsi256_si512(q));
    const __m512i by4 = _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                         0x0004000400040004LL, 0x0004000400040004LL, 0, 0);
    const __m512i n = _mm512_and_si512(_mm512_srlv_epi16(qq, by4), _mm512_set1_epi8(0xF));
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    return _mm512_shuffle_epi8(table, n);
  }
  // Signed x signed through maddubs: |v| * (x negated where v < 0); |v|, |x| <= 127, so pairs stay below 2^15.
  static __m512i mul(__m512i v, __m512i x) {
    const __m512i x_signed = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(v), _mm512_setzero_si512(), x);
    return _mm512_maddubs_epi16(_mm512_abs_epi8(v), x_signed);
  }
};

// Eight float lanes, lane i = f(i) for i < N, 0 after.
template <int N, typename F>
inline __m256 lanes_f32(F f) {
  const auto at = [&](int i) { return i < N ? f(i) : 0.0f; };
  return _mm256_setr_ps(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
}

constexpr size_t kPrefetchTiles = 2;

// Outputs y[t0 + t][r0 + r] for r < R, t < T.
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
    constexpr bool kBsums = K::kMin || K::kBias;  // the activations' bsums enter the sum
    __m512i sum[8];
    __m256i bias[8];
    for (int i = R * T; i < 8; ++i) sum[i] = _mm512_setzero_si512(), bias[i] = _mm256_setzero_si256();
    for (int r = 0; r < R; ++r) {
      // Fetch the same super-block kPrefetchTiles tiles ahead (rows past the matrix's end are only prefetched).
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(w[r] + b) + kPrefetchTiles * R * a.w_row_bytes;
      for (size_t off = 0; off < sizeof(Block); off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
      }
      RowPrep prep;
      K::prep(w[r][b], prep);
      for (int t = 0; t < T; ++t) sum[r * T + t] = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const __m512i u = K::levels(w[r][b], p);
        for (int t = 0; t < T; ++t) {
          const __m512i xv = _mm512_loadu_si512(x[t][b].qs + 64 * p);
          sum[r * T + t] = _mm512_dpwssd_epi32(sum[r * T + t], K::mul(u, xv), prep.scale[p]);
        }
      }
      if constexpr (kBsums) {
        for (int t = 0; t < T; ++t) {
          const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].bsums));
          bias[r * T + t] = _mm256_madd_epi16(prep.bsum_weights, bs);
        }
      }
    }
    __m256i isum = reduce8(sum);
    __m256i ibias = _mm256_setzero_si256();
    if constexpr (kBsums) ibias = avx2::reduce8_i32(bias);
    if constexpr (K::kBias) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(ibias, K::kBiasShift));
    // Lane i = r * T + t: the row's f16 scales and the token's activation scale, gathered in registers (eight
    // scalar stores read back as one vector would stall store forwarding every super-block).
    const auto row_d = [&](int i) -> uint16_t { return i < R * T ? w[i / T][b].d : 0; };
    const __m256 vxd = T == 1 ? _mm256_set1_ps(x[0][b].d) : lanes_f32<R * T>([&](int i) { return x[i % T][b].d; });
    const __m256 vd = _mm256_cvtph_ps(avx2::lanes_u16(row_d));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(vd, vxd), _mm256_cvtepi32_ps(isum)));
    if constexpr (K::kMin) {
      const __m256 imin = _mm256_cvtepi32_ps(ibias);
      const __m256 vdmin =
          _mm256_cvtph_ps(avx2::lanes_u16([&](int i) -> uint16_t { return i < R * T ? w[i / T][b].dmin : 0; }));
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
  if (a.row_groups) return split_row_groups(a, row_begin, row_end, gemm_k_groups, gemm_traits);
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
      if (gemm_iq4xs_lanes(a, row_begin, row_end)) return;
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

}  // namespace preface::kernels::avx512
