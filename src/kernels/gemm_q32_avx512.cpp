// GEMM for Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights with vpdpbusd in its EVEX form (AVX512-VNNI): batches below
// kTokenLaneMin tokens run gemm_q32_avx2.h's tiles (256-bit registers, one instruction per 32 products where AVX2
// needs two, IQ4_NL's levels biased to unsigned instead of the sign trick), larger ones the token-lane tiles
// below. Every output the bits of the scalar traits dot.
// Only called where avx512::quant_available().
//
// Standard headers come before the target pragma and the tile header after it has internal linkage, so no code
// compiled for AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "util/fp16.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/gemm_q32_avx2.h"  // after the target pragma: its inline code is compiled for AVX-512 VNNI
#include "kernels/lanes_avx512.h"

namespace preface::kernels::avx512 {
namespace {

struct EvexVnniQ32Isa {  // vpdpbusd (EVEX): the 4 products of each lane summed in 32 bits, no saturation
  static constexpr bool kWideU8 = true;
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
};

// Token-lane tiles, for batches of kTokenLaneMin tokens or more: lane t of a 512-bit register is token 16g + t of
// token group g, so that a row's block sum for 16 tokens is 8 vpdpbusd of its levels (4 at a time, broadcast)
// against the group's activations transposed, with no horizontal reduction; the float operations are the scalar
// dot's, lane by lane, in block order, so every output is again the bits of the scalar traits dot.
constexpr int64_t kTokenLaneMin = 4;
constexpr int kLaneRows = 4;        // rows per token-lane tile (8 activation registers + 4 accumulators)
constexpr int64_t kLaneRowBlock = 16;  // rows whose weights stay in L1 while every token group passes

// The activations of one call in token-lane order. For token group g and block b (i = g * n_blocks + b):
// x[(i * 8 + k) * 64 + 4t + j] = value 4k + j of token 16g + t's block b; dx[i * 16 + t] = f32 of its d (as the
// scalar dot converts it); sum[i * 16 + t] = the sum of its 32 values. Tokens past n_tokens are zero.
// levels: the current row block's unsigned levels, [row - rb][block][8 x 4 bytes], unpacked once for every token
// group (lane_levels).
struct LaneActs {
  std::vector<int8_t> x;
  std::vector<float> dx;
  std::vector<int32_t> sum;
  std::vector<uint32_t> levels;
  int64_t rb = 0;  // the row block's first row
};

void prepare_lane_acts(const GemmArgs& a, LaneActs& acts) {
  const size_t n_blocks = a.n_cols / kQuantBlock, n_tokens = static_cast<size_t>(a.n_tokens);
  const size_t n_groups = (n_tokens + kLanes - 1) / kLanes;
  acts.x.assign(n_groups * n_blocks * kLanes * kQuantBlock, 0);
  acts.dx.assign(n_groups * n_blocks * kLanes, 0.0f);
  acts.sum.assign(n_groups * n_blocks * kLanes, 0);
  for (size_t t = 0; t < n_tokens; ++t) {
    const auto* x = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(a.x) + t * a.x_row_bytes);
    const size_t g = t / kLanes, lane = t % kLanes;
    for (size_t b = 0; b < n_blocks; ++b) {
      const size_t i = g * n_blocks + b;
      int8_t* out = acts.x.data() + i * kLanes * kQuantBlock + 4 * lane;
      int32_t s = 0;
      for (size_t k = 0; k < 8; ++k) {
        std::memcpy(out + 64 * k, x[b].qs + 4 * k, 4);
        for (size_t j = 0; j < 4; ++j) s += x[b].qs[4 * k + j];
      }
      acts.dx[i * kLanes + lane] = f16_to_f32(x[b].d);
      acts.sum[i * kLanes + lane] = s;
    }
  }
}

// Unpacks rows [rb, re) into acts.levels.
template <typename K>
void lane_levels(const GemmArgs& a, LaneActs& acts, int64_t rb, int64_t re) {
  using Block = typename K::Block;
  const size_t n_blocks = a.n_cols / kQuantBlock;
  acts.rb = rb;
  acts.levels.resize(static_cast<size_t>(re - rb) * n_blocks * 8);
  for (int64_t r = rb; r < re; ++r) {
    const auto* w = reinterpret_cast<const Block*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    uint32_t* out = acts.levels.data() + static_cast<size_t>(r - rb) * n_blocks * 8;
    for (size_t b = 0; b < n_blocks; ++b) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * b), K::template levels<EvexVnniQ32Isa>(w[b]));
    }
  }
}

// Outputs y[16g + t][r0 + r] for r < R and the group's first n_valid tokens (rows within acts' row block).
template <typename K, int R>
void lane_tile(const GemmArgs& a, const LaneActs& acts, int64_t r0, size_t g, int n_valid) {
  using Block = typename K::Block;
  using Isa = EvexVnniQ32Isa;
  constexpr int kShift = K::template kShift<Isa>;
  static_assert(!K::template kSigned<Isa>);
  constexpr bool kSums = kShift >= 0 || K::kMin;
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const Block* w[R];
  const uint32_t* lv[R];  // [block][8]
  for (int r = 0; r < R; ++r) {
    w[r] = reinterpret_cast<const Block*>(a.w + static_cast<size_t>(r0 + r) * a.w_row_bytes);
    lv[r] = acts.levels.data() + static_cast<size_t>(r0 + r - acts.rb) * n_blocks * 8;
  }
  __m512 acc[R];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  for (size_t b = 0; b < n_blocks; ++b) {
    const size_t i = g * n_blocks + b;
    const int8_t* xg = acts.x.data() + i * kLanes * kQuantBlock;
    __m512i xv[8];
    for (int k = 0; k < 8; ++k) xv[k] = _mm512_loadu_si512(xg + 64 * k);
    const __m512 vdx = _mm512_loadu_ps(acts.dx.data() + i * kLanes);
    __m512i xsum = _mm512_setzero_si512();
    if constexpr (kSums) xsum = _mm512_loadu_si512(acts.sum.data() + i * kLanes);
    for (int r = 0; r < R; ++r) {
      const uint32_t* u = lv[r] + 8 * b;  // the row's 32 unsigned levels, 4 per broadcast
      __m512i isum = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) isum = _mm512_dpbusd_epi32(isum, _mm512_set1_epi32(static_cast<int>(u[k])), xv[k]);
      if constexpr (kShift >= 0) isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(xsum, kShift));
      const __m512 vd = _mm512_set1_ps(avx2::scale_f32(w[r][b]));
      __m512 term = _mm512_mul_ps(_mm512_mul_ps(vd, vdx), _mm512_cvtepi32_ps(isum));
      if constexpr (K::kMin) {
        const float m = _cvtsh_ss(avx2::m_bits(w[r][b]));
        if (!(m == 0.0f)) {  // as the scalar dot: the m term only where m != 0 (NaN included)
          term = _mm512_add_ps(term, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(m), vdx), _mm512_cvtepi32_ps(xsum)));
        }
      }
      acc[r] = _mm512_add_ps(acc[r], term);
    }
  }
  store_lanes<R>(a, acc, r0, g, n_valid);
}

template <typename K>
void gemm_lanes(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  thread_local LaneActs acts;  // one per thread: grows to the largest call, reused
  prepare_lane_acts(a, acts);
  for_each_lane_tile<kLaneRows, kLaneRowBlock>(
      a.n_tokens, row_begin, row_end, [&](int64_t rb, int64_t re) { lane_levels<K>(a, acts, rb, re); },
      [&]<int R>(int64_t r, size_t g, int n_valid) { lane_tile<K, R>(a, acts, r, g, n_valid); });
}

}  // namespace

void gemm_q32(const GemmArgs& args, int64_t row_begin, int64_t row_end) {
  if (args.n_tokens >= kTokenLaneMin) {
    switch (args.type) {
      case gguf::TensorType::Q4_1: return gemm_lanes<avx2::Q41>(args, row_begin, row_end);
      case gguf::TensorType::Q5_0: return gemm_lanes<avx2::Q50>(args, row_begin, row_end);
      case gguf::TensorType::Q5_1: return gemm_lanes<avx2::Q51>(args, row_begin, row_end);
      case gguf::TensorType::IQ4_NL: return gemm_lanes<avx2::IQ4NL>(args, row_begin, row_end);
      case gguf::TensorType::MXFP4: return gemm_lanes<avx2::MXFP4>(args, row_begin, row_end);
      default: break;
    }
  }
  if (!avx2::gemm_q32_tiles<EvexVnniQ32Isa>(args, row_begin, row_end)) scalar::gemm_traits(args, row_begin, row_end);
}

}  // namespace preface::kernels::avx512
