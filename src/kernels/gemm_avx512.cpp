// GEMM for float weights (F32, F16, BF16) with AVX-512, bit-identical to avx2::gemm (gemm_float_avx2.h defines
// the arithmetic: per output an 8-lane FMA accumulator over 8-value steps, the fixed hsum, then the tail values
// by scalar fma). A 16-lane register holds two rows' 8-lane accumulators for one token, [row 2p | row 2p + 1], so
// each FMA advances two outputs by exactly the step the AVX2 kernel takes for each. Rows that do not fill a
// whole tile go to avx2::gemm. Only called where avx512::available() (dispatch.cpp).
//
// Standard headers come before the target pragma and the kernel headers after it have internal linkage, so no
// code compiled for AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/types.h"
#include "kernels/gemm.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx512 {
namespace {

using avx2::half_to_float;

constexpr int kPairs = 4;   // row pairs per tile: 8 rows
constexpr int kTokens = 4;  // tokens per tile
constexpr int64_t kRows = 2 * kPairs;
// Batches of up to this many tokens (decode) take the direct tiles, in tiles of kTokens over each row tile's weights
// (read from memory once, then from L1); larger ones the staged path. At 8 tokens the direct tiles were faster both
// in cache and streaming a model's weights from memory (they prefetch; the staged path then did not); at 16 tokens
// the staged path was faster in cache and as fast from memory (measurements in docs/perf-log/session-12.md).
constexpr int64_t kDirectTokens = 8;

// Two rows' 8 values at i as [row a | row b] f32.
struct F32Rows {
  using Elem = float;
  static __m512 vec2(const float* a, const float* b) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(b), 1);
  }
  static float one(float v) { return v; }
};
struct F16Rows {
  using Elem = uint16_t;
  static __m512 vec2(const uint16_t* a, const uint16_t* b) {
    const __m128i ha = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    const __m128i hb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    return _mm512_cvtph_ps(_mm256_set_m128i(hb, ha));
  }
  static float one(uint16_t h) { return half_to_float(h); }
};
struct BF16Rows {
  using Elem = uint16_t;
  static __m512 vec2(const uint16_t* a, const uint16_t* b) {
    const __m128i ha = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    const __m128i hb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_set_m128i(hb, ha)), 16));
  }
  static float one(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
};

// The 8 row sums of a tile's accumulators acc[p] = [row 2p | row 2p + 1], in row order, each by exactly hsum's tree
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), for 8 rows at once.
inline __m256 hsum_rows(const __m512 acc[kPairs]) {
  // [rows 0..3 | rows 4..7] (lane + lane 4) per 128-bit lane
  const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[0], acc[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(acc[0], acc[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2], acc[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(acc[2], acc[3], _MM_SHUFFLE(3, 1, 3, 1)));
  // 128-bit lane k: [(s0 + s2), (s1 + s3) of row k, the same of row 4 + k]
  const __m512 t = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  // element 4k: row k, element 4k + 1: row 4 + k
  const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(t, t, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(t, t, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, f));
}

// y[0..7] = the 8 rows' outputs of one token: the accumulators' sums (hsum_rows), then each row's values from
// i_tail on (fewer than 8) by scalar fma in order. wr: the 8 weight rows; xt: the token's activations.
template <typename Rows>
inline void store_row_sums(const __m512 acc[kPairs], const typename Rows::Elem* const wr[kRows], const float* xt,
                           size_t i_tail, size_t n_cols, float* y) {
  if (i_tail == n_cols) {
    _mm256_storeu_ps(y, hsum_rows(acc));
    return;
  }
  alignas(32) float sums[kRows];
  _mm256_store_ps(sums, hsum_rows(acc));
  for (int q = 0; q < kRows; ++q) {
    float sum = sums[q];
    for (size_t j = i_tail; j < n_cols; ++j) sum = __builtin_fmaf(Rows::one(wr[q][j]), xt[j], sum);
    y[q] = sum;
  }
}

// y[t * y_stride + r] for 8 rows at w (w_row_bytes apart) and T activation rows at x (x_stride floats apart).
// prefetch: nullptr, or 8 rows to pull into cache meanwhile (decode streams the weights from memory).
template <typename Rows, int T>
void tile(const uint8_t* w, size_t w_row_bytes, const float* x, size_t x_stride, size_t n_cols, float* y,
          size_t y_stride, const uint8_t* prefetch) {
  using E = typename Rows::Elem;
  const E* wr[kRows];
  #pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) wr[r] = reinterpret_cast<const E*>(w + static_cast<size_t>(r) * w_row_bytes);
  __m512 acc[T][kPairs];
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    #pragma GCC unroll 8
    for (int p = 0; p < kPairs; ++p) acc[t][p] = _mm512_setzero_ps();
  }
  size_t i = 0;
  for (; i + 8 <= n_cols; i += 8) {
    if (prefetch != nullptr && i % (64 / sizeof(E)) == 0) {
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + static_cast<size_t>(r) * w_row_bytes + i * sizeof(E)),
                     _MM_HINT_T0);
      }
    }
    __m512 wv[kPairs];
    #pragma GCC unroll 8
    for (int p = 0; p < kPairs; ++p) wv[p] = Rows::vec2(wr[2 * p] + i, wr[2 * p + 1] + i);
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + static_cast<size_t>(t) * x_stride + i));
      #pragma GCC unroll 8
      for (int p = 0; p < kPairs; ++p) acc[t][p] = _mm512_fmadd_ps(wv[p], xv, acc[t][p]);
    }
  }
  for (int t = 0; t < T; ++t) {
    store_row_sums<Rows>(acc[t], wr, x + static_cast<size_t>(t) * x_stride, i, n_cols,
                         y + static_cast<size_t>(t) * y_stride);
  }
}

// The row tile two tiles after the one at w (row r), or nullptr when it would pass row_end: what a row tile's first
// pass prefetches.
inline const uint8_t* two_tiles_ahead(const uint8_t* w, int64_t r, int64_t row_end, size_t w_row_bytes) {
  return r + 3 * kRows <= row_end ? w + 2 * kRows * w_row_bytes : nullptr;
}

using TileFn = void (*)(const uint8_t*, size_t, const float*, size_t, size_t, float*, size_t, const uint8_t*);
template <typename Rows>
constexpr TileFn kTiles[kTokens] = {tile<Rows, 1>, tile<Rows, 2>, tile<Rows, 3>, tile<Rows, 4>};

// Staged path for batches of more than kDirectTokens tokens (prefill): a row tile's weights are converted to f32 once
// per chunk of kChunkSteps 8-value steps, already in [row 2p | row 2p + 1] order, and every token tile of the
// token block then runs plain loads and FMAs over them. Each accumulator lane takes the same FMAs in the same order
// as in tile(): the accumulators are carried from chunk to chunk in memory, unchanged.
// Chunks of 256 columns (8 KiB of staged weights) and blocks of 144 tokens (36 KiB of carried accumulators): the
// weights of a chunk stay in L1 while every token of the block passes over them. 512-column chunks and 48- or
// 96-token blocks measured the same; 1024-column chunks (32 KiB) were much slower.
constexpr size_t kChunkSteps = 32;
constexpr int64_t kStagedTokenBlock = 144;

// ws: [n_steps][kPairs][16] f32, pair p of step s = [row 2p values 8s..8s+8 | row 2p + 1 values 8s..8s+8] of the
// chunk. acc: [T][kPairs] carried accumulators. x: T activation rows from the chunk's first column.
template <int T>
void staged_tile(const float* ws, size_t n_steps, const float* x, size_t x_stride, __m512* acc_io) {
  __m512 acc[T][kPairs];
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    #pragma GCC unroll 8
    for (int p = 0; p < kPairs; ++p) acc[t][p] = _mm512_load_ps(&acc_io[t * kPairs + p]);
  }
  for (size_t s = 0; s < n_steps; ++s) {
    __m512 wv[kPairs];
    #pragma GCC unroll 8
    for (int p = 0; p < kPairs; ++p) wv[p] = _mm512_load_ps(ws + (s * kPairs + static_cast<size_t>(p)) * 16);
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + static_cast<size_t>(t) * x_stride + 8 * s));
      #pragma GCC unroll 8
      for (int p = 0; p < kPairs; ++p) acc[t][p] = _mm512_fmadd_ps(wv[p], xv, acc[t][p]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    #pragma GCC unroll 8
    for (int p = 0; p < kPairs; ++p) _mm512_store_ps(&acc_io[t * kPairs + p], acc[t][p]);
  }
}

constexpr int kStagedTokens = 6;  // tokens per staged tile: 24 accumulators, 4 weight registers, 1 activation

using StagedTileFn = void (*)(const float*, size_t, const float*, size_t, __m512*);
constexpr StagedTileFn kStagedTiles[kStagedTokens] = {staged_tile<1>, staged_tile<2>, staged_tile<3>,
                                                      staged_tile<4>, staged_tile<5>, staged_tile<6>};

template <typename Rows>
void gemm_rows_staged(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  using E = typename Rows::Elem;
  const auto* x = static_cast<const float*>(a.x);
  const size_t n_steps = a.n_cols / 8;
  alignas(64) float ws[kChunkSteps * kPairs * 16];     // [step][pair][16] f32 staged weights, 8 KiB
  alignas(64) __m512 acc[kStagedTokenBlock * kPairs];  // [token][pair] carried accumulators, 36 KiB
  for (int64_t tb = 0; tb < a.n_tokens; tb += kStagedTokenBlock) {
    const int64_t te = tb + kStagedTokenBlock < a.n_tokens ? tb + kStagedTokenBlock : a.n_tokens;
    for (int64_t r = row_begin; r + kRows <= row_end; r += kRows) {
      const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
      const E* wr[kRows];
      for (int q = 0; q < kRows; ++q) wr[q] = reinterpret_cast<const E*>(w + static_cast<size_t>(q) * a.w_row_bytes);
      for (int64_t i = 0; i < (te - tb) * kPairs; ++i) acc[i] = _mm512_setzero_ps();
      // The first token block prefetches each chunk's columns of the rows two tiles ahead while staging it: without
      // it the staged path read its weights from memory at a fraction of the direct tiles' rate
      // (measurements in docs/perf-log/session-12.md).
      const uint8_t* ahead = tb == 0 ? two_tiles_ahead(w, r, row_end, a.w_row_bytes) : nullptr;
      for (size_t c = 0; c < n_steps; c += kChunkSteps) {
        const size_t cs = n_steps - c < kChunkSteps ? n_steps - c : kChunkSteps;
        if (ahead != nullptr) {
          for (int q = 0; q < kRows; ++q) {
            const uint8_t* row = ahead + static_cast<size_t>(q) * a.w_row_bytes + 8 * c * sizeof(E);
            for (size_t b = 0; b < cs * 8 * sizeof(E); b += 64) {
              _mm_prefetch(reinterpret_cast<const char*>(row + b), _MM_HINT_T0);
            }
          }
        }
        for (size_t s = 0; s < cs; ++s) {
          #pragma GCC unroll 8
          for (int p = 0; p < kPairs; ++p) {
            const size_t i = 8 * (c + s);
            _mm512_store_ps(ws + (s * kPairs + static_cast<size_t>(p)) * 16,
                            Rows::vec2(wr[2 * p] + i, wr[2 * p + 1] + i));
          }
        }
        for (int64_t t = tb; t < te; t += kStagedTokens) {
          const int64_t nt = te - t < kStagedTokens ? te - t : kStagedTokens;
          kStagedTiles[nt - 1](ws, cs, x + static_cast<size_t>(t) * a.n_cols + 8 * c, a.n_cols,
                               &acc[(t - tb) * kPairs]);
        }
      }
      for (int64_t t = tb; t < te; ++t) {
        store_row_sums<Rows>(&acc[(t - tb) * kPairs], wr, x + static_cast<size_t>(t) * a.n_cols, 8 * n_steps, a.n_cols,
                             a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r));
      }
    }
  }
}

template <typename Rows>
void gemm_rows(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens > kDirectTokens) {
    gemm_rows_staged<Rows>(a, row_begin, row_end);
    return;
  }
  const auto* x = static_cast<const float*>(a.x);
  for (int64_t r = row_begin; r + kRows <= row_end; r += kRows) {
    const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
    // The first token tile of a row tile prefetches the rows two tiles ahead; the others read the rows from L1.
    const uint8_t* ahead = two_tiles_ahead(w, r, row_end, a.w_row_bytes);
    for (int64_t t = 0; t < a.n_tokens; t += kTokens) {
      const int64_t nt = a.n_tokens - t < kTokens ? a.n_tokens - t : kTokens;
      kTiles<Rows>[nt - 1](w, a.w_row_bytes, x + static_cast<size_t>(t) * a.n_cols, a.n_cols, a.n_cols,
                           a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r), a.y_stride,
                           t == 0 ? ahead : nullptr);
    }
  }
}

}  // namespace

void gemm_float(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  const int64_t tiled_end = row_begin + (row_end - row_begin) / kRows * kRows;
  switch (args.type) {
    case gguf::TensorType::F32: gemm_rows<F32Rows>(args, row_begin, tiled_end); break;
    case gguf::TensorType::F16: gemm_rows<F16Rows>(args, row_begin, tiled_end); break;
    case gguf::TensorType::BF16: gemm_rows<BF16Rows>(args, row_begin, tiled_end); break;
    default: avx2::gemm(args, row_begin, row_end); return;  // quantized rows
  }
  if (tiled_end < row_end) avx2::gemm(args, tiled_end, row_end);
}

}  // namespace preface::kernels::avx512
