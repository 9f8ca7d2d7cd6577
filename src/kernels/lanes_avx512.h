// Pieces shared by the AVX-512 quantized GEMM tiles: for the token-lane tiles (gemm_q32_avx512.cpp,
// gemm_iq4xs_lanes_avx512.cpp), where lane t of a 512-bit register is token 16g + t of token group g, the order in
// which tiles cover a row range and the store of a tile's outputs; IQ4_XS's group scales (also gemm_k_avx512.cpp).
//
// Internal linkage: include only after an AVX-512 target pragma (or with AVX-512 flags).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/quant_blocks.h"

namespace preface::kernels::avx512 {
namespace {

constexpr int kLanes = 16;  // tokens per register

// Over rows [row_begin, row_end) x token groups: per block of kRowBlock rows (their weights stay in L1 while every
// token group passes), row_block(rb, re) once (what the tiles read of those rows, prepared once for every token
// group), then per token group tile.template operator()<R>(r, g, n_valid) for kRows rows at a time and then single
// rows; n_valid = the group's tokens (16, fewer in the last group).
template <int kRows, int64_t kRowBlock, typename RowBlock, typename Tile>
void for_each_lane_tile(int64_t n_tokens, int64_t row_begin, int64_t row_end, RowBlock row_block, Tile tile) {
  const size_t n_groups = (static_cast<size_t>(n_tokens) + kLanes - 1) / kLanes;
  for (int64_t rb = row_begin; rb < row_end; rb += kRowBlock) {
    const int64_t re = std::min(row_end, rb + kRowBlock);
    row_block(rb, re);
    for (size_t g = 0; g < n_groups; ++g) {
      const int n_valid = static_cast<int>(std::min<int64_t>(kLanes, n_tokens - static_cast<int64_t>(g) * kLanes));
      int64_t r = rb;
      for (; r + kRows <= re; r += kRows) tile.template operator()<kRows>(r, g, n_valid);
      for (; r < re; ++r) tile.template operator()<1>(r, g, n_valid);
    }
  }
}

// y[16g + t][r0 + r] = lane t of acc[r] for r < R, t < n_valid.
template <int R>
inline void store_lanes(const GemmArgs& a, const __m512* acc, int64_t r0, size_t g, int n_valid) {
  for (int r = 0; r < R; ++r) {
    alignas(64) float out[kLanes];
    _mm512_store_ps(out, acc[r]);
    for (int t = 0; t < n_valid; ++t) {
      a.y[(g * kLanes + static_cast<size_t>(t)) * a.y_stride + static_cast<size_t>(r0 + r)] = out[t];
    }
  }
}

// The 8 group scales of an IQ4_XS super-block as int16 (6 bits, minus 32): nibble s of scales_l (low nibble first)
// | bits 2s..2s+1 of scales_h << 4. Formed in registers (scalar stores read back as one vector would stall store
// forwarding).
inline __m128i iq4xs_scales16(const BlockIQ4_XS& b) {
  uint32_t l;
  std::memcpy(&l, b.scales_l, sizeof(l));
  const __m128i nibbles = _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(l & 0x0F0F0F0Fu)),
                                            _mm_cvtsi32_si128(static_cast<int>((l >> 4) & 0x0F0F0F0Fu)));
  const __m128i high = _mm_and_si128(
      _mm_srlv_epi16(_mm_set1_epi16(static_cast<int16_t>(b.scales_h)), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm_set1_epi16(3));
  return _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(nibbles), _mm_slli_epi16(high, 4)), _mm_set1_epi16(32));
}

}  // namespace
}  // namespace preface::kernels::avx512
