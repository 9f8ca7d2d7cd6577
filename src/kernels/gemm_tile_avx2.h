// Shared pieces of the AVX2 GEMM tiles (gemm_quant_avx2.h, gemm_float_avx2.h): the blocked order in which
// tiles cover a row range, and prefetch distance. Everything here and in those headers has internal linkage, so
// a translation unit compiled for a wider target (AVX-VNNI) never lends its copies to another. Include only
// from *_avx2.cpp files.
#pragma once
#include <immintrin.h>

#include <utility>

#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {
namespace {

// Row blocks of kRowBlock rows are applied to token blocks of kTokenBlock tokens so that both stay in L1/L2
// while every (row, token) pair of the two blocks is formed.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kTokenBlock = 48;
// The first token tile of each row tile prefetches the rows this far ahead, so that weights stream in from
// memory while the current ones are being multiplied (decode is bound by memory bandwidth).
constexpr int64_t kPrefetchRows = 16;

inline __m256i load_32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

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

}  // namespace
}  // namespace preface::kernels::avx2
