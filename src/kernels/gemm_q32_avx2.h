// GEMM tiles for the 32-value block types of quant.h (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) against Q8_0 activations, on
// 256-bit registers, over an Isa (Isa::dot(acc, u, s): acc + the sums of 4 products u8 * s8 per int32 lane, exact;
// Isa::kWideU8: u may be any u8, else each int16 pair sum must stay below 2^15). Included by gemm_q32_avx2.cpp
// (AVX2 maddubs + madd) and gemm_q32_avx512.cpp (EVEX vpdpbusd).
//
// A tile is R weight rows x T tokens (R * T <= 8), lane i = output (i / T, i % T). Per block, each row's 32 levels
// are unpacked once and multiplied with the T tokens' activation blocks; the 8 integer sums are reduced together
// into one vector, then the scalar dot's float operations run lane by lane:
//   t = (d_w * d_x) * f32(isum);  if (m_w != 0) t = t + (m_w * d_x) * f32(sum of x);  acc = acc + t
// (quant_dot.cpp block_term, dot_32), in block order. isum is exact int32 whatever the lane order, so every output
// is the bits of the scalar traits dot of its row and token, whatever the tile shape, row range or batch.
//
// Levels as unsigned operands: Q4_1 / Q5_1 are unsigned already; Q5_0 uses the raw 5-bit q (value q - 16) and
// subtracts 16 * sum(x); IQ4_NL and MXFP4 use v + 128 and subtract 128 * sum(x) with a wide-u8 Isa, else |v| against x
// carrying v's sign (|x| <= 127: dot.h's precondition on Q8_0 activations).
//
// Internal linkage (see gemm_tile_avx2.h): include only from files compiled for AVX2 or wider.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "kernels/simd_avx2.h"
#include "util/fp16.h"

namespace preface::kernels::avx2 {
namespace {

// What every tile of one call reads per (block, token), transposed so that a tile's tokens are adjacent:
// dx[b * stride + t] = f32 of activation block b's d (as the scalar dot converts it), sum[b * stride + t] = the sum
// of its 32 values; stride = n_tokens + 8, the padding zero.
struct Q32Acts {
  std::vector<float> dx;
  std::vector<int32_t> sum;
  size_t stride = 0;
};

inline void prepare_acts(const GemmArgs& a, Q32Acts& acts) {
  const size_t n_blocks = a.n_cols / kQuantBlock, n_tokens = static_cast<size_t>(a.n_tokens);
  acts.stride = n_tokens + 8;
  acts.dx.assign(n_blocks * acts.stride, 0.0f);
  acts.sum.assign(n_blocks * acts.stride, 0);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (size_t t = 0; t < n_tokens; ++t) {
    const auto* x = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a.x) + t * a.x_row_bytes);
    for (size_t b = 0; b < n_blocks; ++b) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
      const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
      __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
      h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 1));
      acts.dx[b * acts.stride + t] = f16_to_f32(x[b].d);
      acts.sum[b * acts.stride + t] = _mm_cvtsi128_si32(h);
    }
  }
}

// Byte j = the nibble of value j: low nibbles of qs[0..15] (values 0..15), then high nibbles (16..31).
inline __m256i nibbles_32(const uint8_t* qs) {
  const __m256i packed = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                          _mm256_set1_epi8(0x0f));
}

// Byte j = 16 where bit j of the little-endian 32-bit qh is set, else 0 (the fifth bit of value j).
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof(h));
  // Byte j of `bytes` is byte j / 8 of h (shuffles stay within 128-bit lanes, each holding h four times).
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)),
                                            _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                               0x0303030303030303LL));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(16));
}

// Per type: Block, kMin (an m term), levels(b, Isa) -> the 32 values as the unsigned operand, kSigned (u = |v|,
// levels() returning v for the activations' signs), bias_shift<Isa> (isum = dot(u, x) - 2^shift * sum(x), or -1).
struct Q41 {
  using Block = BlockQ4_1;
  static constexpr bool kMin = true;
  template <typename Isa> static constexpr int kShift = -1;
  template <typename Isa> static constexpr bool kSigned = false;
  template <typename Isa> static __m256i levels(const Block& b) { return nibbles_32(b.qs); }
};

// Q5_0 and Q5_1: the raw 5-bit levels (Q5_0's value is q - 16: kShift 4; Q5_1's is d * q + m).
template <typename B, bool kHasMin, int kBiasShift>
struct Q5 {
  using Block = B;
  static constexpr bool kMin = kHasMin;
  template <typename Isa> static constexpr int kShift = kBiasShift;
  template <typename Isa> static constexpr bool kSigned = false;
  template <typename Isa> static __m256i levels(const Block& b) {
    return _mm256_or_si256(nibbles_32(b.qs), fifth_bits(b.qh));
  }
};
using Q50 = Q5<BlockQ5_0, false, 4>;
using Q51 = Q5<BlockQ5_1, true, -1>;

// IQ4_NL and MXFP4: a 16-entry table of signed levels indexed by the nibbles.
template <typename B, const int8_t* kTable>
struct Lut4 {
  using Block = B;
  static constexpr bool kMin = false;
  template <typename Isa> static constexpr int kShift = Isa::kWideU8 ? 7 : -1;
  template <typename Isa> static constexpr bool kSigned = !Isa::kWideU8;
  // The table's values, or v + 128 (v ^ 0x80) for a wide-u8 Isa.
  template <typename Isa> static __m256i levels(const Block& b) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kTable));
    const __m128i table = Isa::kWideU8 ? _mm_xor_si128(t, _mm_set1_epi8(static_cast<char>(0x80))) : t;
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), nibbles_32(b.qs));
  }
};
using IQ4NL = Lut4<BlockIQ4_NL, kIq4nlValues>;
using MXFP4 = Lut4<BlockMXFP4, kMxfp4Values>;

// A block's scale as the scalar dot takes it: its f16 d (F16C: exact, as f16_to_f32 for every finite value), or
// MXFP4's halved E8M0 exponent.
template <typename Block>
inline float scale_f32(const Block& b) {
  if constexpr (requires { b.e; }) {
    return e8m0_half(b.e);
  } else {
    return _cvtsh_ss(b.d);
  }
}

// The scales of a tile's lanes (lane i: row i / T), zero past R * T.
template <typename Block, int R, int T>
inline __m256 lane_scales(const Block* const* w, size_t b) {
  if constexpr (R == 1) {
    return _mm256_set1_ps(scale_f32(w[0][b]));
  } else if constexpr (requires { w[0][b].e; }) {
    alignas(32) float s[8];
    for (int i = 0; i < 8; ++i) s[i] = i < R * T ? e8m0_half(w[i / T][b].e) : 0.0f;
    return _mm256_load_ps(s);
  } else {
    return _mm256_cvtph_ps(lanes_u16([&](int i) -> uint16_t { return i < R * T ? w[i / T][b].d : 0; }));
  }
}

template <typename Block>
inline uint16_t m_bits(const Block& b) {
  if constexpr (requires { b.m; }) {
    return b.m;
  } else {
    return 0;
  }
}

// Blocks between prefetches of the rows kQ32PrefetchTiles tiles ahead: 2 blocks (<= 48 bytes) < one cache line,
// so every line is fetched.
constexpr size_t kQ32PrefetchTiles = 2;

// Outputs y[t0 + t][r0 + r] for r < R, t < T.
template <typename K, typename Isa, int R, int T>
void q32_tile(const GemmArgs& a, const Q32Acts& acts, int64_t r0, int64_t t0) {
  static_assert(R * T <= 8);
  using Block = typename K::Block;
  constexpr int kShift = K::template kShift<Isa>;
  constexpr bool kSigned = K::template kSigned<Isa>;
  constexpr bool kSums = kShift >= 0 || K::kMin;  // the activation sums enter the result
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const Block* w[R];
  const BlockQ8_0* x[T];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + static_cast<size_t>(r0 + r) * a.w_row_bytes);
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a.x) +
                                             static_cast<size_t>(t0 + t) * a.x_row_bytes);
  }
  const __m256i token_of_lane = _mm256_setr_epi32(0 % T, 1 % T, 2 % T, 3 % T, 4 % T, 5 % T, 6 % T, 7 % T);
  __m256 acc = _mm256_setzero_ps();
  for (size_t b = 0; b < n_blocks; ++b) {
    if (b % 2 == 0) {
      for (int r = 0; r < R; ++r) {
        // Rows past the matrix's end are only prefetched.
        const uintptr_t ahead = reinterpret_cast<uintptr_t>(w[r] + b) + kQ32PrefetchTiles * R * a.w_row_bytes;
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      }
    }
    __m256i sum[8];
    for (int i = R * T; i < 8; ++i) sum[i] = _mm256_setzero_si256();
    for (int r = 0; r < R; ++r) {
      const __m256i v = K::template levels<Isa>(w[r][b]);
      const __m256i u = kSigned ? _mm256_sign_epi8(v, v) : v;
      for (int t = 0; t < T; ++t) {
        __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
        if constexpr (kSigned) xv = _mm256_sign_epi8(xv, v);
        sum[r * T + t] = Isa::dot(_mm256_setzero_si256(), u, xv);
      }
    }
    __m256i isum = reduce8_i32(sum);
    const size_t at = b * acts.stride + static_cast<size_t>(t0);
    const __m256 vdx = T == 1 ? _mm256_broadcast_ss(&acts.dx[at])
                              : _mm256_permutevar8x32_ps(_mm256_loadu_ps(&acts.dx[at]), token_of_lane);
    __m256i xsum = _mm256_setzero_si256();
    if constexpr (kSums) {
      xsum = T == 1 ? _mm256_set1_epi32(acts.sum[at])
                    : _mm256_permutevar8x32_epi32(
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&acts.sum[at])), token_of_lane);
    }
    if constexpr (kShift >= 0) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(xsum, kShift));
    const __m256 vd = lane_scales<Block, R, T>(w, b);
    __m256 term = _mm256_mul_ps(_mm256_mul_ps(vd, vdx), _mm256_cvtepi32_ps(isum));
    if constexpr (K::kMin) {
      const __m256 vm = R == 1 ? _mm256_set1_ps(_cvtsh_ss(m_bits(w[0][b])))
                               : _mm256_cvtph_ps(lanes_u16([&](int i) -> uint16_t {
                                   return i < R * T ? m_bits(w[i / T][b]) : 0;
                                 }));
      const __m256 with_m = _mm256_add_ps(term, _mm256_mul_ps(_mm256_mul_ps(vm, vdx), _mm256_cvtepi32_ps(xsum)));
      // The scalar dot adds the m term only where m != 0 (NaN included): unordered or not equal.
      term = _mm256_blendv_ps(term, with_m, _mm256_cmp_ps(vm, _mm256_setzero_ps(), _CMP_NEQ_UQ));
    }
    acc = _mm256_add_ps(acc, term);
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
template <typename K, typename Isa, int R, int T>
void q32_token_tile(const GemmArgs& a, const Q32Acts& acts, int64_t row_begin, int64_t row_end, int64_t t0) {
  int64_t r = row_begin;
  for (; r + R <= row_end; r += R) q32_tile<K, Isa, R, T>(a, acts, r, t0);
  for (; r < row_end; ++r) q32_tile<K, Isa, 1, T>(a, acts, r, t0);
}

template <typename K, typename Isa>
void gemm_q32_type(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  thread_local Q32Acts acts;  // one per thread: grows to the largest call, reused
  prepare_acts(a, acts);
  int64_t t = 0;
  for (; t + 8 <= a.n_tokens; t += 8) q32_token_tile<K, Isa, 1, 8>(a, acts, row_begin, row_end, t);
  if (t + 4 <= a.n_tokens) q32_token_tile<K, Isa, 2, 4>(a, acts, row_begin, row_end, t), t += 4;
  if (t + 2 <= a.n_tokens) q32_token_tile<K, Isa, 4, 2>(a, acts, row_begin, row_end, t), t += 2;
  if (t < a.n_tokens) q32_token_tile<K, Isa, 8, 1>(a, acts, row_begin, row_end, t);
}

// Q4_1, Q5_0, Q5_1, IQ4_NL or MXFP4 (a.type); false for any other type.
template <typename Isa>
bool gemm_q32_tiles(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.type) {
    case gguf::TensorType::Q4_1: gemm_q32_type<Q41, Isa>(a, row_begin, row_end); return true;
    case gguf::TensorType::Q5_0: gemm_q32_type<Q50, Isa>(a, row_begin, row_end); return true;
    case gguf::TensorType::Q5_1: gemm_q32_type<Q51, Isa>(a, row_begin, row_end); return true;
    case gguf::TensorType::IQ4_NL: gemm_q32_type<IQ4NL, Isa>(a, row_begin, row_end); return true;
    case gguf::TensorType::MXFP4: gemm_q32_type<MXFP4, Isa>(a, row_begin, row_end); return true;
    default: return false;
  }
}

}  // namespace
}  // namespace preface::kernels::avx2
