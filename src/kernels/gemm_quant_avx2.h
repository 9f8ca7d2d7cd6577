// AVX2 GEMM tiles for quantized weights (Q8_0, Q4_0) against Q8_0 activations, shared by the *_avx2.cpp GEMM
// files. Per output, with isum[b] the exact integer dot product of block b (|isum| <= 32 * 128 * 127 < 2^24, so
// f32(isum) is exact) and s[b] = f32(d_w[b]) * f32(d_x[b]):
//   acc (4 f32 lanes) = 0;  per group of blocks 4g..4g+3 in order:  acc[k] = fma(f32(isum[4g+k]), s[4g+k], acc[k])
//   sum = (acc[0] + acc[2]) + (acc[1] + acc[3])
//   per remaining block b (n_blocks % 4 of them) in order:  sum = fma(f32(isum[b]), s[b], sum)
// amx::gemm follows the same arithmetic, and the AVX2 row dots are 1 x 1 tiles.
//
// A tile is one weight row x T tokens: the row's |w| for 4 blocks is formed once and kept in registers for the
// T tokens; two tokens' 4 block sums come out of one hadd tree as [token 0 | token 1] lanes.
// Internal linkage (see gemm_tile_avx2.h). Include only from *_avx2.cpp files.
#pragma once
#include "kernels/gemm_tile_avx2.h"

namespace preface::kernels::avx2 {
namespace {

// Isa::dot(acc, u, s) = acc + (lane j: the sum of the 4 products u8 * s8 in bytes 4j..4j+3), exact.
struct MaddIsa {  // AVX2: maddubs then madd; callers keep each i16 pair sum below 2^15 (no saturation)
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
};

// The signed int8 weights of 4 consecutive blocks: values in memory (Q8_0: the block itself; Q4_0: unpacked to
// `unpacked`), |values| in registers.
struct Group4 {
  __m256i abs_w[4];
  const int8_t* w[4];  // [32] each
};

inline void load_group(const BlockQ8_0* b, Group4& g, int8_t (*)[32]) {
  for (int k = 0; k < 4; ++k) {
    const __m256i q = load_32(b[k].qs);
    g.abs_w[k] = _mm256_sign_epi8(q, q);
    g.w[k] = b[k].qs;
  }
}

// Q4_0: byte j of a block holds value j (low nibble) and value j + 16 (high), each nibble - 8.
inline __m256i unpack_q4(const BlockQ4_0& b) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  const __m256i nibbles =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0f));
  return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
}

inline void load_group(const BlockQ4_0* b, Group4& g, int8_t (*unpacked)[32]) {
  for (int k = 0; k < 4; ++k) {
    const __m256i q = unpack_q4(b[k]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(unpacked[k]), q);
    g.abs_w[k] = _mm256_sign_epi8(q, q);
    g.w[k] = unpacked[k];
  }
}

// Lane j = exact sum of products 4j..4j+3 of w and x, as |w| (u8: |-128| = 128 is right) times x carrying w's
// sign. Negating x is exact because |x| <= 127 (dot.h's precondition); maddubs pair sums are <= 2 * 128 * 127.
template <typename Isa>
inline __m256i lanes(__m256i abs_w, const int8_t* w, const BlockQ8_0& x) {
  return Isa::dot(_mm256_setzero_si256(), abs_w, _mm256_sign_epi8(load_32(x.qs), load_32(w)));
}

// Halves of the block sums of one token: [s0 s1 s2 s3 | s0 s1 s2 s3] partial (lanes 0-3 | lanes 4-7).
template <typename Isa>
inline __m256i half_sums(const Group4& g, const BlockQ8_0* x) {
  const __m256i p0 = lanes<Isa>(g.abs_w[0], g.w[0], x[0]);
  const __m256i p1 = lanes<Isa>(g.abs_w[1], g.w[1], x[1]);
  const __m256i p2 = lanes<Isa>(g.abs_w[2], g.w[2], x[2]);
  const __m256i p3 = lanes<Isa>(g.abs_w[3], g.w[3], x[3]);
  return _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
}

// The 4 block sums of one token, and of two tokens as [token 0 | token 1].
template <typename Isa>
inline __m128i block_sums(const Group4& g, const BlockQ8_0* x) {
  const __m256i h = half_sums<Isa>(g, x);
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
template <typename Isa>
inline __m256i block_sums2(const Group4& g, const BlockQ8_0* x0, const BlockQ8_0* x1) {
  const __m256i h0 = half_sums<Isa>(g, x0), h1 = half_sums<Isa>(g, x1);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}

// f32 of the d of 4 consecutive blocks.
template <typename Block>
inline __m128 scales4(const Block* b) {
  __m128i h = _mm_cvtsi32_si128(b[0].d);
  h = _mm_insert_epi16(h, b[1].d, 1);
  h = _mm_insert_epi16(h, b[2].d, 2);
  h = _mm_insert_epi16(h, b[3].d, 3);
  return _mm_cvtph_ps(h);
}

// (a0 + a2) + (a1 + a3).
inline float reduce4(__m128 a) {
  const __m128 s = _mm_add_ps(a, _mm_movehl_ps(a, a));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// The exact integer dot product of one weight block and one activation block.
template <typename Isa>
inline int32_t block_isum(const BlockQ8_0& w, const BlockQ8_0& x) {
  const __m256i q = load_32(w.qs);
  return hsum_i32(lanes<Isa>(_mm256_sign_epi8(q, q), w.qs, x));
}
template <typename Isa>
inline int32_t block_isum(const BlockQ4_0& w, const BlockQ8_0& x) {
  alignas(32) int8_t unpacked[32];
  const __m256i q = unpack_q4(w);
  _mm256_store_si256(reinterpret_cast<__m256i*>(unpacked), q);
  return hsum_i32(lanes<Isa>(_mm256_sign_epi8(q, q), unpacked, x));
}

// y[t * y_stride] for one weight row w (Block[n_blocks]) and T activation rows at x (x_stride blocks apart).
// x_scales: f32 of each activation block's d, laid out like x; nullptr = convert d here. prefetch: nullptr, or
// a row to pull into cache meanwhile.
template <typename Block, typename Isa, int T>
void quant_tile(const uint8_t* w, const BlockQ8_0* x, const float* x_scales, size_t x_stride, size_t n_blocks,
                float* y, size_t y_stride, const uint8_t* prefetch) {
  constexpr int kPairs = T / 2;
  const auto* wr = reinterpret_cast<const Block*>(w);
  const auto dx4 = [&](int t, size_t b) {  // f32 d of activation blocks b..b+3 of token t
    const size_t at = static_cast<size_t>(t) * x_stride + b;
    return x_scales != nullptr ? _mm_loadu_ps(x_scales + at) : scales4(x + at);
  };
  __m256 acc2[kPairs > 0 ? kPairs : 1];  // [token 2p lanes | token 2p + 1 lanes]
  for (__m256& a : acc2) a = _mm256_setzero_ps();
  __m128 acc1 = _mm_setzero_ps();  // the last token when T is odd
  alignas(32) int8_t unpacked[4][32];
  Group4 g;
  const size_t n_full = n_blocks / 4 * 4;
  for (size_t b = 0; b < n_full; b += 4) {
    if (prefetch != nullptr) {
      for (size_t off = 0; off < 4 * sizeof(Block); off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + b * sizeof(Block) + off), _MM_HINT_T0);
      }
    }
    load_group(wr + b, g, unpacked);
    const __m128 dw = scales4(wr + b);
    const __m256 dw2 = _mm256_set_m128(dw, dw);
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p) {
      const BlockQ8_0* x0 = x + static_cast<size_t>(2 * p) * x_stride + b;
      const __m256i isum = block_sums2<Isa>(g, x0, x0 + x_stride);
      const __m256 scale = _mm256_mul_ps(dw2, _mm256_set_m128(dx4(2 * p + 1, b), dx4(2 * p, b)));
      acc2[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc2[p]);
    }
    if constexpr (T % 2 == 1) {
      const __m128i isum = block_sums<Isa>(g, x + static_cast<size_t>(T - 1) * x_stride + b);
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

constexpr int kQuantT = 6;  // tokens per quantized tile (one weight row)

using QuantTileFn = void (*)(const uint8_t*, const BlockQ8_0*, const float*, size_t, size_t, float*, size_t,
                             const uint8_t*);

// Tile functions, index tokens - 1.
struct QuantTiles {
  QuantTileFn fn[kQuantT];
};
template <typename Block, typename Isa, size_t... I>
constexpr QuantTiles make_quant_tiles(std::index_sequence<I...>) {
  return {{&quant_tile<Block, Isa, static_cast<int>(I) + 1>...}};
}
template <typename Block, typename Isa>
constexpr QuantTiles kQuantTiles = make_quant_tiles<Block, Isa>(std::make_index_sequence<kQuantT>());

template <typename Block, typename Isa>
void gemm_quant(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const auto* x = static_cast<const BlockQ8_0*>(a.x);
  for_each_tile<1, kQuantT>(row_begin, row_end, a.n_tokens, [&](int64_t r, int64_t t, int64_t, int64_t nt) {
    const size_t t_off = static_cast<size_t>(t) * n_blocks;
    const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
    const uint8_t* ahead = t == 0 && r + 1 + kPrefetchRows <= row_end ? w + kPrefetchRows * a.w_row_bytes : nullptr;
    kQuantTiles<Block, Isa>.fn[nt - 1](w, x + t_off, a.x_scales + t_off, n_blocks, n_blocks,
                                       a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r),
                                       a.y_stride, ahead);
  });
}

}  // namespace
}  // namespace preface::kernels::avx2
