// AVX-512 attention_tile: the shared tile (attention_tile_avx2.h) with 16-lane arithmetic where it keeps every
// output's arithmetic unchanged, so the results are bit-identical to avx2::attention_tile:
//   - K rows are stored interleaved in pairs (8 values of row 2i, then 8 of row 2i + 1), so one 16-lane FMA
//     advances two rows' 8-lane accumulators by one step each;
//   - the V accumulation is per head lane anyway, 16 lanes at a time.
// Only called where the CPU has AVX-512 F/BW/VL/DQ (dispatch.cpp).
//
// Standard headers come before the target pragma and the kernel headers after it have internal linkage, so no
// code compiled for AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/attention_tile_avx2.h"

namespace preface::kernels::avx512 {
namespace {

using avx2::attention_tile_impl;

struct ZmmOps {
  // K row i's 8-value segment s at kbuf + (i / 2) * 2 hp + 16 s + (i % 2) * 8.
  static constexpr size_t kKSegStride = 16;
  static float* k_row(float* kbuf, size_t hp, int32_t i) {
    return kbuf + static_cast<size_t>(i / 2) * 2 * hp + static_cast<size_t>(i % 2) * 8;
  }

  // F16 rows widened 16 values per convert and store (hd % 16 == 0, so hp == hd): the stores are as wide as
  // the loads that read them back (a 16-lane load of two 8-lane stores waits for both to reach the cache).
  static constexpr bool kPairsF16 = true;
  // K rows a and b (an even row and the next) into their pair's [hd / 8][16] interleaved segments at dst.
  static void widen_pair_f16(const uint8_t* a, const uint8_t* b, size_t hd, float* dst) {
    for (size_t s = 0; s < hd / 8; ++s) {
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 16 * s));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * s));
      _mm512_storeu_ps(dst + 16 * s, _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1)));
    }
  }
  // One V row of hd values into dst[0..hd).
  static void widen_f16(const uint8_t* row, size_t hd, float* dst) {
    for (size_t d = 0; d < hd; d += 16) {
      _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * d))));
    }
  }

  // out[r] = 8-lane FMA accumulator of q . k_r for rows 8g..8g+7, two rows per 16-lane register.
  static void dots8(const float* q, const float* kbuf, size_t hp, int g, __m256 out[8]) {
    __m512 acc[4];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    const float* kg = kbuf + static_cast<size_t>(8 * g) * hp;  // pairs 4g..4g+3, 2 hp floats each
    for (size_t s = 0; s < hp / 8; ++s) {
      const __m512 q2 = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + 8 * s));
      for (int pr = 0; pr < 4; ++pr) {
        acc[pr] = _mm512_fmadd_ps(_mm512_loadu_ps(kg + static_cast<size_t>(pr) * 2 * hp + 16 * s), q2, acc[pr]);
      }
    }
    for (int pr = 0; pr < 4; ++pr) {
      out[2 * pr] = _mm512_castps512_ps256(acc[pr]);
      out[2 * pr + 1] = _mm512_extractf32x8_ps(acc[pr], 1);
    }
  }

  // acc[0..16 NZ) = acc * a + sum_i p[i] * vbuf[i][0..16 NZ), i < n_valid in order. vbuf rows are hp floats apart.
  template <int NZ>
  static void accumulate_regs(float* acc, float a, const float* p, const float* vbuf, size_t hp, int32_t n_valid) {
    __m512 r[NZ];
    const __m512 va = _mm512_set1_ps(a);
    for (int k = 0; k < NZ; ++k) r[k] = _mm512_mul_ps(_mm512_loadu_ps(acc + 16 * k), va);
    for (int32_t i = 0; i < n_valid; ++i) {
      const __m512 pi = _mm512_set1_ps(p[i]);
      const float* v = vbuf + static_cast<size_t>(i) * hp;
      for (int k = 0; k < NZ; ++k) r[k] = _mm512_fmadd_ps(pi, _mm512_loadu_ps(v + 16 * k), r[k]);
    }
    for (int k = 0; k < NZ; ++k) _mm512_storeu_ps(acc + 16 * k, r[k]);
  }

  // The same for 8 lanes (a head padded to an odd multiple of 8 ends with one).
  static void accumulate_tail(float* acc, float a, const float* p, const float* vbuf, size_t hp, int32_t n_valid) {
    __m256 r = _mm256_mul_ps(_mm256_loadu_ps(acc), _mm256_set1_ps(a));
    for (int32_t i = 0; i < n_valid; ++i) {
      r = _mm256_fmadd_ps(_mm256_set1_ps(p[i]), _mm256_loadu_ps(vbuf + static_cast<size_t>(i) * hp), r);
    }
    _mm256_storeu_ps(acc, r);
  }

  // Two queries together: twice the independent FMA chains (one chain per register is latency-bound), and each
  // V load serves both. Positions past the shorter query's end go to the longer one alone; per lane, each
  // query's sequence is the one accumulate_regs would run.
  template <int NZ>
  static void accumulate_regs2(float* acc0, float a0, const float* p0, int32_t n0, float* acc1, float a1,
                               const float* p1, int32_t n1, const float* vbuf, size_t hp) {
    __m512 r0[NZ], r1[NZ];
    for (int k = 0; k < NZ; ++k) {
      r0[k] = _mm512_mul_ps(_mm512_loadu_ps(acc0 + 16 * k), _mm512_set1_ps(a0));
      r1[k] = _mm512_mul_ps(_mm512_loadu_ps(acc1 + 16 * k), _mm512_set1_ps(a1));
    }
    const int32_t n_both = n0 < n1 ? n0 : n1;
    int32_t i = 0;
    for (; i < n_both; ++i) {
      const __m512 w0 = _mm512_set1_ps(p0[i]), w1 = _mm512_set1_ps(p1[i]);
      const float* v = vbuf + static_cast<size_t>(i) * hp;
      for (int k = 0; k < NZ; ++k) {
        const __m512 vk = _mm512_loadu_ps(v + 16 * k);
        r0[k] = _mm512_fmadd_ps(w0, vk, r0[k]);
        r1[k] = _mm512_fmadd_ps(w1, vk, r1[k]);
      }
    }
    for (int32_t j = i; j < n0; ++j) {
      const __m512 w0 = _mm512_set1_ps(p0[j]);
      for (int k = 0; k < NZ; ++k) r0[k] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(vbuf + j * hp + 16 * k), r0[k]);
    }
    for (int32_t j = i; j < n1; ++j) {
      const __m512 w1 = _mm512_set1_ps(p1[j]);
      for (int k = 0; k < NZ; ++k) r1[k] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(vbuf + j * hp + 16 * k), r1[k]);
    }
    for (int k = 0; k < NZ; ++k) {
      _mm512_storeu_ps(acc0 + 16 * k, r0[k]);
      _mm512_storeu_ps(acc1 + 16 * k, r1[k]);
    }
  }

  static void accumulate_v2(float* acc0, float a0, const float* p0, int32_t n0, float* acc1, float a1,
                            const float* p1, int32_t n1, const float* vbuf, size_t hp) {
    size_t d0 = 0;
    while (hp - d0 >= 16) {
      const size_t n_regs = (hp - d0) / 16 >= 4 ? 4 : (hp - d0) / 16;
      float *b0 = acc0 + d0, *b1 = acc1 + d0;
      const float* vd = vbuf + d0;
      switch (n_regs) {
        case 1: accumulate_regs2<1>(b0, a0, p0, n0, b1, a1, p1, n1, vd, hp); break;
        case 2: accumulate_regs2<2>(b0, a0, p0, n0, b1, a1, p1, n1, vd, hp); break;
        case 3: accumulate_regs2<3>(b0, a0, p0, n0, b1, a1, p1, n1, vd, hp); break;
        default: accumulate_regs2<4>(b0, a0, p0, n0, b1, a1, p1, n1, vd, hp); break;
      }
      d0 += 16 * n_regs;
    }
    if (d0 < hp) {
      accumulate_tail(acc0 + d0, a0, p0, vbuf + d0, hp, n0);
      accumulate_tail(acc1 + d0, a1, p1, vbuf + d0, hp, n1);
    }
  }

  static void accumulate_v(float* acc, float a, const float* p, const float* vbuf, size_t hp, int32_t n_valid) {
    size_t d0 = 0;
    while (hp - d0 >= 16) {
      const size_t n_regs = (hp - d0) / 16 >= 8 ? 8 : (hp - d0) / 16;
      float* ad = acc + d0;
      const float* vd = vbuf + d0;
      switch (n_regs) {
        case 1: accumulate_regs<1>(ad, a, p, vd, hp, n_valid); break;
        case 2: accumulate_regs<2>(ad, a, p, vd, hp, n_valid); break;
        case 3: accumulate_regs<3>(ad, a, p, vd, hp, n_valid); break;
        case 4: accumulate_regs<4>(ad, a, p, vd, hp, n_valid); break;
        case 5: accumulate_regs<5>(ad, a, p, vd, hp, n_valid); break;
        case 6: accumulate_regs<6>(ad, a, p, vd, hp, n_valid); break;
        case 7: accumulate_regs<7>(ad, a, p, vd, hp, n_valid); break;
        default: accumulate_regs<8>(ad, a, p, vd, hp, n_valid); break;
      }
      d0 += 16 * n_regs;
    }
    if (d0 < hp) accumulate_tail(acc + d0, a, p, vbuf + d0, hp, n_valid);
  }
};

}  // namespace

void attention_tile(const AttnTile& tile, float* scratch) {
  if (attention_tiles_shared(&tile, 1, scratch, 0)) return;
  attention_tile_impl<ZmmOps>(tile, scratch);
}

}  // namespace preface::kernels::avx512
