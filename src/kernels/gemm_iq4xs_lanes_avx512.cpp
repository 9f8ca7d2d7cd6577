// Token-lane GEMM tiles for IQ4_XS weights (Q8_K activations) on AVX-512 VNNI, for batches of kLaneMinTokens (12)
// or more: lane t of a 512-bit register is token 16g + t of token group g. The activations are transposed once per
// call so that one register holds 4 consecutive values of each of 16 tokens; a row's 32-value group then sums
// over 16 tokens in 8 vpdpbusd of its levels (+ 128, unsigned) broadcast 4 at a time, with no horizontal sums,
// where the 8-output tiles of gemm_k_avx512.cpp need three operations per row, token and 64 values plus a
// reduction per super-block.
//
// Exactness: per output and super-block, isum = sum over groups of scale * (sum(u * x) - 128 * sum(x)) is the exact
// int32 the scalar dot forms (quant_dot.cpp dot_k), and the float step acc += (d * x.d) * isum runs lane by lane in
// super-block order, so every output is the bits of scalar::dot_iq4_xs of its row and token.
//
// Only called where avx512::quant_available(). Standard headers come before the target pragma; the tile header
// after it has internal linkage.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/quant.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/gemm_q32_avx2.h"  // nibbles_32; after the target pragma: compiled for AVX-512 here
#include "kernels/lanes_avx512.h"

namespace preface::kernels::avx512 {
namespace {

// Below, the 8-output tiles are as fast or faster: a 16-lane tile costs about the same however few lanes are used.
constexpr int64_t kLaneMinTokens = 12;
constexpr int kLaneRows = 4;           // rows per tile (8 activation registers + 4 accumulators)
constexpr int64_t kLaneRowBlock = 16;  // rows whose weights stay in L1 while every token group passes
constexpr size_t kGroups = kQK / 32;   // 32-value groups per super-block, one scale each

// The activations of one call in token-lane order. For token group g and super-block b (i = g * n_sb + b), group
// gi and k < 8: x[((i * 8 + gi) * 8 + k) * 64 + 4t + j] = value 32 gi + 4k + j of token 16g + t; bias[(i * 8 + gi)
// * 16 + t] = 128 * the sum of that group's 32 values; dx[i * 16 + t] = the super-block's d. Tokens past n_tokens
// are zero. levels, scales: the current row block's unsigned levels [row - rb][super-block][64 x 4 bytes] and group
// scales [row - rb][super-block][8], unpacked once for every token group (lane_levels).
struct LaneActs {
  std::vector<int8_t> x;
  std::vector<int32_t> bias;
  std::vector<float> dx;
  std::vector<uint32_t> levels;
  std::vector<int32_t> scales;
  int64_t rb = 0;  // the row block's first row
};

void prepare(const GemmArgs& a, LaneActs& acts) {
  const size_t n_sb = a.n_cols / kQK, n_tokens = static_cast<size_t>(a.n_tokens);
  const size_t n_groups = (n_tokens + kLanes - 1) / kLanes;
  acts.x.assign(n_groups * n_sb * kQK * kLanes, 0);
  acts.bias.assign(n_groups * n_sb * kGroups * kLanes, 0);
  acts.dx.assign(n_groups * n_sb * kLanes, 0.0f);
  for (size_t t = 0; t < n_tokens; ++t) {
    const auto* x = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a.x) + t * a.x_row_bytes);
    const size_t g = t / kLanes, lane = t % kLanes;
    for (size_t b = 0; b < n_sb; ++b) {
      const size_t i = g * n_sb + b;
      int8_t* out = acts.x.data() + i * kQK * kLanes + 4 * lane;
      for (size_t q = 0; q < kQK / 4; ++q) std::memcpy(out + 64 * q, x[b].qs + 4 * q, 4);
      for (size_t gi = 0; gi < kGroups; ++gi) {
        acts.bias[(i * kGroups + gi) * kLanes + lane] = 128 * (x[b].bsums[2 * gi] + x[b].bsums[2 * gi + 1]);
      }
      acts.dx[i * kLanes + lane] = x[b].d;
    }
  }
}

// Unpacks rows [rb, re) into acts.levels (the table's levels + 128, v ^ 0x80: unsigned operands for vpdpbusd) and
// acts.scales.
void lane_levels(const GemmArgs& a, LaneActs& acts, int64_t rb, int64_t re) {
  const size_t n_sb = a.n_cols / kQK, rows = static_cast<size_t>(re - rb);
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  const __m256i table = _mm256_broadcastsi128_si256(_mm_xor_si128(t, _mm_set1_epi8(static_cast<char>(0x80))));
  acts.rb = rb;
  acts.levels.resize(rows * n_sb * kQK / 4);
  acts.scales.resize(rows * n_sb * kGroups);
  for (size_t r = 0; r < rows; ++r) {
    const auto* w = reinterpret_cast<const BlockIQ4_XS*>(a.w + (static_cast<size_t>(rb) + r) * a.w_row_bytes);
    for (size_t b = 0; b < n_sb; ++b) {
      uint32_t* u = acts.levels.data() + (r * n_sb + b) * (kQK / 4);
      for (size_t gi = 0; gi < kGroups; ++gi) {
        const __m256i lv = _mm256_shuffle_epi8(table, avx2::nibbles_32(w[b].qs + 16 * gi));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + 8 * gi), lv);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acts.scales.data() + (r * n_sb + b) * kGroups),
                          _mm256_cvtepi16_epi32(iq4xs_scales16(w[b])));
    }
  }
}

// Outputs y[16g + t][r0 + r] for r < R and the group's first n_valid tokens.
template <int R>
void lane_tile(const GemmArgs& a, const LaneActs& acts, int64_t r0, size_t g, int n_valid) {
  const size_t n_sb = a.n_cols / kQK;
  const BlockIQ4_XS* w[R];
  const uint32_t* lv[R];  // [super-block][64]: 4 levels per broadcast
  const int32_t* lsc[R];  // [super-block][8]
  for (int r = 0; r < R; ++r) {
    w[r] = reinterpret_cast<const BlockIQ4_XS*>(a.w + static_cast<size_t>(r0 + r) * a.w_row_bytes);
    const size_t row = static_cast<size_t>(r0 + r - acts.rb);
    lv[r] = acts.levels.data() + row * n_sb * (kQK / 4);
    lsc[r] = acts.scales.data() + row * n_sb * kGroups;
  }
  __m512 acc[R];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  for (size_t b = 0; b < n_sb; ++b) {
    const size_t i = g * n_sb + b;
    __m512i isum[R];
    for (__m512i& v : isum) v = _mm512_setzero_si512();
    for (size_t gi = 0; gi < kGroups; ++gi) {
      const int8_t* xg = acts.x.data() + (i * kGroups + gi) * 8 * 64;
      __m512i xv[8];
      for (int k = 0; k < 8; ++k) xv[k] = _mm512_loadu_si512(xg + 64 * k);
      const __m512i bias = _mm512_loadu_si512(acts.bias.data() + (i * kGroups + gi) * kLanes);
      for (int r = 0; r < R; ++r) {
        __m512i s = _mm512_setzero_si512();
        for (int k = 0; k < 8; ++k) {
          s = _mm512_dpbusd_epi32(s, _mm512_set1_epi32(static_cast<int>(lv[r][b * (kQK / 4) + 8 * gi + k])), xv[k]);
        }
        const __m512i group = _mm512_sub_epi32(s, bias);  // sum(v * x) over the group, v = u - 128
        isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(group, _mm512_set1_epi32(lsc[r][b * kGroups + gi])));
      }
    }
    const __m512 vdx = _mm512_loadu_ps(acts.dx.data() + i * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512 vd = _mm512_set1_ps(_cvtsh_ss(w[r][b].d));  // F16C: exact, as f16_to_f32 for finite values
      acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_mul_ps(vd, vdx), _mm512_cvtepi32_ps(isum[r])));
    }
  }
  store_lanes<R>(a, acc, r0, g, n_valid);
}

}  // namespace

bool gemm_iq4xs_lanes(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type != gguf::TensorType::IQ4_XS || a.n_tokens < kLaneMinTokens) return false;
  thread_local LaneActs acts;  // one per thread: grows to the largest call, reused
  prepare(a, acts);
  for_each_lane_tile<kLaneRows, kLaneRowBlock>(
      a.n_tokens, row_begin, row_end, [&](int64_t rb, int64_t re) { lane_levels(a, acts, rb, re); },
      [&]<int R>(int64_t r, size_t g, int n_valid) { lane_tile<R>(a, acts, r, g, n_valid); });
  return true;
}

}  // namespace preface::kernels::avx512
