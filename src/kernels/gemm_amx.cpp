// Quantized GEMM with AMX int8 tiles, bit-identical to avx2::gemm (see gemm_avx2.cpp for the arithmetic).
//
// The AVX2 kernels form, per (weight row, token, block), 8 lane sums (lane j = products 4j..4j+3) and accumulate
// them in 8 float lanes. AMX computes them exactly as C = A * B with
//   A: 16 weight rows x one block's 32 int8 values,
//   B: one block of a token pair spread over 16 columns: column 8u + j holds the 4 values 4j..4j+3 of token u
//      in K-row j and zeros in the other K-rows (so column 8u + j sums exactly lane j's 4 products),
// so C row r = [8 lane sums of token 0 | 8 lane sums of token 1], the AVX2 lanes in the same places. The float
// epilogue then applies, per output lane, the same fma(f32(isum), f32(d_w) * f32(d_x), acc) in block order and
// the same final hsum. Q4_0 weights are unpacked to int8 (value - 8) first; products are exact either way.
//
// Rows in whole groups of 16 and tokens in groups of 8 (the last group zero-padded; padded outputs are not
// stored) go through AMX; leftover rows go to avx2::gemm_vnni. Tile state is configured at entry and released
// at exit, so nothing leaks between calls. Only called where the CPU has AMX-INT8, AVX-512 and AVX-VNNI and the
// OS granted tile data (see dispatch.cpp).
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

#pragma GCC target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
// GCC 12's AVX-512 conversion intrinsics pass _mm512_undefined_ps() as the masked-off source, which
// -Wmaybe-uninitialized reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace preface::kernels::amx {
namespace {

using gguf::BlockQ4_0;
using gguf::BlockQ8_0;
using gguf::kQuantBlock;

constexpr int kRows = 16;           // weight rows per tile
constexpr int64_t kMinTokens = 16;  // smaller batches (decode) take the AVX2 kernels
constexpr int kPairs = 4;           // token pairs per pass: C tiles tmm0..tmm3
constexpr int kTokens = 2 * kPairs;
constexpr size_t kBTileBytes = 8 * 64;  // 8 K-rows x 64 bytes

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// tmm0..3: C, 16 rows x 16 int32; tmm4: A, 16 rows x 32 bytes; tmm5..7: B, 8 rows x 64 bytes.
TileConfig tile_config() {
  TileConfig c;
  for (int i = 0; i < 4; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = 64;
  }
  c.rows[4] = 16;
  c.colsb[4] = 32;
  for (int i = 5; i < 8; ++i) {
    c.rows[i] = 8;
    c.colsb[i] = 64;
  }
  return c;
}

// The B tile of one block for tokens (u0, u1) (u1 may be null: zeros). dst: [8][64] bytes.
void build_b_tile(const BlockQ8_0* u0, const BlockQ8_0* u1, uint8_t* dst) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u0->qs));
  const __m256i hi = u1 != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u1->qs))
                                   : _mm256_setzero_si256();
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);  // dword 8u + j: token u, group j
  for (int j = 0; j < 8; ++j) {
    const __mmask16 keep = static_cast<__mmask16>((1u << j) | (1u << (8 + j)));
    _mm512_storeu_si512(dst + 64 * j, _mm512_maskz_mov_epi32(keep, both));
  }
}

// AVX2's hsum of 8 lanes: (lo + hi), then pairs, then the last two.
float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Weight row access for one 16-row group: A tile of block b and f32 scales.
struct Q8Rows {
  Q8Rows(const uint8_t* first_row, size_t bytes, int8_t* /*unpack_buf*/) : w(first_row), row_bytes(bytes) {}
  const uint8_t* w;  // first row
  size_t row_bytes;
  void prepare(size_t /*n_blocks*/) {}
  const void* a_tile(size_t b, size_t* stride) const {
    *stride = row_bytes;
    return w + b * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs);
  }
  uint16_t d(int r, size_t b) const {
    uint16_t h;
    std::memcpy(&h, w + static_cast<size_t>(r) * row_bytes + b * sizeof(BlockQ8_0), sizeof(h));
    return h;
  }
};

struct Q4Rows {
  Q4Rows(const uint8_t* first_row, size_t bytes, int8_t* unpack_buf)
      : w(first_row), row_bytes(bytes), unpacked(unpack_buf) {}
  const uint8_t* w;
  size_t row_bytes;
  int8_t* unpacked;  // [n_blocks][16 rows][32] values - 8
  void prepare(size_t n_blocks) {
    for (size_t b = 0; b < n_blocks; ++b) {
      for (int r = 0; r < kRows; ++r) {
        const auto* blk = reinterpret_cast<const BlockQ4_0*>(w + static_cast<size_t>(r) * row_bytes) + b;
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
        const __m256i nib =
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0f));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(unpacked + (b * kRows + static_cast<size_t>(r)) * 32),
                            _mm256_sub_epi8(nib, _mm256_set1_epi8(8)));
      }
    }
  }
  const void* a_tile(size_t b, size_t* stride) const {
    *stride = 32;
    return unpacked + b * kRows * 32;
  }
  uint16_t d(int r, size_t b) const {
    uint16_t h;
    std::memcpy(&h, w + static_cast<size_t>(r) * row_bytes + b * sizeof(BlockQ4_0), sizeof(h));
    return h;
  }
};

// f32 of block b's scale for the 16 rows.
template <typename Rows>
__m512 row_scales(const Rows& rows, size_t b) {
  alignas(32) uint16_t h[kRows];
  for (int r = 0; r < kRows; ++r) h[r] = rows.d(r, b);
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// One 16-row group against one group of up to 8 tokens (b_tiles built), writing the valid outputs.
template <typename Rows>
void row_group(Rows& rows, const uint8_t* b_tiles, const float* x_scales, size_t n_blocks, int64_t t0,
               int n_valid, float* y, size_t y_stride) {
  alignas(64) float acc[kRows][kPairs][16] = {};  // [r][pair] = [token 2p lanes | token 2p + 1 lanes]
  alignas(64) int32_t c[kPairs][kRows][16];
  alignas(64) float dw[kRows];
  for (size_t b = 0; b < n_blocks; ++b) {
    size_t a_stride = 0;
    const void* a = rows.a_tile(b, &a_stride);
    _tile_loadd(4, a, static_cast<long>(a_stride));
    const uint8_t* bt = b_tiles + b * kPairs * kBTileBytes;  // [pair][8][64]
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(5, bt, 64);
    _tile_dpbssd(0, 4, 5);
    _tile_loadd(6, bt + kBTileBytes, 64);
    _tile_dpbssd(1, 4, 6);
    _tile_loadd(7, bt + 2 * kBTileBytes, 64);
    _tile_dpbssd(2, 4, 7);
    _tile_loadd(5, bt + 3 * kBTileBytes, 64);
    _tile_dpbssd(3, 4, 5);
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
    _mm512_store_ps(dw, row_scales(rows, b));
    for (int p = 0; p < kPairs; ++p) {
      const int u0 = 2 * p, u1 = 2 * p + 1;
      const float dx0 = u0 < n_valid ? x_scales[static_cast<size_t>(t0 + u0) * n_blocks + b] : 0.0f;
      const float dx1 = u1 < n_valid ? x_scales[static_cast<size_t>(t0 + u1) * n_blocks + b] : 0.0f;
      const __m512 dx = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(dx0)), _mm256_set1_ps(dx1), 1);
      for (int r = 0; r < kRows; ++r) {
        const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(c[p][r]));
        const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(dw[r]), dx);
        _mm512_store_ps(acc[r][p], _mm512_fmadd_ps(isum, scale, _mm512_load_ps(acc[r][p])));
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int u = 0; u < n_valid; ++u) {
      const __m256 lanes = _mm256_load_ps(acc[r][u / 2] + 8 * (u % 2));
      y[static_cast<size_t>(t0 + u) * y_stride + static_cast<size_t>(r)] = hsum8(lanes);
    }
  }
}

template <typename Rows>
void gemm_rows(const GemmArgs& a, int64_t row_begin, int64_t row_end, int8_t* unpack_buf) {
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const auto* x = static_cast<const BlockQ8_0*>(a.x);
  auto* b_tiles = static_cast<uint8_t*>(::operator new(n_blocks * kPairs * kBTileBytes, std::align_val_t{64}));
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTokens) {
    const int n_valid = static_cast<int>(a.n_tokens - t0 < kTokens ? a.n_tokens - t0 : kTokens);
    for (size_t b = 0; b < n_blocks; ++b) {
      for (int p = 0; p < kPairs; ++p) {
        const int u0 = 2 * p, u1 = 2 * p + 1;
        uint8_t* dst = b_tiles + (b * kPairs + static_cast<size_t>(p)) * kBTileBytes;
        if (u0 >= n_valid) {
          std::memset(dst, 0, kBTileBytes);
          continue;
        }
        const BlockQ8_0* x0 = x + static_cast<size_t>(t0 + u0) * n_blocks + b;
        build_b_tile(x0, u1 < n_valid ? x0 + n_blocks : nullptr, dst);
      }
    }
    for (int64_t r = row_begin; r + kRows <= row_end; r += kRows) {
      Rows rows(a.w + static_cast<size_t>(r) * a.w_row_bytes, a.w_row_bytes, unpack_buf);
      rows.prepare(n_blocks);
      row_group(rows, b_tiles, a.x_scales, n_blocks, t0, n_valid, a.y + static_cast<size_t>(r), a.y_stride);
    }
  }
  ::operator delete(b_tiles, std::align_val_t{64});
}

}  // namespace

void gemm(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  const bool quantized = args.type == gguf::TensorType::Q8_0 || args.type == gguf::TensorType::Q4_0;
  if (!quantized || args.n_tokens < kMinTokens) {
    avx2::gemm_vnni(args, row_begin, row_end);
    return;
  }
  const int64_t amx_end = row_begin + (row_end - row_begin) / kRows * kRows;
  if (amx_end > row_begin) {
    const TileConfig cfg = tile_config();
    _tile_loadconfig(&cfg);
    if (args.type == gguf::TensorType::Q8_0) {
      gemm_rows<Q8Rows>(args, row_begin, amx_end, nullptr);
    } else {
      const size_t bytes = args.n_cols / kQuantBlock * kRows * 32;
      auto* unpack = static_cast<int8_t*>(::operator new(bytes, std::align_val_t{64}));
      gemm_rows<Q4Rows>(args, row_begin, amx_end, unpack);
      ::operator delete(unpack, std::align_val_t{64});
    }
    _tile_release();
  }
  if (amx_end < row_end) avx2::gemm_vnni(args, amx_end, row_end);
}

}  // namespace preface::kernels::amx
