// Packed Q4_0 and Q8_0 weights (repack.h: per 16-row group and block, the 16 f16 scales, then the rows' quant
// bytes so that a 64-byte load holds 4 consecutive bytes of each of the 16 rows in its 32-bit lanes) times Q8_0
// activations with AVX-512 VNNI, bit-identical to avx2::gemm (gemm_quant_avx2.h defines the arithmetic: exact
// integer block sums; per output acc[b % 4] = fma(f32(isum[b]), f32(d_w[b]) * f32(d_x[b]), acc[b % 4]) over
// whole groups of 4 blocks, then (acc0 + acc2) + (acc1 + acc3), then fma per remaining block).
//
// group_tile: 16 rows per register, one vpdpbusd per 4 values and no horizontal reduction (the layout's point).
// Small decode batches (Q8_0 up to 8 tokens, Q4_0 up to 4; see kSingleGroupTokens) take one 16-row group at a time
// over all tokens; larger batches take two groups at a time over slices of 4 tokens, so that each activation
// broadcast feeds two vpdpbusd (see group_block), and the pair's weights are read from memory once and from cache
// for every further slice.
//
// Standard headers come before the target pragma, and nothing here instantiates library templates, so no code
// compiled for AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/types.h"
#include "kernels/gemm.h"
#include "kernels/repack.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c,prfchw")
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

constexpr int64_t kMaxGroupTokens = 8;  // larger batches take row groups in pairs (groups_typed)

// The first value of a block's vpdpbusd chain: minus 2^kShift x the activation block's sum (x_sum), which the
// biased unsigned weights add back (see group_block), so the chain ends on the exact block sum.
template <int kShift>
inline __m512i chain_start(int32_t x_sum) {
  return _mm512_set1_epi32(-(x_sum * (1 << kShift)));
}

// group_block for one group: all 8 u_k unpacked first, then the tokens one after another, two chains each (the
// order that streams best when the weights come from memory).
template <typename Block, int T>
inline void group_block_one(const GemmArgs& a, const uint8_t* unit, size_t b, size_t n_blocks, __m512 (&acc)[T]) {
  constexpr bool kQ4 = sizeof(Block) == sizeof(BlockQ4_0);
  constexpr int kShift = kQ4 ? 3 : 7;
  const uint8_t* qs = unit + 2 * kRowGroupRows;  // after the 16 f16 scales
  __m512i u[8];
  if constexpr (kQ4) {
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(qs + 64 * k);
      u[k] = _mm512_and_si512(v, nibble);
      u[4 + k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
    }
  } else {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k) u[k] = _mm512_xor_si512(_mm512_loadu_si512(qs + 64 * k), bias);
  }
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit)));
  const auto* xq = static_cast<const BlockQ8_0*>(a.x);
  for (int t = 0; t < T; ++t) {
    const size_t xb = static_cast<size_t>(t) * n_blocks + b;
    const int8_t* x = xq[xb].qs;
    const auto piece = [x](int at) {
      int32_t v;
      std::memcpy(&v, x + at, sizeof(v));
      return _mm512_set1_epi32(v);
    };
    __m512i s_lo = chain_start<kShift>(a.x_sums[xb]), s_hi = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      s_lo = _mm512_dpbusd_epi32(s_lo, u[k], piece(4 * k));
      s_hi = _mm512_dpbusd_epi32(s_hi, u[4 + k], piece(16 + 4 * k));
    }
    const __m512i isum = _mm512_add_epi32(s_lo, s_hi);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(a.x_scales[xb])), acc[t]);
  }
}

// Packed Q4_0 / Q8_0 (repack.h): block b of G consecutive 16-row groups (units unit[0..G-1]) for tokens 0..T-1,
// fma'd into acc[g][t] (16 rows, row order). Per group, u_k holds, per 32-bit lane r, row r's values 4k..4k+3
// biased to unsigned (Q4_0: the raw nibbles, value + 8, from piece k % 4's low (k < 4) or high nibbles; Q8_0:
// piece k ^ 0x80, value + 128); one vpdpbusd per k against the token's values 4k..4k+3, broadcast, adds them to
// lane r, so the 8 add each row's exact block sum plus 2^shift x the activation block's sum; the chain starts from
// minus the latter (one integer operation per 16 outputs and block fewer). Integer sums are exact, so their order
// is free.
// Each broadcast feeds all G groups: a core that loads at most two vectors per cycle, broadcasts included, is held
// by the broadcasts alone (one per vpdpbusd) to about one vpdpbusd per cycle of its two when G = 1.
template <typename Block, int T, int G>
inline void group_block(const GemmArgs& a, const uint8_t* const* unit, size_t b, size_t n_blocks,
                        __m512 (&acc)[G][T]) {
  if constexpr (G == 1) {
    group_block_one<Block, T>(a, unit[0], b, n_blocks, acc[0]);
    return;
  }
  constexpr bool kQ4 = sizeof(Block) == sizeof(BlockQ4_0);
  constexpr int kShift = kQ4 ? 3 : 7;
  // Independent vpdpbusd chains per (group, token): enough chains in all to cover the instruction's latency.
  constexpr int kChains = G * T >= 8 ? 1 : 2;
  const auto* xq = static_cast<const BlockQ8_0*>(a.x);
  __m512i s[kChains][G][T];  // chain 0 from chain_start, the other (if any) from 0
  for (int t = 0; t < T; ++t) {
    const __m512i start = chain_start<kShift>(a.x_sums[static_cast<size_t>(t) * n_blocks + b]);
    for (int g = 0; g < G; ++g) {
      s[0][g][t] = start;
      if constexpr (kChains == 2) s[1][g][t] = _mm512_setzero_si512();
    }
  }
  for (int j = 0; j < 4; ++j) {  // values 4j..4j+3 (u_j) and 16+4j..16+4j+3 (u_{4+j})
    __m512i lo[G], hi[G];
    for (int g = 0; g < G; ++g) {
      const uint8_t* qs = unit[g] + 2 * kRowGroupRows;  // after the 16 f16 scales
      if constexpr (kQ4) {
        const __m512i nibble = _mm512_set1_epi8(0x0f);
        const __m512i v = _mm512_loadu_si512(qs + 64 * j);
        lo[g] = _mm512_and_si512(v, nibble);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
      } else {
        const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
        lo[g] = _mm512_xor_si512(_mm512_loadu_si512(qs + 64 * j), bias);
        hi[g] = _mm512_xor_si512(_mm512_loadu_si512(qs + 64 * (4 + j)), bias);
      }
    }
    for (int t = 0; t < T; ++t) {
      const int8_t* x = xq[static_cast<size_t>(t) * n_blocks + b].qs;
      int32_t piece_lo, piece_hi;
      std::memcpy(&piece_lo, x + 4 * j, sizeof(piece_lo));
      std::memcpy(&piece_hi, x + 16 + 4 * j, sizeof(piece_hi));
      const __m512i x_lo = _mm512_set1_epi32(piece_lo), x_hi = _mm512_set1_epi32(piece_hi);
      for (int g = 0; g < G; ++g) {
        s[0][g][t] = _mm512_dpbusd_epi32(s[0][g][t], lo[g], x_lo);
        s[kChains - 1][g][t] = _mm512_dpbusd_epi32(s[kChains - 1][g][t], hi[g], x_hi);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    const size_t xb = static_cast<size_t>(t) * n_blocks + b;
    const __m512 x_scale = _mm512_set1_ps(a.x_scales[xb]);
    for (int g = 0; g < G; ++g) {
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit[g])));
      const __m512i isum = kChains == 2 ? _mm512_add_epi32(s[0][g][t], s[kChains - 1][g][t]) : s[0][g][t];
      acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, x_scale), acc[g][t]);
    }
  }
}

// G consecutive packed 16-row groups from row r0 x tokens 0..T-1 -> y[t * y_stride + r0 + i]: per output the
// reference's steps (acc[b % 4] over whole groups of 4 blocks, (acc0 + acc2) + (acc1 + acc3), fma per remaining
// block), 16 rows per register. The blocks of one accumulator lane are taken together (b = lane, lane + 4, ... in
// order), so only G x T accumulators are live at a time. prefetch (or nullptr): a group to pull into L1 meanwhile.
template <typename Block, int T, int G>
void group_tile(const GemmArgs& a, int64_t r0, const uint8_t* prefetch) {
  constexpr size_t kUnitBytes = sizeof(Block) == sizeof(BlockQ4_0) ? kQ4_0UnitBytes : kQ8_0UnitBytes;
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const size_t n_full = n_blocks / 4 * 4;
  const size_t group_bytes = static_cast<size_t>(kRowGroupRows) * a.w_row_bytes;
  const uint8_t* group[G];
  for (int g = 0; g < G; ++g) group[g] = a.w + static_cast<size_t>(r0) * a.w_row_bytes + g * group_bytes;
  alignas(64) float lanes[4][G][T][16];  // [b % 4][group][token][row]
  const auto block = [&](size_t b, __m512 (&acc)[G][T]) {
    const uint8_t* unit[G];
    for (int g = 0; g < G; ++g) unit[g] = group[g] + b * kUnitBytes;
    group_block<Block, T, G>(a, unit, b, n_blocks, acc);
  };
  for (size_t lane = 0; lane < 4; ++lane) {
    __m512 acc[G][T];
    for (auto& row : acc) {
      for (__m512& v : row) v = _mm512_setzero_ps();
    }
    for (size_t b = lane; b < n_full; b += 4) {
      if (prefetch != nullptr) {
        for (size_t line = 0; line < kUnitBytes; line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(prefetch + b * kUnitBytes + line), _MM_HINT_T0);
        }
      }
      block(b, acc);
    }
    for (int g = 0; g < G; ++g) {
      for (int t = 0; t < T; ++t) _mm512_store_ps(lanes[lane][g][t], acc[g][t]);
    }
  }
  __m512 sum[G][T];
  for (int g = 0; g < G; ++g) {
    for (int t = 0; t < T; ++t) {
      sum[g][t] = _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(lanes[0][g][t]), _mm512_load_ps(lanes[2][g][t])),
                                _mm512_add_ps(_mm512_load_ps(lanes[1][g][t]), _mm512_load_ps(lanes[3][g][t])));
    }
  }
  for (size_t b = n_full; b < n_blocks; ++b) block(b, sum);
  for (int g = 0; g < G; ++g) {
    for (int t = 0; t < T; ++t) {
      _mm512_storeu_ps(a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r0 + g * kRowGroupRows),
                       sum[g][t]);
    }
  }
}

// a restricted to tokens [t0, t0 + n_tokens).
GemmArgs token_slice(const GemmArgs& a, int64_t t0, int64_t n_tokens) {
  GemmArgs s = a;
  const size_t n_blocks = a.n_cols / kQuantBlock;
  const size_t skip = static_cast<size_t>(t0) * n_blocks;
  s.x = static_cast<const BlockQ8_0*>(a.x) + skip;
  s.x_scales = a.x_scales + skip;
  s.x_sums = a.x_sums + skip;
  s.x_pairs = nullptr;
  s.y = a.y + static_cast<size_t>(t0) * a.y_stride;
  s.n_tokens = n_tokens;
  return s;
}

// G groups from row r for a.n_tokens <= kMax tokens.
template <typename Block, int G, int kMax>
void groups_tile(const GemmArgs& a, int64_t r, const uint8_t* prefetch) {
  static_assert(kMax <= 8);
  switch (a.n_tokens) {
    case 1: group_tile<Block, 1, G>(a, r, prefetch); break;
    case 2: group_tile<Block, 2, G>(a, r, prefetch); break;
    case 3: group_tile<Block, 3, G>(a, r, prefetch); break;
    case 4: group_tile<Block, (kMax < 4 ? kMax : 4), G>(a, r, prefetch); break;
    case 5: group_tile<Block, (kMax < 5 ? kMax : 5), G>(a, r, prefetch); break;
    case 6: group_tile<Block, (kMax < 6 ? kMax : 6), G>(a, r, prefetch); break;
    case 7: group_tile<Block, (kMax < 7 ? kMax : 7), G>(a, r, prefetch); break;
    default: group_tile<Block, kMax, G>(a, r, prefetch); break;
  }
}

// Small batches take groups one at a time over every token at once, prefetching the next group: weight reads bound
// them. Q8_0 does so up to kMaxGroupTokens tokens (decode): in pairs it ran no faster from memory, as the pair's
// second slice reads the pair back from L2. Q4_0 has half the bytes per value, so from 5 tokens its single-group
// kernel is bound by loads instead (one broadcast per vpdpbusd, next to the epilogue's float ops on the same
// pipes): pairs, whose broadcasts each feed two vpdpbusd, were faster at 6 - 8 tokens with the weights streamed
// from memory, and slower at 2 - 4 tokens, where their one slice prefetches half the next pair (measurements in
// docs/perf-log/session-11.md). Larger batches take pairs of groups over slices of kPairTokens tokens (see
// group_block), and a leftover single group over slices of kMaxGroupTokens.
constexpr int kPairTokens = 4;
template <typename Block>
constexpr int64_t kSingleGroupTokens = sizeof(Block) == sizeof(BlockQ4_0) ? kPairTokens : kMaxGroupTokens;

// Asks for the cache lines of y[t][r .. r + 32) of every token (a pair's outputs), for writing. Each pass after a
// GEMM reads whole output rows, so most of these lines were last read by another thread, on another core, whose
// copy a store must invalidate first; without this, a pair's stores wait for those round trips (most when the two
// cores sit on different L3s; measurements in docs/perf-log/session-13.md). Single groups (Q4_0 up to 4 tokens,
// Q8_0 up to 8) showed no gain from it. Straight-line on purpose: GCC 12 deleted a loop over the lines whose body
// held only prefetches.
inline void prefetch_pair_outputs(const GemmArgs& a, int64_t r) {
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const float* y = a.y + static_cast<size_t>(t) * a.y_stride + static_cast<size_t>(r);
    __builtin_prefetch(y, 1, 3);
    __builtin_prefetch(y + 16, 1, 3);
  }
}

// Whole packed groups [row_begin, row_end) (multiples of 16) x any number of tokens, x_sums given. Each group (or
// pair)'s weights are read from memory once, and from cache for further token slices. In decode batches each pair
// asks for the next pair's outputs (prefetch_pair_outputs; a prefill's would fill L1).
template <typename Block>
void groups_typed(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kPairRows = 2 * kRowGroupRows;
  if (a.n_tokens <= kSingleGroupTokens<Block>) {
    for (int64_t r = row_begin; r < row_end; r += kRowGroupRows) {
      const uint8_t* ahead =
          r + 2 * kRowGroupRows <= row_end ? a.w + static_cast<size_t>(r + kRowGroupRows) * a.w_row_bytes : nullptr;
      groups_tile<Block, 1, kMaxGroupTokens>(a, r, ahead);
    }
    return;
  }
  const bool ask_outputs = a.n_tokens <= kMaxGroupTokens;
  int64_t r = row_begin;
  for (; r + kPairRows <= row_end; r += kPairRows) {
    const bool next_pair = r + 2 * kPairRows <= row_end;
    if (ask_outputs && next_pair) prefetch_pair_outputs(a, r + kPairRows);
    const uint8_t* ahead = next_pair ? a.w + static_cast<size_t>(r + kPairRows) * a.w_row_bytes : nullptr;
    // The next pair is prefetched over the first two slices (of at least three), one group each.
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kPairTokens) {
      const GemmArgs s = token_slice(a, t0, std::min<int64_t>(kPairTokens, a.n_tokens - t0));
      const int64_t slice = t0 / kPairTokens;
      const uint8_t* group_ahead =
          ahead != nullptr && slice < 2 ? ahead + static_cast<size_t>(slice * kRowGroupRows) * a.w_row_bytes : nullptr;
      groups_tile<Block, 2, kPairTokens>(s, r, group_ahead);
    }
  }
  if (r < row_end) {
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kMaxGroupTokens) {
      const GemmArgs s = token_slice(a, t0, std::min<int64_t>(kMaxGroupTokens, a.n_tokens - t0));
      groups_tile<Block, 1, kMaxGroupTokens>(s, r, nullptr);
    }
  }
}

}  // namespace

void gemm_groups(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == gguf::TensorType::Q8_0) {
    groups_typed<BlockQ8_0>(a, row_begin, row_end);
  } else {
    groups_typed<BlockQ4_0>(a, row_begin, row_end);
  }
}

}  // namespace preface::kernels::avx512
