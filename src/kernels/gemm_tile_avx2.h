// AVX2 GEMM tile templates shared by gemm_avx2.cpp and gemm_vnni_avx2.cpp (see gemm_avx2.cpp for the
// arithmetic every output follows). Everything here has internal linkage, so a translation unit compiled for a
// wider target (AVX-VNNI) never lends its copies to another. Include only from *_avx2.cpp files.
#pragma once
#include <immintrin.h>

#include <utility>

#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {
namespace {

inline __m256i load_32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Integer products of one weight block and one activation block: lane j of the result holds the exact sum of
// products 4j..4j+3, the same integers for every policy below (so results do not depend on the policy).
//
// Isa::dot(acc, u, s): acc + (lane j: sum of the 4 products u8 * s8 in bytes 4j..4j+3).
struct MaddIsa {  // AVX2: maddubs then madd; callers keep each i16 pair sum below 2^15 (no saturation)
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
};

// Q8_0 weights: |w| (as u8: |-128| = 128 is right) times x carrying w's sign. Negating x is exact because
// |x| <= 127 (dot.h's precondition); each maddubs pair sum is <= 2 * 128 * 127 < 2^15.
template <typename Isa>
struct Q8Ops {
  using Block = BlockQ8_0;
  static constexpr bool kNeedsXSum = false;
  struct W {
    __m256i w, abs_w;
  };
  static W prep(const BlockQ8_0& b) {
    const __m256i q = load_32(b.qs);
    return {q, _mm256_sign_epi8(q, q)};
  }
  static __m256i isum(const W& w, const BlockQ8_0& x, const __m256i& /*x_sum*/) {
    return Isa::dot(_mm256_setzero_si256(), w.abs_w, _mm256_sign_epi8(load_32(x.qs), w.w));
  }
};

// Q4_0 weights: values (nibble - 8), as nibble * x plus x_sum, where x_sum lane j = -8 * (x_4j + ... + x_4j+3).
// Nibble layout: byte j holds value j (low) and value j + 16 (high). Each maddubs pair sum is <= 2 * 15 * 127.
template <typename Isa>
struct Q4Ops {
  using Block = BlockQ4_0;
  static constexpr bool kNeedsXSum = true;
  struct W {
    __m256i nibbles;  // [32] u8 in value order
  };
  static W prep(const BlockQ4_0& b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    return {_mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0f))};
  }
  static __m256i isum(const W& w, const BlockQ8_0& x, const __m256i& x_sum) {
    return Isa::dot(x_sum, w.nibbles, load_32(x.qs));
  }
};

// Lane j = -8 * (x_4j + ... + x_4j+3), exact (|8 * pair sum| <= 8 * 254).
inline __m256i neg8_sum(const BlockQ8_0& x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), load_32(x.qs)), _mm256_set1_epi16(-1));
}

// f32 of block b's scale for R weight rows (lanes >= R are 0).
template <typename WBlock, int R>
inline __m128 row_scales(const WBlock* const* w, size_t b) {
  __m128i h = _mm_cvtsi32_si128(w[0][b].d);
  if constexpr (R > 1) h = _mm_insert_epi16(h, w[1][b].d, 1);
  if constexpr (R > 2) h = _mm_insert_epi16(h, w[2][b].d, 2);
  if constexpr (R > 3) h = _mm_insert_epi16(h, w[3][b].d, 3);
  return _mm_cvtph_ps(h);
}

// y[t * y_stride + r] for R rows starting at w (w_row_bytes apart) and T activation rows starting at x
// (x_stride blocks apart). x_scales: f32 of each activation block's d, same layout as x; nullptr = convert d here.
template <typename Ops, int R, int T>
void quant_tile(const uint8_t* w, size_t w_row_bytes, const BlockQ8_0* x, const float* x_scales, size_t x_stride,
                size_t n_blocks, float* y, size_t y_stride, const uint8_t* prefetch) {
  static_assert(R >= 1 && R <= 4 && T >= 1);  // row_scales handles up to 4 rows
  using WBlock = typename Ops::Block;
  const WBlock* wr[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const WBlock*>(w + static_cast<size_t>(r) * w_row_bytes);
  __m256 acc[T][R];
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  alignas(16) float scale[T * 4];  // [t][r] = d_w[r] * d_x[t] of the current block
  for (size_t b = 0; b < n_blocks; ++b) {
    const __m128 dw = row_scales<WBlock, R>(wr, b);
    if (prefetch != nullptr) {
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + static_cast<size_t>(r) * w_row_bytes + b * sizeof(WBlock)),
                     _MM_HINT_T0);
      }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const size_t xb = static_cast<size_t>(t) * x_stride + b;
      const float dx = x_scales != nullptr ? x_scales[xb] : half_to_float(x[xb].d);
      _mm_store_ps(scale + 4 * t, _mm_mul_ps(dw, _mm_set1_ps(dx)));
    }
    __m256i x_sum[T];
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      x_sum[t] = Ops::kNeedsXSum ? neg8_sum(x[static_cast<size_t>(t) * x_stride + b]) : _mm256_setzero_si256();
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename Ops::W wb = Ops::prep(wr[r][b]);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i isum = Ops::isum(wb, x[static_cast<size_t>(t) * x_stride + b], x_sum[t]);
        acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(scale[4 * t + r]), acc[t][r]);
      }
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[static_cast<size_t>(t) * y_stride + r] = hsum(acc[t][r]);
  }
}

struct F32Row {
  using Elem = float;
  static __m256 vec(const float* p) { return _mm256_loadu_ps(p); }
  static float one(float v) { return v; }
};
struct F16Row {
  using Elem = uint16_t;
  static __m256 vec(const uint16_t* p) { return load_f16x8(p); }
  static float one(uint16_t h) { return half_to_float(h); }
};
struct BF16Row {
  using Elem = uint16_t;
  static __m256 vec(const uint16_t* p) { return load_bf16x8(p); }
  static float one(uint16_t h) { return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(h) << 16))); }
};

// Float weights: R rows at w, T activation rows at x (x_stride floats apart).
template <typename Row, int R, int T>
void float_tile(const uint8_t* w, size_t w_row_bytes, const float* x, size_t x_stride, size_t n_cols, float* y,
                size_t y_stride, const uint8_t* prefetch) {
  using E = typename Row::Elem;
  const E* wr[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const E*>(w + static_cast<size_t>(r) * w_row_bytes);
  __m256 acc[T][R];
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  size_t i = 0;
  for (; i + 8 <= n_cols; i += 8) {
    if (prefetch != nullptr) {
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + static_cast<size_t>(r) * w_row_bytes + i * sizeof(E)),
                     _MM_HINT_T0);
      }
    }
    __m256 wv[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = Row::vec(wr[r] + i);
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + static_cast<size_t>(t) * x_stride + i);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[t][r] = _mm256_fmadd_ps(wv[r], xv, acc[t][r]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const float* xt = x + static_cast<size_t>(t) * x_stride;
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float sum = hsum(acc[t][r]);
      for (size_t j = i; j < n_cols; ++j) sum = __builtin_fmaf(Row::one(wr[r][j]), xt[j], sum);
      y[static_cast<size_t>(t) * y_stride + r] = sum;
    }
  }
}

// Tile shapes: kR rows x kT tokens, smaller ones at the edges. Row blocks of kRowBlock rows are applied to
// token blocks of kTokenBlock tokens so that both stay in L1/L2 while every pair is formed.
constexpr int kQuantR = 4, kQuantT = 3;
constexpr int kFloatR = 3, kFloatT = 3;
constexpr int64_t kRowBlock = 16;
constexpr int64_t kTokenBlock = 48;
// The first token tile of each row tile prefetches the rows this far ahead, so that weights stream in from
// memory while the current ones are being multiplied (decode is bound by memory bandwidth).
constexpr int64_t kPrefetchRows = 16;

using QuantTileFn = void (*)(const uint8_t*, size_t, const BlockQ8_0*, const float*, size_t, size_t, float*, size_t,
                             const uint8_t*);
using FloatTileFn = void (*)(const uint8_t*, size_t, const float*, size_t, size_t, float*, size_t, const uint8_t*);

// Tile function tables, index (rows - 1) * max tokens + (tokens - 1).
struct QuantTiles {
  QuantTileFn fn[kQuantR * kQuantT];
};
struct FloatTiles {
  FloatTileFn fn[kFloatR * kFloatT];
};
template <typename Ops, size_t... I>
constexpr QuantTiles make_quant_tiles(std::index_sequence<I...>) {
  return {{&quant_tile<Ops, static_cast<int>(I) / kQuantT + 1, static_cast<int>(I) % kQuantT + 1>...}};
}
template <typename Row, size_t... I>
constexpr FloatTiles make_float_tiles(std::index_sequence<I...>) {
  return {{&float_tile<Row, static_cast<int>(I) / kFloatT + 1, static_cast<int>(I) % kFloatT + 1>...}};
}
template <typename Ops>
constexpr QuantTiles kQuantTiles = make_quant_tiles<Ops>(std::make_index_sequence<kQuantR * kQuantT>());
template <typename Row>
constexpr FloatTiles kFloatTiles = make_float_tiles<Row>(std::make_index_sequence<kFloatR * kFloatT>());

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Tokens for the next tile when `left` remain: T, except that a lone last token (poorly amortized) is avoided by
// ending T + 1 tokens as two smaller tiles.
template <int T>
int64_t tile_tokens(int64_t left) {
  if (left == T + 1 && T >= 3) return (T + 1) / 2;
  return min64(T, left);
}

// Calls tile(r, t, n_r, n_t) over [row_begin, row_end) x [0, n_tokens) in the blocked order.
template <int R, int T, typename Tile>
void for_each_tile(int64_t row_begin, int64_t row_end, int64_t n_tokens, Tile tile) {
  constexpr int64_t kRows = kRowBlock / R * R;  // whole tiles per row block
  for (int64_t rb = row_begin; rb < row_end; rb += kRows) {
    const int64_t re = min64(row_end, rb + kRows);
    for (int64_t tb = 0; tb < n_tokens; tb += kTokenBlock) {
      const int64_t te = min64(n_tokens, tb + kTokenBlock);
      for (int64_t r = rb; r < re; r += R) {
        for (int64_t t = tb; t < te;) {
          const int64_t nt = tile_tokens<T>(te - t);
          tile(r, t, min64(R, re - r), nt);
          t += nt;
        }
      }
    }
  }
}

template <typename Ops>
void gemm_quant(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const auto* x = static_cast<const BlockQ8_0*>(a.x);
  for_each_tile<kQuantR, kQuantT>(row_begin, row_end, a.n_tokens, [&](int64_t r, int64_t t, int64_t nr, int64_t nt) {
    const size_t t_off = static_cast<size_t>(t) * n_blocks;
    const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
    const uint8_t* ahead = t == 0 && r + nr + kPrefetchRows <= row_end ? w + kPrefetchRows * a.w_row_bytes : nullptr;
    kQuantTiles<Ops>.fn[(nr - 1) * kQuantT + (nt - 1)](w, a.w_row_bytes, x + t_off, a.x_scales + t_off, n_blocks,
                                                       n_blocks, a.y + static_cast<size_t>(t) * a.y_stride +
                                                                     static_cast<size_t>(r),
                                                       a.y_stride, ahead);
  });
}

template <typename Row>
void gemm_float(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const auto* x = static_cast<const float*>(a.x);
  for_each_tile<kFloatR, kFloatT>(row_begin, row_end, a.n_tokens, [&](int64_t r, int64_t t, int64_t nr, int64_t nt) {
    const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
    const uint8_t* ahead = t == 0 && r + nr + kPrefetchRows <= row_end ? w + kPrefetchRows * a.w_row_bytes : nullptr;
    kFloatTiles<Row>.fn[(nr - 1) * kFloatT + (nt - 1)](w, a.w_row_bytes, x + static_cast<size_t>(t) * a.n_cols,
                                                       a.n_cols, a.n_cols,
                                                       a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r),
                                                       a.y_stride, ahead);
  });
}

}  // namespace
}  // namespace preface::kernels::avx2
