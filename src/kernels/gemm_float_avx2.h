// AVX2 GEMM tiles for float weights (F32, F16, BF16), shared by the *_avx2.cpp GEMM files. Per output:
//   acc (8 lanes) = fma(w[i..i+8), x[i..i+8), acc) over the whole 8-value steps in order; sum = hsum(acc);
//   then sum = fma(w[i], x[i], sum) for the < 8 tail values in order.
// Internal linkage (see gemm_tile_avx2.h). Include only from *_avx2.cpp files.
#pragma once
#include "kernels/gemm_tile_avx2.h"

namespace preface::kernels::avx2 {
namespace {

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

constexpr int kFloatR = 3, kFloatT = 3;  // rows x tokens of a float tile

using FloatTileFn = void (*)(const uint8_t*, size_t, const float*, size_t, size_t, float*, size_t, const uint8_t*);

// Tile functions, index (rows - 1) * kFloatT + (tokens - 1).
struct FloatTiles {
  FloatTileFn fn[kFloatR * kFloatT];
};
template <typename Row, size_t... I>
constexpr FloatTiles make_float_tiles(std::index_sequence<I...>) {
  return {{&float_tile<Row, static_cast<int>(I) / kFloatT + 1, static_cast<int>(I) % kFloatT + 1>...}};
}
template <typename Row>
constexpr FloatTiles kFloatTiles = make_float_tiles<Row>(std::make_index_sequence<kFloatR * kFloatT>());

template <typename Row>
void gemm_float(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const auto* x = static_cast<const float*>(a.x);
  for_each_tile<kFloatR, kFloatT>(row_begin, row_end, a.n_tokens, [&](int64_t r, int64_t t, int64_t nr, int64_t nt) {
    const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
    const uint8_t* ahead = t == 0 && r + nr + kPrefetchRows <= row_end ? w + kPrefetchRows * a.w_row_bytes : nullptr;
    float* y = a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r);
    kFloatTiles<Row>.fn[(nr - 1) * kFloatT + (nt - 1)](w, a.w_row_bytes, x + static_cast<size_t>(t) * a.n_cols,
                                                       a.n_cols, a.n_cols, y, a.y_stride, ahead);
  });
}

}  // namespace
}  // namespace preface::kernels::avx2
