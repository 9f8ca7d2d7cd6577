// Shared by the AMX kernels (gemm_amx.cpp, gemm_amx_packed.cpp): tile shapes, the lane combination of the
// reference arithmetic, the pipelined block loop of a row group, and the packed-group path's entry. Included
// after a TU's target pragma, so that its inline code is compiled for AMX / AVX-512; internal linkage (see
// simd_avx2.h). Includes nothing itself: the includer brings <immintrin.h>, <cstddef>, <cstdint> and
// kernels/gemm.h before its pragma.
#pragma once

namespace preface::kernels::amx {
namespace {

constexpr int kRows = 16;               // weight rows per tile
constexpr int kTokens = 16;             // tokens per tile
constexpr int kGroups = 4;              // token tiles per pass over the weights: C tiles tmm0..tmm3
constexpr size_t kBTileBytes = 8 * 64;  // a [8][64] tile; narrow B tiles use the first half, A tiles [16][32] all

// lane0 = (lane0 + lane2) + (lane1 + lane3) over n_vectors 16-float vectors of the four accumulator lanes; +0 when
// no whole group of 4 blocks exists (the lanes never written).
inline void combine_lanes(float* lane0, const float* lane1, const float* lane2, const float* lane3, int n_vectors,
                          bool any) {
  for (int v = 0; v < 16 * n_vectors; v += 16) {
    __m512 sum = _mm512_setzero_ps();
    if (any) {
      const __m512 s02 = _mm512_add_ps(_mm512_load_ps(lane0 + v), _mm512_load_ps(lane2 + v));
      const __m512 s13 = _mm512_add_ps(_mm512_load_ps(lane1 + v), _mm512_load_ps(lane3 + v));
      sum = _mm512_add_ps(s02, s13);
    }
    _mm512_store_ps(lane0 + v, sum);
  }
}

// The block loop of one 16-row group against its token tiles (row_group, packed_row_group), software-pipelined so
// that each tile operation's inputs are ready when it issues: at step b, block b + 2 is prepared (w.prepare:
// unpacked, where the weights need it), block b + 1 multiplied into the C tiles of its parity, the next row
// group's block b prefetched (when `prefetch` is not null), and block b's products accumulated. It also fixes the
// order of the reference's float steps: blocks of whole groups of 4 go to accumulator lane b % 4 (`first`: the
// lane's first block, so its accumulator is set rather than read), then combine(any) forms lane 0 =
// (lane 0 + lane 2) + (lane 1 + lane 3) (any: some whole group exists), and the remaining blocks go to lane 0.
//   w: prepare(b), prefetch_block(prefetch, b); multiply(b); accumulate(b, first, lane); combine(any).
template <typename Weights, typename Multiply, typename Accumulate, typename Combine>
inline void block_loop(Weights& w, size_t n_blocks, const uint8_t* prefetch, const Multiply& multiply,
                       const Accumulate& accumulate, const Combine& combine) {
  const size_t n_full = n_blocks / 4 * 4;
  w.prepare(0);
  if (n_blocks > 1) w.prepare(1);
  multiply(0);
  for (size_t b = 0; b < n_blocks; ++b) {
    if (b == n_full) combine(n_full > 0);
    if (b + 2 < n_blocks) w.prepare(b + 2);
    if (b + 1 < n_blocks) multiply(b + 1);  // issued first, so the tile unit works during this block's epilogue
    if (prefetch != nullptr) w.prefetch_block(prefetch, b);
    accumulate(b, b < 4 && b < n_full, b < n_full ? b % 4 : 0);
  }
  if (n_full == n_blocks) combine(true);
}

}  // namespace

// Whole packed groups [row_begin, row_end) x all tokens (gemm_amx_packed.cpp), under the wide tile configuration
// (C tmm0..3 16 x 64 bytes, tmm4, 5 16 x 32, tmm6, 7 8 x 64). buf: kGroups * n_blocks * (kBTileBytes + 16 floats)
// + 3 * kBTileBytes bytes, 64-byte aligned.
void gemm_packed(const GemmArgs& a, int64_t row_begin, int64_t row_end, uint8_t* buf);

}  // namespace preface::kernels::amx
