// The driver and shared pieces of the packed K-quant kernels (gemm_k_groups_avx512.cpp: Q4_K, Q5_K, IQ4_XS;
// gemm_k16_groups_avx512.cpp: Q2_K, Q3_K, Q6_K): per 16-row group (repack.h) and tile of up to 8 tokens, lane r of
// every register is row r. A type K provides
//   kMin, kBias:             whether the bsum term is a min (subtracted after the float step) or a level bias
//                            (isum -= bsum term << kBiasShift, defined with kBias), or neither;
//   prep(unit, Prep&):       the rows' scales, bsum weights and f16 scales of one super-block;
//   sums<T>(unit, x, p, isum): isum[t] += sum over scale groups of scale x (the group's level sum with token t).
// Exactness: see gemm_k_groups_avx512.cpp.
//
// Internal linkage: include only after an AVX-512 target pragma.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/gemm.h"
#include "kernels/quant_blocks.h"
#include "kernels/repack.h"

namespace preface::kernels::avx512 {
namespace {

constexpr int kMaxTokens = 8;  // tokens per tile: their sums share each unpacked level vector
// Units fetched ahead of the one being read: a unit's pieces are not read in address order (scales first, Q6_K's
// levels from three places), which the hardware prefetchers follow poorly when weights stream from L3 or DRAM.
constexpr size_t kPrefetchUnits = 2;

// What a 16-row group contributes to one super-block, lane r = row r: each scale group's int32 scale, the int16
// pairs that weight the activations' bsums 2i and 2i + 1 (the mins of the types with a min, the scales of those
// with a level bias), and the f16 scales as f32.
struct Prep {
  __m512i scale[16];
  __m512i bsum_w[8];
  __m512 d, dmin;
};

inline __m512i piece(const uint8_t* unit, int k) { return _mm512_loadu_si512(unit + 64 * k); }

// The 32-bit piece of x at byte `at`, in every lane.
inline __m512i bcast(const int8_t* x, int at) {
  int32_t v;
  std::memcpy(&v, x + at, sizeof(v));
  return _mm512_set1_epi32(v);
}

// fn(t0, n) for the tile's tokens in slices of kSlice (n = min(kSlice, T), a std::integral_constant, so that
// arrays of n accumulators stay in registers): the slice's accumulators are independent chains, enough of them
// in flight to cover vpdpbusd's latency while the level vectors stay loaded.
template <int T, int kSlice, typename Fn>
inline void for_token_slices(Fn fn) {
  constexpr int kN = T < kSlice ? T : kSlice;
  static_assert(T % kN == 0);
  for (int t0 = 0; t0 < T; t0 += kN) fn(t0, std::integral_constant<int, kN>{});
}

inline __m512i byte_set(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }

// The low 16 bits of each 32-bit lane, as 16 f32.
inline __m512 f16_low(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }

// Lanes (v & 0xffff) | (w << 16): the int16 pair {v, w}.
inline __m512i pair16(__m512i v, __m512i w) {
  return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(w, 16));
}

// y[t0 + t][r0 .. r0 + 15] for t < T: the 16 rows of the group at `group` (n_blocks units). prefetch: fetch
// units ahead (the group's first token tile; later tiles find the group's units in cache).
template <typename K, int T>
void group_tile(const GemmArgs& a, const uint8_t* group, size_t unit_bytes, int64_t r0, int64_t t0, bool prefetch) {
  const auto* xrow = static_cast<const uint8_t*>(a.x) + static_cast<size_t>(t0) * a.x_row_bytes;
  const auto x_of = [&](int t, size_t b) {
    return reinterpret_cast<const BlockQ8_K*>(xrow + static_cast<size_t>(t) * a.x_row_bytes) + b;
  };
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (size_t b = 0; b < a.n_cols / kQK; ++b) {
    const uint8_t* unit = group + b * unit_bytes;
    // The last units of a group fetch the next group's first (the next tile's), or bytes past the matrix: a
    // prefetch never faults.
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(unit) + kPrefetchUnits * unit_bytes;
    for (size_t off = 0; prefetch && off < unit_bytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
    }
    Prep p;
    K::prep(unit, p);
    const int8_t* xq[T];
    for (int t = 0; t < T; ++t) xq[t] = x_of(t, b)->qs;
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    K::template sums<T>(unit, xq, p, isum);
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K* xb = x_of(t, b);
      const int8_t* bsums = reinterpret_cast<const int8_t*>(xb->bsums);
      __m512i ib = _mm512_setzero_si512();
      for (int i = 0; i < 8; ++i) ib = _mm512_dpwssd_epi32(ib, p.bsum_w[i], bcast(bsums, 4 * i));
      if constexpr (K::kBias) isum[t] = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(ib, K::kBiasShift));
      const __m512 xd = _mm512_set1_ps(xb->d);
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_mul_ps(p.d, xd), _mm512_cvtepi32_ps(isum[t])));
      if constexpr (K::kMin) {
        acc[t] = _mm512_sub_ps(acc[t], _mm512_mul_ps(_mm512_mul_ps(p.dmin, xd), _mm512_cvtepi32_ps(ib)));
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(a.y + static_cast<size_t>(t0 + t) * a.y_stride + static_cast<size_t>(r0), acc[t]);
  }
}

template <typename K>
void gemm_groups_k(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  const size_t unit_bytes = row_group_unit_bytes(a.type);
  for (int64_t r = row_begin; r < row_end; r += kRowGroupRows) {
    const uint8_t* group = a.w + static_cast<size_t>(r) * a.w_row_bytes;
    int64_t t = 0;
    for (; t + kMaxTokens <= a.n_tokens; t += kMaxTokens) {
      group_tile<K, kMaxTokens>(a, group, unit_bytes, r, t, t == 0);
    }
    if (t + 4 <= a.n_tokens) group_tile<K, 4>(a, group, unit_bytes, r, t, t == 0), t += 4;
    if (t + 2 <= a.n_tokens) group_tile<K, 2>(a, group, unit_bytes, r, t, t == 0), t += 2;
    if (t < a.n_tokens) group_tile<K, 1>(a, group, unit_bytes, r, t, t == 0);
  }
}

}  // namespace
}  // namespace preface::kernels::avx512
