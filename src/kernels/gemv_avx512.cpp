// Quantized GEMV (decode: 1 or 2 tokens) with AVX-512 VNNI and VBMI, bit-identical to avx2::gemm
// (gemm_quant_avx2.h defines the arithmetic: exact integer block sums; per output acc[b % 4] =
// fma(f32(isum[b]), f32(d_w[b]) * f32(d_x[b]), acc[b % 4]) over whole groups of 4 blocks, then
// (acc0 + acc2) + (acc1 + acc3), then fma per remaining block).
//
// A tile is 4 weight rows x 1 group of 4 blocks, all in 16-lane registers:
//   - per row, one byte permute (vpermt2b) gathers the group's 4 blocks of values out of the row's raw GGUF
//     bytes as [block 0 | block 1 | block 2 | block 3] x 16 bytes, for values 0..15 (lo) and 16..31 (hi): the
//     packed nibbles of Q4_0 (lo = low nibbles, hi = high nibbles) or the int8 of Q8_0 (two permutes); the
//     blocks' f16 scales are gathered by further permutes (Q8_0: one per row; Q4_0: one per two rows). The
//     activations are rearranged the same way from GemmArgs::x_pairs, so two vpdpbusd leave each block's dot in
//     the 4 lanes of its 128-bit lane.
//   - the weights enter unsigned, biased (Q4_0: the raw nibble, value + 8; Q8_0: w ^ 0x80, value + 128), and
//     2^shift x the activation block sums (GemmArgs::x_sums) are subtracted: the same exact integer isum.
//   - a 4 x 4 transpose-add turns the 4 rows' lanes into isum[lane 4 k + r] (block k, row r), so the float
//     epilogue (one convert, one multiply, one fma) runs for 16 outputs-blocks at once; the 4 accumulator lanes
//     of row r are lanes r, 4 + r, 8 + r, 12 + r: exactly acc[0..3] of the reference.
// Rows past the last whole tile of 4, batches of more than 2 tokens, and calls without x_sums / x_pairs go to
// avx512::gemm_vnni (the AVX-VNNI tiles in EVEX form). Only called where quant_available() (dispatch.cpp,
// gemm_amx.cpp).
//
// Packed Q4_0 and Q8_0 (repack.h; args.row_groups) have their own kernels (gemm_groups_avx512.cpp); rows outside
// whole groups, and calls without x_sums, go through repack.h's split_row_groups to avx512::gemm_vnni.
//
// Standard headers come before the target pragma, and nothing here instantiates library templates, so no code
// compiled for AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/types.h"
#include "kernels/gemm.h"
#include "kernels/repack.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace preface::kernels::avx512 {
namespace {

using gguf::BlockQ4_0;
using gguf::BlockQ8_0;
using gguf::kQuantBlock;

constexpr int kRows = 4;        // weight rows per tile
constexpr int kMaxTokens = 2;   // larger batches go to the GEMM kernels
constexpr int64_t kAhead = 8;   // rows prefetched ahead of the tile being multiplied (2 tiles)

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// Byte-permute tables (vpermt2b indices: 0..63 = first source, 64..127 = second) for one group of 4 blocks.
// Output byte 16 k + j of lo / hi = value j / 16 + j of block k; output bytes 8 k + 2 r, + 1 of `scale[r]`
// (Q8_0) = block k's d, placed as the f16 of lane 4 k + r (other bytes zeroed by the mask kScaleMask0 << 2 r).
// Q4_0 gathers the d values two rows per permute (scale_pair): fewer shuffles, which bound this kernel.
struct Tables {
  __m512i lo, hi, scale[kRows];
  // Q4_0 only (its scales all lie in a group's first 64 bytes): rows 2j and 2j + 1's d values from the first 64
  // bytes of each row's group, as the f16 of lanes 4 k + 2j, 4 k + 2j + 1 (mask kScaleMask0 * 0x5 << 4j).
  __m512i scale_pair[kRows / 2];
};

// Q4_0: a group is 72 bytes [d0 | 16 packed | d1 | ...]; sources: bytes 0..63 and bytes 8..71 of the group.
// Q8_0: 136 bytes [d0 | 32 values | d1 | ...]; lo and the scales from bytes 0..127, hi from bytes 8..135.
template <typename Block>
Tables make_tables() {
  alignas(64) uint8_t lo[64], hi[64], sc[kRows][64];
  constexpr int kBytes = static_cast<int>(sizeof(Block));
  constexpr bool kQ4 = sizeof(Block) == sizeof(BlockQ4_0);
  // Index of group byte `at` in a two-source table whose second source starts at group byte `second`.
  const auto index = [](int at, int second) { return static_cast<uint8_t>(at < 64 ? at : 64 + (at - second)); };
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < 16; ++j) {
      const int value_lo = kBytes * k + 2 + j;
      const int value_hi = value_lo + 16;
      lo[16 * k + j] = index(value_lo, kQ4 ? 8 : 64);
      hi[16 * k + j] = kQ4 ? 0 : static_cast<uint8_t>(value_hi - 8);  // Q8_0 only: from group bytes 8..135
    }
  }
  for (int r = 0; r < kRows; ++r) {
    std::memset(sc[r], 0, sizeof(sc[r]));
    for (int k = 0; k < 4; ++k) {
      sc[r][8 * k + 2 * r] = index(kBytes * k, kQ4 ? 8 : 64);
      sc[r][8 * k + 2 * r + 1] = index(kBytes * k + 1, kQ4 ? 8 : 64);
    }
  }
  alignas(64) uint8_t sp[kRows / 2][64] = {};
  for (int j = 0; j < kRows / 2 && kQ4; ++j) {
    for (int k = 0; k < 4; ++k) {
      for (int u = 0; u < 2; ++u) {  // row 2j + u: source u
        sp[j][8 * k + 4 * j + 2 * u] = static_cast<uint8_t>(64 * u + kBytes * k);
        sp[j][8 * k + 4 * j + 2 * u + 1] = static_cast<uint8_t>(64 * u + kBytes * k + 1);
      }
    }
  }
  Tables t;
  for (int j = 0; j < kRows / 2; ++j) t.scale_pair[j] = _mm512_load_si512(sp[j]);
  t.lo = _mm512_load_si512(lo);
  t.hi = _mm512_load_si512(hi);
  for (int r = 0; r < kRows; ++r) t.scale[r] = _mm512_load_si512(sc[r]);
  return t;
}

// Bytes 8 k, 8 k + 1 for k < 4: where scale[0] puts row 0's 4 d values (row r's: shifted left by 2 r).
constexpr __mmask64 kScaleMask0 = 0x0000000303030303ull;

// One row's contribution to a group: the u operands (lo, hi).
struct RowGroup {
  __m512i lo, hi;
};

template <typename Block>
inline RowGroup load_row_group(const uint8_t* g, const Tables& t) {
  RowGroup out;
  if constexpr (sizeof(Block) == sizeof(BlockQ4_0)) {
    const __m512i a = _mm512_loadu_si512(g), b = _mm512_loadu_si512(g + 8);
    const __m512i packed = _mm512_permutex2var_epi8(a, t.lo, b);
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    out.lo = _mm512_and_si512(packed, nibble);
    out.hi = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
  } else {
    const __m512i a = _mm512_loadu_si512(g), b = _mm512_loadu_si512(g + 64);
    const __m512i c = _mm512_loadu_si512(g + 8), d = _mm512_loadu_si512(g + 72);
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    out.lo = _mm512_xor_si512(_mm512_permutex2var_epi8(a, t.lo, b), bias);
    out.hi = _mm512_xor_si512(_mm512_permutex2var_epi8(c, t.hi, d), bias);
  }
  return out;
}

// f32 of the group's 16 weight scales, lane 4 k + r = block k of row r, for the 4 rows' groups at g, g + row_bytes,
// ... Q4_0: one permute per two rows (all its d values lie in a group's first 64 bytes); Q8_0: one per row.
template <typename Block>
inline __m512 group_scales(const uint8_t* g, size_t row_bytes, const Tables& t) {
  __m512i bits;
  if constexpr (sizeof(Block) == sizeof(BlockQ4_0)) {
    constexpr __mmask64 kPair0 = kScaleMask0 * 0x5;  // bytes 8 k .. 8 k + 3: lanes 4 k, 4 k + 1
    const __m512i a0 = _mm512_loadu_si512(g), a1 = _mm512_loadu_si512(g + row_bytes);
    const __m512i a2 = _mm512_loadu_si512(g + 2 * row_bytes), a3 = _mm512_loadu_si512(g + 3 * row_bytes);
    bits = _mm512_or_si512(_mm512_maskz_permutex2var_epi8(kPair0, a0, t.scale_pair[0], a1),
                           _mm512_maskz_permutex2var_epi8(kPair0 << 4, a2, t.scale_pair[1], a3));
  } else {
    __m512i rows[kRows];
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* gr = g + static_cast<size_t>(r) * row_bytes;
      rows[r] = _mm512_maskz_permutex2var_epi8(kScaleMask0 << (2 * r), _mm512_loadu_si512(gr), t.scale[r],
                                               _mm512_loadu_si512(gr + 64));
    }
    bits = _mm512_ternarylogic_epi64(_mm512_or_si512(rows[0], rows[1]), rows[2], rows[3], 0xfe);
  }
  return _mm512_cvtph_ps(_mm512_castsi512_si256(bits));
}

// The activation side of one group for one token: x lo / hi as [block 0 | 1 | 2 | 3] x 16 values, and per lane
// 4 k + r: 2^shift x block k's sum, and f32 of block k's d.
struct XGroup {
  __m512i lo, hi, bias;
  __m512 dx;
};

template <int kShift>
inline XGroup load_x_group(const int8_t* pairs, const int32_t* sums, const float* scales) {
  // pairs: [x0 lo | x1 lo | x0 hi | x1 hi] [x2 lo | x3 lo | x2 hi | x3 hi] (GemmArgs::x_pairs).
  const __m512i p0 = _mm512_loadu_si512(pairs), p1 = _mm512_loadu_si512(pairs + 64);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  XGroup x;
  x.lo = _mm512_shuffle_i64x2(p0, p1, 0x44);  // 128-bit lanes a0 a1 b0 b1
  x.hi = _mm512_shuffle_i64x2(p0, p1, 0xee);  // a2 a3 b2 b3
  x.bias = _mm512_slli_epi32(
      _mm512_permutexvar_epi32(spread, _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sums)))),
      kShift);
  x.dx = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_loadu_ps(scales)));
  return x;
}

// Per 128-bit lane k, the sum of each of a, b, c, d's 4 lanes: [a b c d] (integer adds: exact in any order).
inline __m512i transpose_sum(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}

// The exact integer dot of one weight block and one activation block (tail blocks).
inline int32_t block_isum(const BlockQ8_0& w, const BlockQ8_0& x) {
  int32_t s = 0;
  for (size_t i = 0; i < kQuantBlock; ++i) s += static_cast<int32_t>(w.qs[i]) * x.qs[i];
  return s;
}
inline int32_t block_isum(const BlockQ4_0& w, const BlockQ8_0& x) {
  int32_t s = 0;
  for (size_t j = 0; j < kQuantBlock / 2; ++j) {
    s += ((w.qs[j] & 0x0f) - 8) * x.qs[j] + ((w.qs[j] >> 4) - 8) * x.qs[j + kQuantBlock / 2];
  }
  return s;
}

// Rows r0..r0 + 3 x tokens 0..T-1 -> y[t * y_stride + r0 + i].
template <typename Block, int T>
void tile(const GemmArgs& a, const Tables& tables, int64_t r0, const uint8_t* prefetch) {
  constexpr int kShift = sizeof(Block) == sizeof(BlockQ4_0) ? 3 : 7;
  constexpr size_t kGroupBytes = 4 * sizeof(Block);
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const size_t n_groups = n_blocks / 4;
  const uint8_t* w = a.w + static_cast<size_t>(r0) * a.w_row_bytes;
  __m512 acc[T];  // lane 4 k + r: acc[k] of row r
  for (__m512& v : acc) v = _mm512_setzero_ps();
  for (size_t gi = 0; gi < n_groups; ++gi) {
    const size_t off = gi * kGroupBytes;
    if (prefetch != nullptr) {
      for (int r = 0; r < kRows; ++r) {
        for (size_t line = 0; line < kGroupBytes; line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(prefetch + r * a.w_row_bytes + off + line), _MM_HINT_T0);
        }
      }
    }
    RowGroup rg[kRows];
    for (int r = 0; r < kRows; ++r) rg[r] = load_row_group<Block>(w + r * a.w_row_bytes + off, tables);
    const __m512 dw = group_scales<Block>(w + off, a.w_row_bytes, tables);
    for (int t = 0; t < T; ++t) {
      const size_t xb = static_cast<size_t>(t) * n_blocks + 4 * gi;
      const XGroup x = load_x_group<kShift>(a.x_pairs + xb * kQuantBlock, a.x_sums + xb, a.x_scales + xb);
      __m512i part[kRows];
      for (int r = 0; r < kRows; ++r) {
        part[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), rg[r].lo, x.lo), rg[r].hi, x.hi);
      }
      const __m512i isum = _mm512_sub_epi32(transpose_sum(part[0], part[1], part[2], part[3]), x.bias);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, x.dx), acc[t]);
    }
  }
  const auto* x_blocks = static_cast<const BlockQ8_0*>(a.x);
  for (int t = 0; t < T; ++t) {
    // (acc0 + acc2) + (acc1 + acc3) for the 4 rows at once.
    const __m128 s02 = _mm_add_ps(_mm512_extractf32x4_ps(acc[t], 0), _mm512_extractf32x4_ps(acc[t], 2));
    const __m128 s13 = _mm_add_ps(_mm512_extractf32x4_ps(acc[t], 1), _mm512_extractf32x4_ps(acc[t], 3));
    alignas(16) float sum[kRows];
    _mm_store_ps(sum, _mm_add_ps(s02, s13));
    for (size_t b = n_groups * 4; b < n_blocks; ++b) {
      const size_t xb = static_cast<size_t>(t) * n_blocks + b;
      for (int r = 0; r < kRows; ++r) {
        const Block& wb = reinterpret_cast<const Block*>(w + r * a.w_row_bytes)[b];
        sum[r] = __builtin_fmaf(static_cast<float>(block_isum(wb, x_blocks[xb])),
                                half_to_float(wb.d) * a.x_scales[xb], sum[r]);
      }
    }
    std::memcpy(a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r0), sum, sizeof(sum));
  }
}

template <typename Block>
void gemv_rows(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const Tables tables = make_tables<Block>();
  for (int64_t r = row_begin; r < row_end; r += kRows) {
    const uint8_t* ahead =
        r + kAhead + kRows <= row_end ? a.w + static_cast<size_t>(r + kAhead) * a.w_row_bytes : nullptr;
    if (a.n_tokens == 1) {
      tile<Block, 1>(a, tables, r, ahead);
    } else {
      tile<Block, 2>(a, tables, r, ahead);
    }
  }
}

}  // namespace

void gemm_quant(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  if (args.row_groups) {
    GemmFn packed = nullptr;
    if (args.x_sums != nullptr) packed = gemm_groups;
    split_row_groups(args, row_begin, row_end, packed, gemm_vnni);
    return;
  }
  const bool quantized = args.type == gguf::TensorType::Q8_0 || args.type == gguf::TensorType::Q4_0;
  if (!quantized || args.n_tokens > kMaxTokens || args.x_sums == nullptr || args.x_pairs == nullptr) {
    gemm_vnni(args, row_begin, row_end);
    return;
  }
  const int64_t tiled_end = row_begin + (row_end - row_begin) / kRows * kRows;
  if (args.type == gguf::TensorType::Q8_0) {
    gemv_rows<BlockQ8_0>(args, row_begin, tiled_end);
  } else {
    gemv_rows<BlockQ4_0>(args, row_begin, tiled_end);
  }
  if (tiled_end < row_end) gemm_vnni(args, tiled_end, row_end);
}

}  // namespace preface::kernels::avx512
