// Quantized GEMM with AMX int8 tiles on packed row groups (repack.h), bit-identical to avx2::gemm
// (gemm_quant_avx2.h defines the arithmetic): gemm_amx.cpp's path with the roles swapped, because a packed unit
// already holds a block of 16 rows in VNNI order. B = the group's block (Q8_0: the unit's 8 pieces as they lie;
// Q4_0: unpacked to nibble - 8), A = 16 tokens' values of the block, C = 16 tokens x 16 rows of exact block
// sums; the float epilogue runs the reference's steps (acc[b % 4] = fma(f32(C), f32(d_w) * f32(d_x),
// acc[b % 4]) over whole groups of 4 blocks, (acc0 + acc2) + (acc1 + acc3), then fma per remaining block)
// lane-parallel over the 16 rows, scaled by the unit's 16 scales as they lie, and each token's 16 outputs are
// stored as one row: no transpose back to rows, no scale permute, no output gather.
//
// Standard headers come before the target pragma, and nothing here instantiates library templates, so no code
// compiled for AMX/AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/types.h"
#include "kernels/gemm.h"
#include "kernels/repack.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels/gemm_amx_tiles.h"  // after the target pragma: its inline code is compiled for AMX / AVX-512

namespace preface::kernels::amx {
namespace {

using gguf::BlockQ8_0;
using gguf::kQuantBlock;

// Packed weights (repack.h) take the roles the other way round: block b of a 16-row group is one B tile
// [8 K-rows][16 rows x 4 bytes] and the activations are A, so that C = 16 tokens x 16 rows (packed_row_group).
// Q8_0: the unit's 8 pieces as they lie. Q4_0: its pieces' nibbles - 8 (K-row k < 4: piece k's low nibbles,
// values 4k..4k+3; K-row 4 + k: its high nibbles, values 16+4k..16+4k+3), unpacked two blocks ahead of their
// tile load into ring[b % 3] (a tile load right after the stores it reads waits for them).
template <gguf::TensorType kType>
struct PackedB {
  static constexpr size_t kUnitBytes = kType == gguf::TensorType::Q8_0 ? kQ8_0UnitBytes : kQ4_0UnitBytes;
  PackedB(const uint8_t* group, int8_t* ring_buf) : w(group), ring(ring_buf) {}
  void prepare(size_t b) {
    if constexpr (kType == gguf::TensorType::Q4_0) {
      const uint8_t* qs = w + b * kUnitBytes + 2 * kRows;
      int8_t* dst = ring + (b % 3) * kBTileBytes;
      const __m512i nibble = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(qs + 64 * k);
        _mm512_store_si512(dst + 64 * k, _mm512_sub_epi8(_mm512_and_si512(v, nibble), eight));
        _mm512_store_si512(dst + 64 * (4 + k),
                           _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibble), eight));
      }
    }
  }
  const void* b_tile(size_t b) const {
    if constexpr (kType == gguf::TensorType::Q4_0) return ring + (b % 3) * kBTileBytes;
    return w + b * kUnitBytes + 2 * kRows;
  }
  // The unit's 16 scales, row order.
  __m512 scales(size_t b) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * kUnitBytes)));
  }
  void prefetch_block(const uint8_t* group, size_t b) const {
    for (size_t line = 0; line < kUnitBytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(group + b * kUnitBytes + line), _MM_HINT_T0);
    }
  }
  const uint8_t* w;  // the group
  int8_t* ring;      // [3][8][64], Q4_0 only
};

// C tile g = A (token tile g's block b: [16 tokens][32] at a_tiles) x B (block b's weights), for the first
// n_tiles token tiles; stored to c ([tile][token][row]). B goes to tmm6 or tmm7 by block parity, so that loading
// the next block's weights need not wait for this block's products.
#define PREFACE_AMX_PACKED_BLOCK(name, B)                                                                    \
  template <typename Packed>                                                                                \
  inline void name(const Packed& w, const uint8_t* a_tiles, size_t n_blocks, size_t b, int n_tiles,          \
                   int32_t (*c)[kTokens][16]) {                                                             \
    constexpr long kRowBytes = 64; /* B and C row bytes */                                                  \
    const size_t tile_stride = n_blocks * kBTileBytes; /* between token tiles */                            \
    const uint8_t* at = a_tiles + b * kBTileBytes;                                                          \
    _tile_loadd(B, w.b_tile(b), kRowBytes);                                                                 \
    _tile_zero(0);                                                                                          \
    _tile_loadd(4, at, 32);                                                                                 \
    _tile_dpbssd(0, 4, B);                                                                                  \
    if (n_tiles > 1) {                                                                                      \
      _tile_zero(1);                                                                                        \
      _tile_loadd(5, at + tile_stride, 32);                                                                 \
      _tile_dpbssd(1, 5, B);                                                                                \
    }                                                                                                       \
    if (n_tiles > 2) {                                                                                      \
      _tile_zero(2);                                                                                        \
      _tile_loadd(4, at + 2 * tile_stride, 32);                                                             \
      _tile_dpbssd(2, 4, B);                                                                                \
    }                                                                                                       \
    if (n_tiles > 3) {                                                                                      \
      _tile_zero(3);                                                                                        \
      _tile_loadd(5, at + 3 * tile_stride, 32);                                                             \
      _tile_dpbssd(3, 5, B);                                                                                \
    }                                                                                                       \
    _tile_stored(0, c[0], kRowBytes);                                                                       \
    if (n_tiles > 1) _tile_stored(1, c[1], kRowBytes);                                                      \
    if (n_tiles > 2) _tile_stored(2, c[2], kRowBytes);                                                      \
    if (n_tiles > 3) _tile_stored(3, c[3], kRowBytes);                                                      \
  }
PREFACE_AMX_PACKED_BLOCK(packed_block_even, 6)
PREFACE_AMX_PACKED_BLOCK(packed_block_odd, 7)
#undef PREFACE_AMX_PACKED_BLOCK

// C tile `c` [16 tokens][16 rows] -> fma'd into acc [16 tokens][16 rows]: accumulate's steps with the roles
// swapped (dw: the block's 16 row scales; dx: its 16 token scales; the product d_w * d_x is the same).
inline void accumulate_packed(const int32_t (*c)[16], __m512 dw, const float* dx, bool first, float (*acc)[16]) {
  for (int t = 0; t < kTokens; ++t) {
    const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(c[t]));
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx[t]));
    const __m512 prev = first ? _mm512_setzero_ps() : _mm512_load_ps(acc[t]);
    _mm512_store_ps(acc[t], _mm512_fmadd_ps(isum, scale, prev));
  }
}

// One packed 16-row group against up to 4 token tiles (A tiles [4][n_blocks][16][32], dx [4][n_blocks][16]):
// row_group's steps with C = tokens x rows, so each token's 16 outputs are one row of acc, stored as they lie.
template <typename Packed>
void packed_row_group(Packed& w, const uint8_t* a_tiles, const float* dx, size_t n_blocks, int n_valid, float* y,
                      size_t y_stride, const uint8_t* prefetch) {
  const int n_tiles = (n_valid + kTokens - 1) / kTokens;
  alignas(64) float acc[4][kGroups][kTokens][16];  // [b % 4][token tile][token][row], written before read
  alignas(64) int32_t c[2][kGroups][kTokens][16];   // by block parity
  const auto multiply = [&](size_t b) {
    if (b % 2 == 0) {
      packed_block_even(w, a_tiles, n_blocks, b, n_tiles, c[0]);
    } else {
      packed_block_odd(w, a_tiles, n_blocks, b, n_tiles, c[1]);
    }
  };
  const auto accumulate_block = [&](size_t b, bool first, size_t lane) {
    const __m512 dw = w.scales(b);
    for (int g = 0; g < n_tiles; ++g) {
      accumulate_packed(c[b % 2][g], dw, dx + (static_cast<size_t>(g) * n_blocks + b) * 16, first, acc[lane][g]);
    }
  };
  const auto combine = [&](bool any) {
    for (int g = 0; g < n_tiles; ++g) {
      combine_lanes(acc[0][g][0], acc[1][g][0], acc[2][g][0], acc[3][g][0], kTokens, any);
    }
  };
  block_loop(w, n_blocks, prefetch, multiply, accumulate_block, combine);
  for (int t = 0; t < n_valid; ++t) {
    _mm512_storeu_ps(y + static_cast<size_t>(t) * y_stride, _mm512_load_ps(acc[0][t / kTokens][t % kTokens]));
  }
}

// 64 tokens per pass. buf: A tiles [4][n_blocks][16][32], dx [4][n_blocks][16] (zero for tokens past the batch,
// whose A rows are zero too), the Q4_0 ring [3][8][64].
template <gguf::TensorType kType>
void gemm_packed_typed(const GemmArgs& a, int64_t row_begin, int64_t row_end, uint8_t* buf) {
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const auto* x = static_cast<const BlockQ8_0*>(a.x);
  uint8_t* a_tiles = buf;
  auto* dx = reinterpret_cast<float*>(buf + kGroups * n_blocks * kBTileBytes);
  auto* ring = reinterpret_cast<int8_t*>(dx + kGroups * n_blocks * 16);
  constexpr int64_t kPass = kGroups * kTokens;
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kPass) {
    const int n_valid = static_cast<int>(a.n_tokens - t0 < kPass ? a.n_tokens - t0 : kPass);
    const int n_tiles = (n_valid + kTokens - 1) / kTokens;
    for (int g = 0; g < n_tiles; ++g) {
      for (size_t b = 0; b < n_blocks; ++b) {
        const size_t tile = static_cast<size_t>(g) * n_blocks + b;
        for (int i = 0; i < kTokens; ++i) {
          const int64_t t = t0 + g * kTokens + i;
          uint8_t* row = a_tiles + tile * kBTileBytes + static_cast<size_t>(i) * 32;
          if (t < a.n_tokens) {
            const size_t xb = static_cast<size_t>(t) * n_blocks + b;
            std::memcpy(row, x[xb].qs, 32);
            dx[tile * 16 + static_cast<size_t>(i)] = a.x_scales[xb];
          } else {
            std::memset(row, 0, 32);
            dx[tile * 16 + static_cast<size_t>(i)] = 0.0f;
          }
        }
      }
    }
    for (int64_t r = row_begin; r < row_end; r += kRows) {
      PackedB<kType> w(a.w + static_cast<size_t>(r) * a.w_row_bytes, ring);
      const uint8_t* next = r + 2 * kRows <= row_end ? a.w + static_cast<size_t>(r + kRows) * a.w_row_bytes : nullptr;
      packed_row_group(w, a_tiles, dx, n_blocks, n_valid, a.y + static_cast<size_t>(t0) * a.y_stride + r,
                       a.y_stride, next);
    }
  }
}

}  // namespace

void gemm_packed(const GemmArgs& a, int64_t row_begin, int64_t row_end, uint8_t* buf) {
  if (a.type == gguf::TensorType::Q8_0) {
    gemm_packed_typed<gguf::TensorType::Q8_0>(a, row_begin, row_end, buf);
  } else {
    gemm_packed_typed<gguf::TensorType::Q4_0>(a, row_begin, row_end, buf);
  }
}

}  // namespace preface::kernels::amx
