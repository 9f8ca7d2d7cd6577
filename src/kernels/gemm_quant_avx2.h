// AVX2 GEMM tiles for quantized weights (Q8_0, Q4_0) against Q8_0 activations, shared by the *_avx2.cpp GEMM
// files. Per output, with isum[b] the exact integer dot product of block b (|isum| <= 32 * 128 * 127 < 2^24, so
// f32(isum) is exact) and s[b] = f32(d_w[b]) * f32(d_x[b]):
//   acc (4 f32 lanes) = 0;  per group of blocks 4g..4g+3 in order:  acc[k] = fma(f32(isum[4g+k]), s[4g+k], acc[k])
//   sum = (acc[0] + acc[2]) + (acc[1] + acc[3])
//   per remaining block b (n_blocks % 4 of them) in order:  sum = fma(f32(isum[b]), s[b], sum)
// amx::gemm follows the same arithmetic, and the AVX2 row dots are 1 x 1 tiles.
//
// isum[b] may be formed in any exact way (kBiasShift): Q4_0 dots the raw nibbles with x and subtracts
// 8 * sum(x block), the sums shared by all rows (GemmArgs::x_sums); with VNNI, Q8_0 does the same with w ^ 0x80
// and 128; AVX2 Q8_0 uses |w| and x * sign(w).
// A tile is one weight row x T tokens: the row's u operands for 4 blocks are formed once and kept in registers
// for the T tokens; two tokens' 4 block sums come out of one reduction tree as [token 0 | token 1] lanes. Decode
// (one token) uses 2 rows x 1 token tiles, [row 0 | row 1] lanes, the same way.
// Internal linkage (see gemm_tile_avx2.h). Include only from *_avx2.cpp files.
#pragma once
#include <type_traits>

#include "kernels/gemm_tile_avx2.h"

namespace preface::kernels::avx2 {
namespace {

// Isa::dot(acc, u, s) = acc + (lane j: the sum of the 4 products u8 * s8 in bytes 4j..4j+3), exact.
// kWideU8: u may be any u8 (0..255) against |s| <= 127; otherwise callers keep each i16 pair sum below 2^15.
struct MaddIsa {  // AVX2: maddubs then madd
  static constexpr bool kWideU8 = false;
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
};

// How a weight block's int8 values w enter the unsigned operand u of Isa::dot, as log2 of a bias:
//   kBiasShift < 0:  u = |w| and the activations carry w's sign (exact: |x| <= 127, dot.h's precondition);
//   kBiasShift >= 0: u = w + 2^kBiasShift (Q4_0: the raw nibble, bias 8; Q8_0 with kWideU8: w ^ 0x80, bias 128)
//                    and isum = dot(u, x) - 2^kBiasShift * sum(x), so the block sums of x are subtracted.
// Every form yields the same exact integer isum.
template <typename Block, typename Isa>
constexpr int kBiasShift = std::is_same_v<Block, BlockQ4_0> ? 3 : (Isa::kWideU8 ? 7 : -1);

// The u operands of 4 consecutive blocks (in registers) and, for kBiasShift < 0, their signed values (memory).
struct Group4 {
  __m256i u[4];
  const int8_t* w[4];  // [32] each; only for kBiasShift < 0
};

template <typename Isa>
inline void load_group(const BlockQ8_0* b, Group4& g) {
  for (int k = 0; k < 4; ++k) {
    const __m256i q = load_32(b[k].qs);
    if constexpr (kBiasShift<BlockQ8_0, Isa> < 0) {
      g.u[k] = _mm256_sign_epi8(q, q);
      g.w[k] = b[k].qs;
    } else {
      g.u[k] = _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
    }
  }
}

// Q4_0: byte j of a block holds value j (low nibble) and value j + 16 (high), each nibble - 8. Returns the raw
// nibbles 0..15 (value + 8).
inline __m256i nibbles_q4(const BlockQ4_0& b) {
  // Both halves load the packed bytes (a broadcast load needs no shuffle port); the high half is shifted right
  // by 4 within 32-bit lanes, and the mask drops the bits that shift in from the next byte.
  const __m256i packed = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
  return _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                          _mm256_set1_epi8(0x0f));
}

template <typename Isa>
inline void load_group(const BlockQ4_0* b, Group4& g) {
  for (int k = 0; k < 4; ++k) g.u[k] = nibbles_q4(b[k]);
}

// Lane j = exact sum of products 4j..4j+3 of w and x, from u and x's operand (see kBiasShift); a bias term is
// subtracted here lane by lane (|2^shift * x| pair sums <= 2 * 128 * 127 < 2^15). The biased forms use this
// only without x_sums / x_pairs (the row dots); otherwise they run paired (pair_partials).
template <typename Isa, int Shift>
inline __m256i lanes(const Group4& g, int k, const BlockQ8_0& x) {
  const __m256i xv = load_32(x.qs);
  if constexpr (Shift < 0) {
    return Isa::dot(_mm256_setzero_si256(), g.u[k], _mm256_sign_epi8(xv, load_32(g.w[k])));
  } else {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(1 << Shift));
    return _mm256_sub_epi32(Isa::dot(_mm256_setzero_si256(), g.u[k], xv),
                            Isa::dot(_mm256_setzero_si256(), bias, xv));
  }
}

// Halves of the block sums of one token: [s0 s1 s2 s3 | s0 s1 s2 s3] partial (lanes 0-3 | lanes 4-7).
template <typename Isa, int Shift>
inline __m256i half_sums(const Group4& g, const BlockQ8_0* x) {
  const __m256i p0 = lanes<Isa, Shift>(g, 0, x[0]);
  const __m256i p1 = lanes<Isa, Shift>(g, 1, x[1]);
  const __m256i p2 = lanes<Isa, Shift>(g, 2, x[2]);
  const __m256i p3 = lanes<Isa, Shift>(g, 3, x[3]);
  // Adjacent lane pairs by 64-bit shifts and blends (no shuffle port): per 128-bit half [A0 B0 A1 B1], A0 = p0's
  // lanes 0 + 1, A1 = lanes 2 + 3, B likewise for p1; then one 64-bit unpack level. Integer sums: exact.
  const __m256i ab = _mm256_blend_epi32(_mm256_add_epi32(p0, _mm256_srli_epi64(p0, 32)),
                                        _mm256_add_epi32(p1, _mm256_slli_epi64(p1, 32)), 0xaa);
  const __m256i cd = _mm256_blend_epi32(_mm256_add_epi32(p2, _mm256_srli_epi64(p2, 32)),
                                        _mm256_add_epi32(p3, _mm256_slli_epi64(p3, 32)), 0xaa);
  return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

// The 4 block sums of one token, and of two tokens as [token 0 | token 1].
template <typename Isa, int Shift>
inline __m128i block_sums(const Group4& g, const BlockQ8_0* x) {
  const __m256i h = half_sums<Isa, Shift>(g, x);
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
template <typename Isa, int Shift>
inline __m256i block_sums2(const Group4& g, const BlockQ8_0* x0, const BlockQ8_0* x1) {
  const __m256i h0 = half_sums<Isa, Shift>(g, x0), h1 = half_sums<Isa, Shift>(g, x1);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}

// Biased forms (kBiasShift >= 0) against paired activations (GemmArgs::x_pairs): the u values of blocks k, k + 1
// (k even) as two registers, lo = [u_k 0..15 | u_k+1 0..15] (Q4_0: the low nibbles of [packed k | packed k + 1])
// meeting [x_k 0..15 | x_k+1 0..15], and hi = values 16..31 likewise, so each block's products land in 4 lanes
// instead of 8.
struct PairGroup4 {
  __m256i lo[2], hi[2];  // pair i: blocks 2i, 2i + 1
};

template <typename Isa>
inline void load_pairs(const BlockQ8_0* b, PairGroup4& g) {
  static_assert(kBiasShift<BlockQ8_0, Isa> == 7);
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int i = 0; i < 2; ++i) {
    const auto* q0 = reinterpret_cast<const __m128i*>(b[2 * i].qs);
    const auto* q1 = reinterpret_cast<const __m128i*>(b[2 * i + 1].qs);
    g.lo[i] = _mm256_xor_si256(_mm256_loadu2_m128i(q1, q0), bias);
    g.hi[i] = _mm256_xor_si256(_mm256_loadu2_m128i(q1 + 1, q0 + 1), bias);
  }
}

template <typename Isa>
inline void load_pairs(const BlockQ4_0* b, PairGroup4& g) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int i = 0; i < 2; ++i) {
    const __m256i v = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b[2 * i + 1].qs),
                                          reinterpret_cast<const __m128i*>(b[2 * i].qs));
    g.lo[i] = _mm256_and_si256(v, mask);
    g.hi[i] = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
  }
}

// xp: paired activations of 4 blocks (128 bytes). Returns [k0 k0 k2 k2 | k1 k1 k3 k3]: two partial sums of each
// block k (before the bias term).
template <typename Isa>
inline __m256i pair_partials(const PairGroup4& g, const int8_t* xp) {
  const __m256i z = _mm256_setzero_si256();
  const __m256i p01 = Isa::dot(Isa::dot(z, g.lo[0], load_32(xp)), g.hi[0], load_32(xp + 32));
  const __m256i p23 = Isa::dot(Isa::dot(z, g.lo[1], load_32(xp + 64)), g.hi[1], load_32(xp + 96));
  return _mm256_hadd_epi32(p01, p23);
}

// The 4 block sums of a and of b (pair_partials of two tokens or two rows) as [a | b].
inline __m256i pair_sums2(__m256i a, __m256i b) {
  return _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(a, b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// f32 of the d of 4 consecutive blocks.
template <typename Block>
inline __m128 scales4(const Block* b) {
  // Packed with scalar shifts (one vector move) rather than word inserts, which use the shuffle port.
  const uint64_t h = static_cast<uint64_t>(b[0].d) | static_cast<uint64_t>(b[1].d) << 16 |
                     static_cast<uint64_t>(b[2].d) << 32 | static_cast<uint64_t>(b[3].d) << 48;
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)));
}

// (a0 + a2) + (a1 + a3).
inline float reduce4(__m128 a) {
  const __m128 s = _mm_add_ps(a, _mm_movehl_ps(a, a));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// The exact integer dot product of one weight block and one activation block (sign form: no block sums needed).
template <typename Isa>
inline int32_t block_isum(const __m256i w, const BlockQ8_0& x) {
  const __m256i p = Isa::dot(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(load_32(x.qs), w));
  return hsum_i32(p);
}
template <typename Isa>
inline int32_t block_isum(const BlockQ8_0& w, const BlockQ8_0& x) {
  return block_isum<Isa>(load_32(w.qs), x);
}
template <typename Isa>
inline int32_t block_isum(const BlockQ4_0& w, const BlockQ8_0& x) {
  return block_isum<Isa>(_mm256_sub_epi8(nibbles_q4(w), _mm256_set1_epi8(8)), x);
}

// y[t * y_stride] for one weight row w (Block[n_blocks]) and T activation rows at x (x_stride blocks apart).
// x_scales: f32 of each activation block's d, laid out like x; nullptr = convert d here. kXSums: x_sums (each
// activation block's sum of values, laid out like x) and x_pairs (GemmArgs::x_pairs, 32 values per block of x)
// are given, and the biased forms run paired; otherwise both are unused. prefetch: nullptr, or a row to pull
// into cache meanwhile.
template <typename Block, typename Isa, bool kXSums, int T>
void quant_tile(const uint8_t* w, const BlockQ8_0* x, const float* x_scales, const int32_t* x_sums,
                const int8_t* x_pairs, size_t x_stride, size_t n_blocks, float* y, size_t y_stride,
                const uint8_t* prefetch) {
  constexpr int kShift = kBiasShift<Block, Isa>;
  constexpr bool kPaired = kXSums && kShift >= 0;  // paired, and the bias term subtracted via x_sums
  const auto xp = [&](int t, size_t b) { return x_pairs + (static_cast<size_t>(t) * x_stride + b) * kQuantBlock; };
  constexpr int kPairs = T / 2;
  const auto* wr = reinterpret_cast<const Block*>(w);
  const auto dx4 = [&](int t, size_t b) {  // f32 d of activation blocks b..b+3 of token t
    const size_t at = static_cast<size_t>(t) * x_stride + b;
    return x_scales != nullptr ? _mm_loadu_ps(x_scales + at) : scales4(x + at);
  };
  const auto bias4 = [&](int t, size_t b) {  // 2^kShift * (sums of activation blocks b..b+3 of token t)
    const auto* at = reinterpret_cast<const __m128i*>(x_sums + static_cast<size_t>(t) * x_stride + b);
    return _mm_slli_epi32(_mm_loadu_si128(at), kShift > 0 ? kShift : 0);
  };
  __m256 acc2[kPairs > 0 ? kPairs : 1];  // [token 2p lanes | token 2p + 1 lanes]
  for (__m256& a : acc2) a = _mm256_setzero_ps();
  __m128 acc1 = _mm_setzero_ps();  // the last token when T is odd
  Group4 g;
  PairGroup4 pg;
  const size_t n_full = n_blocks / 4 * 4;
  for (size_t b = 0; b < n_full; b += 4) {
    if (prefetch != nullptr) {
      for (size_t off = 0; off < 4 * sizeof(Block); off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + b * sizeof(Block) + off), _MM_HINT_T0);
      }
    }
    if constexpr (kPaired) {
      load_pairs<Isa>(wr + b, pg);
    } else {
      load_group<Isa>(wr + b, g);
    }
    const __m128 dw = scales4(wr + b);
    const __m256 dw2 = _mm256_set_m128(dw, dw);
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p) {
      const BlockQ8_0* x0 = x + static_cast<size_t>(2 * p) * x_stride + b;
      __m256i isum;
      if constexpr (kPaired) {
        isum = pair_sums2(pair_partials<Isa>(pg, xp(2 * p, b)), pair_partials<Isa>(pg, xp(2 * p + 1, b)));
      } else {
        isum = block_sums2<Isa, kShift>(g, x0, x0 + x_stride);
      }
      if constexpr (kPaired) {
        isum = _mm256_sub_epi32(isum, _mm256_set_m128i(bias4(2 * p + 1, b), bias4(2 * p, b)));
      }
      const __m256 scale = _mm256_mul_ps(dw2, _mm256_set_m128(dx4(2 * p + 1, b), dx4(2 * p, b)));
      acc2[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc2[p]);
    }
    if constexpr (T % 2 == 1) {
      __m128i isum;
      if constexpr (kPaired) {
        const __m256i t = pair_partials<Isa>(pg, xp(T - 1, b));
        isum = _mm256_castsi256_si128(pair_sums2(t, t));
      } else {
        isum = block_sums<Isa, kShift>(g, x + static_cast<size_t>(T - 1) * x_stride + b);
      }
      if constexpr (kPaired) isum = _mm_sub_epi32(isum, bias4(T - 1, b));
      acc1 = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(dw, dx4(T - 1, b)), acc1);
    }
  }
  float sum[T];
  for (int p = 0; p < kPairs; ++p) {
    sum[2 * p] = reduce4(_mm256_castps256_ps128(acc2[p]));
    sum[2 * p + 1] = reduce4(_mm256_extractf128_ps(acc2[p], 1));
  }
  if constexpr (T % 2 == 1) sum[T - 1] = reduce4(acc1);
  for (size_t b = n_full; b < n_blocks; ++b) {
    const float dw = half_to_float(wr[b].d);
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& xb = x[static_cast<size_t>(t) * x_stride + b];
      const float dx = x_scales != nullptr ? x_scales[static_cast<size_t>(t) * x_stride + b] : half_to_float(xb.d);
      sum[t] = __builtin_fmaf(static_cast<float>(block_isum<Isa>(wr[b], xb)), dw * dx, sum[t]);
    }
  }
  for (int t = 0; t < T; ++t) y[static_cast<size_t>(t) * y_stride] = sum[t];
}

// Two weight rows (w, w + w_row_bytes) x one token, for decode: one set of activation loads and one
// conversion / fma per 4 blocks serve both rows, as [row 0 lanes | row 1 lanes]. Each row's arithmetic is
// quant_tile's. y[0], y[1]: the two outputs. prefetch: nullptr, or the first of two rows to pull in.
template <typename Block, typename Isa, bool kXSums>
void quant_tile_2rows(const uint8_t* w, size_t w_row_bytes, const BlockQ8_0* x, const float* x_scales,
                      const int32_t* x_sums, const int8_t* x_pairs, size_t n_blocks, float* y,
                      const uint8_t* prefetch) {
  constexpr int kShift = kBiasShift<Block, Isa>;
  constexpr bool kPaired = kXSums && kShift >= 0;  // paired, and the bias term subtracted via x_sums
  const auto* w0 = reinterpret_cast<const Block*>(w);
  const auto* w1 = reinterpret_cast<const Block*>(w + w_row_bytes);
  __m256 acc = _mm256_setzero_ps();  // [row 0 | row 1]
  Group4 g0, g1;
  const size_t n_full = n_blocks / 4 * 4;
  for (size_t b = 0; b < n_full; b += 4) {
    if (prefetch != nullptr) {
      for (size_t off = 0; off < 4 * sizeof(Block); off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + b * sizeof(Block) + off), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + w_row_bytes + b * sizeof(Block) + off), _MM_HINT_T0);
      }
    }
    __m256i isum;
    if constexpr (kPaired) {
      PairGroup4 p0, p1;
      load_pairs<Isa>(w0 + b, p0);
      load_pairs<Isa>(w1 + b, p1);
      const int8_t* xp = x_pairs + b * kQuantBlock;
      isum = pair_sums2(pair_partials<Isa>(p0, xp), pair_partials<Isa>(p1, xp));
    } else {
      load_group<Isa>(w0 + b, g0);
      load_group<Isa>(w1 + b, g1);
      const __m256i h0 = half_sums<Isa, kShift>(g0, x + b), h1 = half_sums<Isa, kShift>(g1, x + b);
      isum = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
    }
    if constexpr (kPaired) {
      const __m128i bias = _mm_slli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x_sums + b)), kShift);
      isum = _mm256_sub_epi32(isum, _mm256_set_m128i(bias, bias));
    }
    const __m128 dx = x_scales != nullptr ? _mm_loadu_ps(x_scales + b) : scales4(x + b);
    const __m256 scale = _mm256_mul_ps(_mm256_set_m128(scales4(w1 + b), scales4(w0 + b)), _mm256_set_m128(dx, dx));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
  }
  float sum[2] = {reduce4(_mm256_castps256_ps128(acc)), reduce4(_mm256_extractf128_ps(acc, 1))};
  for (size_t b = n_full; b < n_blocks; ++b) {
    const float dx = x_scales != nullptr ? x_scales[b] : half_to_float(x[b].d);
    sum[0] = __builtin_fmaf(static_cast<float>(block_isum<Isa>(w0[b], x[b])), half_to_float(w0[b].d) * dx, sum[0]);
    sum[1] = __builtin_fmaf(static_cast<float>(block_isum<Isa>(w1[b], x[b])), half_to_float(w1[b].d) * dx, sum[1]);
  }
  y[0] = sum[0];
  y[1] = sum[1];
}

constexpr int kQuantT = 6;  // tokens per quantized tile (one weight row)

using QuantTileFn = void (*)(const uint8_t*, const BlockQ8_0*, const float*, const int32_t*, const int8_t*, size_t,
                             size_t, float*, size_t, const uint8_t*);

// Tile functions, index tokens - 1.
struct QuantTiles {
  QuantTileFn fn[kQuantT];
};
template <typename Block, typename Isa, bool kXSums, size_t... I>
constexpr QuantTiles make_quant_tiles(std::index_sequence<I...>) {
  return {{&quant_tile<Block, Isa, kXSums, static_cast<int>(I) + 1>...}};
}
template <typename Block, typename Isa, bool kXSums>
constexpr QuantTiles kQuantTiles = make_quant_tiles<Block, Isa, kXSums>(std::make_index_sequence<kQuantT>());

template <typename Block, typename Isa>
void gemm_quant(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const auto* x = static_cast<const BlockQ8_0*>(a.x);
  // The biased forms run paired (they need x_sums and x_pairs); the sign form needs neither.
  const bool sums = a.x_sums != nullptr && (kBiasShift<Block, Isa> < 0 || a.x_pairs != nullptr);
  const QuantTiles& tiles = sums ? kQuantTiles<Block, Isa, true> : kQuantTiles<Block, Isa, false>;
  const auto at = [&](const auto* p, size_t off) { return sums ? p + off : nullptr; };
  if (a.n_tokens == 1) {  // decode: 2 rows x 1 token tiles, then a last odd row as a 1 x 1 tile
    const auto rows2 = sums ? &quant_tile_2rows<Block, Isa, true> : &quant_tile_2rows<Block, Isa, false>;
    int64_t r = row_begin;
    for (; r + 2 <= row_end; r += 2) {
      const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
      const uint8_t* ahead = r + 2 + kPrefetchRows <= row_end ? w + kPrefetchRows * a.w_row_bytes : nullptr;
      rows2(w, a.w_row_bytes, x, a.x_scales, at(a.x_sums, 0), at(a.x_pairs, 0), n_blocks, a.y + r, ahead);
    }
    if (r < row_end) {
      tiles.fn[0](a.w + static_cast<size_t>(r) * a.w_row_bytes, x, a.x_scales, at(a.x_sums, 0), at(a.x_pairs, 0),
                  n_blocks, n_blocks, a.y + r, a.y_stride, nullptr);
    }
    return;
  }
  for_each_tile<1, kQuantT>(row_begin, row_end, a.n_tokens, [&](int64_t r, int64_t t, int64_t, int64_t nt) {
    const size_t t_off = static_cast<size_t>(t) * n_blocks;
    const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
    const uint8_t* ahead = t == 0 && r + 1 + kPrefetchRows <= row_end ? w + kPrefetchRows * a.w_row_bytes : nullptr;
    tiles.fn[nt - 1](w, x + t_off, a.x_scales + t_off, at(a.x_sums, t_off), at(a.x_pairs, t_off * kQuantBlock),
                     n_blocks, n_blocks, a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r),
                     a.y_stride, ahead);
  });
}

}  // namespace
}  // namespace preface::kernels::avx2
