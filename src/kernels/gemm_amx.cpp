// Quantized GEMM with AMX int8 tiles, bit-identical to avx2::gemm (gemm_quant_avx2.h defines the arithmetic).
//
// AMX forms the exact block sums C[r][t] = sum of the 32 int8 products of weight row r and token t in one block
// (TDPBSSD, 16 rows x 16 tokens x one block): A = 16 weight rows' values of the block (Q8_0 rows read in place,
// Q4_0 unpacked to nibble - 8), B = the 16 tokens' values of the block in VNNI order (K-row k holds bytes
// 4k..4k+3 of every token). The float epilogue then runs, per output and lane-parallel over the 16 tokens,
// exactly the AVX2 tile's sequence: acc[b % 4] = fma(f32(C), f32(d_w) * f32(d_x), acc[b % 4]) for whole groups
// of 4 blocks, (acc0 + acc2) + (acc1 + acc3), then fma per remaining block. Packed groups (repack.h) already
// hold a block's weights in VNNI order, so there the roles swap (gemm_amx_packed.cpp).
//
// Rows in whole groups of 16 and tokens in groups of 16 (the last group zero-padded; padded outputs are not
// stored) go through AMX; leftover rows go to avx2::gemm_vnni, batches under kMinTokens (packed matrices: up to
// kNarrowTokens) to avx512::gemm_quant; rows of packed matrices outside whole groups as repack.h's
// split_row_groups says.
// Tile state is configured at entry and released at exit. Only called where amx_available() (dispatch.cpp).
//
// Standard headers come before the target pragma, and nothing here instantiates library templates, so no code
// compiled for AMX/AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

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

using gguf::BlockQ4_0;
using gguf::BlockQ8_0;
using gguf::kQuantBlock;

constexpr int64_t kMinTokens = 3;   // smaller batches (decode of 1-2 sequences) take avx512::gemm_quant
constexpr int kNarrowTokens = 8;    // batches up to this size use narrow tiles

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// tmm0..3: C, 16 rows x 16 int32 (one per token tile); tmm4, tmm5: A, 16 rows x 32 bytes; tmm6, tmm7: B, 8 rows
// x 64 bytes. Narrow (batches of up to kNarrowTokens): C 16 rows x 8 int32 and B 8 rows x 32 bytes, so that the
// float epilogue works on [row 2j | row 2j + 1] x 8 tokens per register instead of half-empty 16-token rows (C in
// tmm0 and tmm1 by block parity, row_group_narrow).
TileConfig tile_config(bool narrow) {
  TileConfig c;
  const uint16_t token_bytes = narrow ? 32 : 64;
  for (int i = 0; i < 4; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = token_bytes;
  }
  for (int i = 4; i < 6; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = 32;
  }
  for (int i = 6; i < 8; ++i) {
    c.rows[i] = 8;
    c.colsb[i] = token_bytes;
  }
  return c;
}

// One tile of up to 16 tokens: B tiles [n_blocks][8][64] and f32 activation scales [n_blocks][16], zero for
// padded tokens (n_valid may be 0: all zero). Narrow (n_valid <= 8): B tiles [n_blocks][8][32] at the same block
// stride, and scales [n_blocks][tokens 0..7 twice].
void build_token_tile(const BlockQ8_0* x, const float* x_scales, size_t n_blocks, int n_valid, bool narrow,
                      uint8_t* b_tiles, float* dx) {
  const __mmask16 valid = static_cast<__mmask16>((1u << n_valid) - 1);
  const __m512i token = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // Offsets of each token's block 0 from token 0's, in bytes and in scales (x rows are n_blocks blocks apart).
  const __m512i row_offset =
      _mm512_mullo_epi32(token, _mm512_set1_epi32(static_cast<int>(n_blocks * sizeof(BlockQ8_0))));
  const __m512i scale_offset = _mm512_mullo_epi32(token, _mm512_set1_epi32(static_cast<int>(n_blocks)));
  for (size_t b = 0; b < n_blocks; ++b) {
    const auto* qs = reinterpret_cast<const uint8_t*>(x[b].qs);
    for (int k = 0; k < 8; ++k) {
      const __m512i row = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, row_offset, qs + 4 * k, 1);
      if (narrow) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(b_tiles + b * kBTileBytes + 32 * static_cast<size_t>(k)),
                           _mm512_castsi512_si256(row));
      } else {
        _mm512_store_si512(b_tiles + b * kBTileBytes + 64 * static_cast<size_t>(k), row);
      }
    }
    const __m512 d = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, scale_offset, x_scales + b, 4);
    _mm512_store_ps(dx + 16 * b, narrow ? _mm512_shuffle_f32x4(d, d, 0x44) : d);
  }
}

// Weight rows of one 16-row group: the A tile of block b and the f32 scales of block b.
struct Q8Rows {
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  Q8Rows(const uint8_t* first_row, size_t bytes, int8_t* /*unpack_buf*/) : w(first_row), row_bytes(bytes) {}
  void prepare(size_t /*b*/) {}
  const void* a_tile(size_t b, size_t* stride) const {
    *stride = row_bytes;
    return w + b * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs);
  }
  __m512 scales(size_t b) const { return row_scales(w + b * sizeof(BlockQ8_0), row_bytes); }
  // Block b of the 16 rows starting at `rows` (the next group).
  void prefetch_block(const uint8_t* rows, size_t b) const { prefetch_rows(rows, row_bytes, b * kBlockBytes); }
  const uint8_t* w;  // first row
  size_t row_bytes;

  // The line at `offset` of each of the 16 rows at `rows`.
  static void prefetch_rows(const uint8_t* rows, size_t row_bytes, size_t offset) {
    for (int r = 0; r < kRows; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows + static_cast<size_t>(r) * row_bytes + offset), _MM_HINT_T0);
    }
  }
  // f32 of the d at d_bytes, d_bytes + row_bytes, ... (16 rows): gather the u32 holding each d, keep the low half.
  static __m512 row_scales(const uint8_t* d_bytes, size_t row_bytes) {
    const __m512i offset = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32(static_cast<int>(row_bytes)));
    const __m512i words = _mm512_i32gather_epi32(offset, d_bytes, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
  }
};

struct Q4Rows {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  Q4Rows(const uint8_t* first_row, size_t bytes, int8_t* unpack_buf)
      : w(first_row), row_bytes(bytes), unpacked(unpack_buf) {}
  // Unpacks block b of the 16 rows to unpacked[b % 3]: [3][16 rows][32] values - 8. Blocks are unpacked two
  // ahead of their A tile load: a tile load right after the stores it reads waits for them to reach the cache.
  void prepare(size_t b) {
    int8_t* dst = unpacked + (b % 3) * kRows * 32;
    // Two rows per register: [row lo | row hi | next lo | next hi], lo = the low nibbles (values 0..15).
    const __m512i shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    for (int r = 0; r < kRows; r += 2) {
      const auto* b0 = reinterpret_cast<const BlockQ4_0*>(w + static_cast<size_t>(r) * row_bytes) + b;
      const auto* b1 = reinterpret_cast<const BlockQ4_0*>(w + static_cast<size_t>(r + 1) * row_bytes) + b;
      const __m512i packed = _mm512_mask_broadcast_i32x4(
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0->qs))), 0xff00,
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1->qs)));
      const __m512i nib = _mm512_and_si512(_mm512_srlv_epi64(packed, shift), _mm512_set1_epi8(0x0f));
      _mm512_store_si512(dst + static_cast<size_t>(r) * 32, _mm512_sub_epi8(nib, _mm512_set1_epi8(8)));
    }
  }
  const void* a_tile(size_t b, size_t* stride) const {
    *stride = 32;
    return unpacked + (b % 3) * kRows * 32;
  }
  __m512 scales(size_t b) const { return Q8Rows::row_scales(w + b * sizeof(BlockQ4_0), row_bytes); }
  void prefetch_block(const uint8_t* rows, size_t b) const { Q8Rows::prefetch_rows(rows, row_bytes, b * kBlockBytes); }
  const uint8_t* w;
  size_t row_bytes;
  int8_t* unpacked;
};

// Lane R: R x `stride`, the offset of output row R's acc row (acc rows of `stride` floats).
inline __m512i output_rows(int stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(stride));
}

// C tile `c` (16 rows x 16 tokens of exact block sums) -> f32 products with the scales, fma'd into acc rows
// (into +0 for a lane's first block, which is what accumulating into zeroed rows would do, without the stores).
// acc: [16 rows][16 tokens]; dw: the block's 16 row scales; dx: its 16 token scales.
inline void accumulate(const int32_t (*c)[16], const float* dw, const __m512 dx, bool first, float (*acc)[16]) {
  for (int r = 0; r < kRows; ++r) {
    const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(c[r]));
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(dw[r]), dx);
    const __m512 prev = first ? _mm512_setzero_ps() : _mm512_load_ps(acc[r]);
    _mm512_store_ps(acc[r], _mm512_fmadd_ps(isum, scale, prev));
  }
}

// Narrow: C tile `c` [16 rows][8 tokens]; acc [8][16] = [row 2j: tokens 0..7 | row 2j + 1: tokens 0..7];
// dw: the 16 row scales; dx2: the 8 token scales twice. Per output the same steps as accumulate.
inline void accumulate_narrow(const int32_t* c, __m512 dw, __m512 dx2, bool first, float (*acc)[16]) {
  for (int j = 0; j < kRows / 2; ++j) {
    const __m512i pick = _mm512_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1,
                                          2 * j + 1, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j);
    const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * j));
    const __m512 scale = _mm512_mul_ps(_mm512_permutexvar_ps(pick, dw), dx2);
    const __m512 prev = first ? _mm512_setzero_ps() : _mm512_load_ps(acc[j]);
    _mm512_store_ps(acc[j], _mm512_fmadd_ps(isum, scale, prev));
  }
}

// C tile g = A (16 rows of block b) x B (token tile g's block b), for the first n_tiles (1..4) token tiles;
// stored to c. A goes to tmm4 or tmm5 by block parity, so that loading the next block's A need not wait for this
// block's products. (A macro: the tile intrinsics take register numbers as literal tokens.)
#define PREFACE_AMX_MULTIPLY_BLOCK(name, A)                                                                 \
  template <typename Rows>                                                                                  \
  inline void name(const Rows& rows, const uint8_t* b_tiles, size_t n_blocks, size_t b, int n_tiles,        \
                   int32_t (*c)[kRows][16]) {                                                               \
    constexpr long kTokenBytes = 64; /* B and C row bytes */                                                \
    const size_t tile_stride = n_blocks * kBTileBytes; /* between token tiles */                            \
    const uint8_t* bt = b_tiles + b * kBTileBytes;                                                          \
    size_t a_stride = 0;                                                                                    \
    const void* a = rows.a_tile(b, &a_stride);                                                              \
    _tile_loadd(A, a, static_cast<long>(a_stride));                                                         \
    _tile_zero(0);                                                                                          \
    _tile_loadd(6, bt, kTokenBytes);                                                                        \
    _tile_dpbssd(0, A, 6);                                                                                  \
    if (n_tiles > 1) {                                                                                      \
      _tile_zero(1);                                                                                        \
      _tile_loadd(7, bt + tile_stride, kTokenBytes);                                                        \
      _tile_dpbssd(1, A, 7);                                                                                \
    }                                                                                                       \
    if (n_tiles > 2) {                                                                                      \
      _tile_zero(2);                                                                                        \
      _tile_loadd(6, bt + 2 * tile_stride, kTokenBytes);                                                    \
      _tile_dpbssd(2, A, 6);                                                                                \
    }                                                                                                       \
    if (n_tiles > 3) {                                                                                      \
      _tile_zero(3);                                                                                        \
      _tile_loadd(7, bt + 3 * tile_stride, kTokenBytes);                                                    \
      _tile_dpbssd(3, A, 7);                                                                                \
    }                                                                                                       \
    _tile_stored(0, c[0], kTokenBytes);                                                                     \
    if (n_tiles > 1) _tile_stored(1, c[1], kTokenBytes);                                                    \
    if (n_tiles > 2) _tile_stored(2, c[2], kTokenBytes);                                                    \
    if (n_tiles > 3) _tile_stored(3, c[3], kTokenBytes);                                                    \
  }
PREFACE_AMX_MULTIPLY_BLOCK(multiply_block_even, 4)
PREFACE_AMX_MULTIPLY_BLOCK(multiply_block_odd, 5)
#undef PREFACE_AMX_MULTIPLY_BLOCK

// Narrow block b's products into C tile `C` (A tile `A`, B tile `B`), left in the tile: the caller stores them one
// block later, when the tile unit has finished them, so that no tile store waits on the product it stores.
#define PREFACE_AMX_NARROW_BLOCK(name, C, A, B)                                                     \
  template <typename Rows>                                                                          \
  inline void name(const Rows& rows, const uint8_t* b_tiles, size_t b) {                            \
    size_t a_stride = 0;                                                                            \
    const void* a = rows.a_tile(b, &a_stride);                                                      \
    _tile_loadd(A, a, static_cast<long>(a_stride));                                                 \
    _tile_loadd(B, b_tiles + b * kBTileBytes, 32);                                                  \
    _tile_zero(C);                                                                                  \
    _tile_dpbssd(C, A, B);                                                                          \
  }
PREFACE_AMX_NARROW_BLOCK(narrow_block_even, 0, 4, 6)
PREFACE_AMX_NARROW_BLOCK(narrow_block_odd, 1, 5, 7)
#undef PREFACE_AMX_NARROW_BLOCK

// One 16-row group against one narrow token tile (n_valid <= kNarrowTokens; B tiles [n_blocks][8][32] at block
// stride kBTileBytes, dx [n_blocks][16]): row_group's steps on [row pair][8 tokens] vectors, software-pipelined
// over three blocks so that each tile operation's inputs are ready when it issues: at step b, block b + 2 is
// unpacked, block b + 1 multiplied (C tile tmm0 / tmm1 by parity), block b's products stored, and block b - 1's
// float epilogue run.
template <typename Rows>
void row_group_narrow(Rows& rows, const uint8_t* b_tiles, const float* dx, size_t n_blocks, int n_valid, float* y,
                      size_t y_stride, const uint8_t* prefetch) {
  alignas(64) float acc[4][kRows / 2][16];  // [b % 4][row pair j][row 2j: tokens 0..7 | row 2j + 1: tokens 0..7]
  alignas(64) int32_t c[2][kRows][kNarrowTokens];  // block b's products in c[b % 2]
  const size_t n_full = n_blocks / 4 * 4;
  const auto multiply = [&](size_t b) {
    if (b % 2 == 0) {
      narrow_block_even(rows, b_tiles, b);
    } else {
      narrow_block_odd(rows, b_tiles, b);
    }
  };
  const auto combine = [&](bool any) { combine_lanes(acc[0][0], acc[1][0], acc[2][0], acc[3][0], kRows / 2, any); };
  const auto epilogue = [&](size_t b) {
    if (b == n_full) combine(n_full > 0);
    accumulate_narrow(&c[b % 2][0][0], rows.scales(b), _mm512_load_ps(dx + b * 16), b < 4 && b < n_full,
                      acc[b < n_full ? b % 4 : 0]);
  };
  rows.prepare(0);
  if (n_blocks > 1) rows.prepare(1);
  multiply(0);
  for (size_t b = 0; b < n_blocks; ++b) {
    if (b + 2 < n_blocks) rows.prepare(b + 2);
    if (b + 1 < n_blocks) multiply(b + 1);
    if (b % 2 == 0) {
      _tile_stored(0, c[0], 4 * kNarrowTokens);
    } else {
      _tile_stored(1, c[1], 4 * kNarrowTokens);
    }
    // The next row group's block b, so weights stream in from memory meanwhile.
    if (prefetch != nullptr) rows.prefetch_block(prefetch, b);
    if (b > 0) epilogue(b - 1);
  }
  epilogue(n_blocks - 1);
  if (n_full == n_blocks) combine(true);
  // y[t][r0..r0+15] = column t of acc[0], read as [16 rows][8 tokens].
  const __m512i column = output_rows(kNarrowTokens);
  for (int t = 0; t < n_valid; ++t) {
    _mm512_storeu_ps(y + static_cast<size_t>(t) * y_stride,
                     _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, column, &acc[0][0][0] + t, 4));
  }
}

// One 16-row group against up to 4 token tiles (B tiles built: [4][n_blocks][8][64], dx: [4][n_blocks][16]);
// writes the n_valid valid outputs of each row (tokens of tile g are 16 g..16 g + 15).
template <typename Rows>
void row_group(Rows& rows, const uint8_t* b_tiles, const float* dx, size_t n_blocks, int n_valid, float* y,
               size_t y_stride, const uint8_t* prefetch) {
  const int n_tiles = (n_valid + kTokens - 1) / kTokens;
  alignas(64) float acc[4][kGroups][kRows][16];  // [b % 4][token tile][row][token], written before read
  alignas(64) int32_t c[2][kGroups][kRows][16];   // by block parity: the next block's products land in the other
  alignas(64) float dw[kRows];
  const auto multiply = [&](size_t b) {
    if (b % 2 == 0) {
      multiply_block_even(rows, b_tiles, n_blocks, b, n_tiles, c[0]);
    } else {
      multiply_block_odd(rows, b_tiles, n_blocks, b, n_tiles, c[1]);
    }
  };
  const auto accumulate_block = [&](size_t b, bool first, size_t lane) {
    _mm512_store_ps(dw, rows.scales(b));
    for (int g = 0; g < n_tiles; ++g) {
      accumulate(c[b % 2][g], dw, _mm512_load_ps(dx + (static_cast<size_t>(g) * n_blocks + b) * 16), first,
                 acc[lane][g]);
    }
  };
  const auto combine = [&](bool any) {
    for (int g = 0; g < n_tiles; ++g) combine_lanes(acc[0][g][0], acc[1][g][0], acc[2][g][0], acc[3][g][0], kRows, any);
  };
  block_loop(rows, n_blocks, prefetch, multiply, accumulate_block, combine);
  // y[t][r0..r0+15] = acc[0][t / 16][0..15][t % 16]: a column of acc, gathered.
  const __m512i column = output_rows(16);
  for (int t = 0; t < n_valid; ++t) {
    const float* first = &acc[0][t / kTokens][0][t % kTokens];
    _mm512_storeu_ps(y + static_cast<size_t>(t) * y_stride,
                     _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, column, first, 4));
  }
}

template <typename Rows>
void gemm_rows(const GemmArgs& a, int64_t row_begin, int64_t row_end, uint8_t* buf) {
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const auto* x = static_cast<const BlockQ8_0*>(a.x);
  uint8_t* b_tiles = buf;                                                       // [4][n_blocks][8][64]
  auto* dx = reinterpret_cast<float*>(buf + kGroups * n_blocks * kBTileBytes);  // [4][n_blocks][16]
  auto* unpacked = reinterpret_cast<int8_t*>(dx + kGroups * n_blocks * 16);      // [3][16][32]
  constexpr int64_t kPass = kGroups * kTokens;
  const bool narrow = a.n_tokens <= kNarrowTokens;
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kPass) {
    const int n_valid = static_cast<int>(a.n_tokens - t0 < kPass ? a.n_tokens - t0 : kPass);
    for (int g = 0; g < kGroups; ++g) {
      const int in_tile = n_valid - g * kTokens;
      const int64_t tg = t0 + g * kTokens;
      const size_t t_off = static_cast<size_t>(in_tile > 0 ? tg : t0) * n_blocks;
      const int n_in_tile = in_tile < 0 ? 0 : (in_tile > kTokens ? kTokens : in_tile);
      const size_t tile_at = static_cast<size_t>(g) * n_blocks;
      build_token_tile(x + t_off, a.x_scales + t_off, n_blocks, n_in_tile, narrow, b_tiles + tile_at * kBTileBytes,
                       dx + tile_at * 16);
    }
    for (int64_t r = row_begin; r + kRows <= row_end; r += kRows) {
      Rows rows(a.w + static_cast<size_t>(r) * a.w_row_bytes, a.w_row_bytes, unpacked);
      const uint8_t* next = r + 2 * kRows <= row_end ? a.w + static_cast<size_t>(r + kRows) * a.w_row_bytes : nullptr;
      float* y = a.y + static_cast<size_t>(t0) * a.y_stride + static_cast<size_t>(r);
      if (narrow) {
        row_group_narrow(rows, b_tiles, dx, n_blocks, n_valid, y, a.y_stride, next);
      } else {
        row_group(rows, b_tiles, dx, n_blocks, n_valid, y, a.y_stride, next);
      }
    }
  }
}

// Rows [row_begin, row_begin + 16 k) with the largest such k through AMX; the rest to avx2::gemm_vnni.
void gemm_tiles(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  const int64_t amx_end = row_begin + (row_end - row_begin) / kRows * kRows;
  if (amx_end > row_begin) {
    const size_t n_blocks = args.n_cols / kQuantBlock;
    const size_t bytes = kGroups * n_blocks * (kBTileBytes + 16 * sizeof(float)) + 3 * kRows * 32;
    auto* buf = static_cast<uint8_t*>(::operator new(bytes, std::align_val_t{64}));
    const TileConfig cfg = tile_config(!args.row_groups && args.n_tokens <= kNarrowTokens);
    _tile_loadconfig(&cfg);
    if (args.row_groups) {
      gemm_packed(args, row_begin, amx_end, buf);
    } else if (args.type == gguf::TensorType::Q8_0) {
      gemm_rows<Q8Rows>(args, row_begin, amx_end, buf);
    } else {
      gemm_rows<Q4Rows>(args, row_begin, amx_end, buf);
    }
    _tile_release();
    ::operator delete(buf, std::align_val_t{64});
  }
  if (amx_end < row_end) avx2::gemm_vnni(args, amx_end, row_end);
}

}  // namespace

void gemm(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  const bool quantized = args.type == gguf::TensorType::Q8_0 || args.type == gguf::TensorType::Q4_0;
  // Packed matrices up to kNarrowTokens: the AVX-512 kernel reads row groups as they lie (faster than narrow
  // tiles, which transpose them back to rows, and than AMX with the weights as B, where one 8-row tile store per
  // 16 rows x block, serialised with the tile loads and multiplies, bounds the kernel before unpacking and the float
  // epilogue; figures in docs/perf-log/open-items.md).
  if (!quantized || args.n_tokens < kMinTokens || (args.row_groups && args.n_tokens <= kNarrowTokens)) {
    avx512::gemm_quant(args, row_begin, row_end);
  } else if (args.row_groups) {
    split_row_groups(args, row_begin, row_end, gemm_tiles, avx2::gemm_vnni);
  } else {
    gemm_tiles(args, row_begin, row_end);
  }
}

}  // namespace preface::kernels::amx
