// Packed Q2_K, Q3_K and Q6_K weights, the types with a scale per 16 values, in k_groups_avx512.h's 16-row tiles
// (lane r = row r; exactness as gemm_k_groups_avx512.cpp says). All three split a super-block into halves h of 128
// values, value 128h + 32k + l (k < 4, l < 32) taking its level from byte l of the half's pieces and its scale
// from group 8h + 2k + l / 16; levels16 gives, for the 4 values of piece l4 (l = 4 l4 .. 4 l4 + 3), the 4 unsigned
// level vectors k = 0..3. Q2_K's levels are 0..3 with a min per 16 values; Q3_K's u = q + 4 (0..7) and Q6_K's
// u = q + 32 (0..63) go in unsigned with 4 (32) x sum(scale x bsum) subtracted.
//
// Only called where avx512::quant_available(). Standard headers come before the target pragma; this file defines
// only internal-linkage code besides avx512::gemm_k16_groups.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "kernels/repack.h"

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/k_groups_avx512.h"  // after the target pragma: its inline code is compiled for AVX-512 here

namespace preface::kernels::avx512 {

namespace {

// isum[t] += sum over k, q of scale[8h + 2k + q] x sum(levels . x_t) for half h: per q (l = 16q .. 16q + 15) the
// 16 level vectors of its 4 pieces, then per token 4 vpdpbusd chains of 4.
template <typename K, int T>
void sums16(const uint8_t* unit, const int8_t* const* x, const Prep& p, __m512i* isum) {
  for (int h = 0; h < 2; ++h) {
    for (int q = 0; q < 2; ++q) {
      __m512i v[4][4];
      for (int i = 0; i < 4; ++i) {
        __m512i u[4];
        K::levels16(unit, h, 4 * q + i, u);
        for (int k = 0; k < 4; ++k) v[k][i] = u[k];
      }
      for (int t = 0; t < T; ++t) {
        for (int k = 0; k < 4; ++k) {
          const int8_t* xs = x[t] + 128 * h + 32 * k + 16 * q;
          __m512i s = _mm512_setzero_si512();
          for (int i = 0; i < 4; ++i) s = _mm512_dpbusd_epi32(s, v[k][i], bcast(xs, 4 * i));
          isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(p.scale[8 * h + 2 * k + q], s));
        }
      }
    }
  }
}

// Bits 2k, 2k + 1 of each byte of v, k < 4 (shifts inside 16-bit words: the bits kept stay in their byte).
inline __m512i field2(__m512i v, int k) { return _mm512_and_si512(_mm512_srli_epi16(v, 2 * k), byte_set(0x03)); }

// Q2_K: pieces 0..3 = scales (byte j: scale j in the low nibble, min j in the high one), 4..19 = qs (qs[32h + l]:
// bits 2k, 2k + 1 are value 128h + 32k + l), piece 20 = {d, dmin}.
struct Q2K {
  static constexpr bool kMin = true, kBias = false;
  static void prep(const uint8_t* unit, Prep& p) {
    const __m512i p20 = piece(unit, 20);
    p.d = f16_low(p20);
    p.dmin = f16_low(_mm512_srli_epi32(p20, 16));
    const __m512i m15 = _mm512_set1_epi32(15);
    __m512i mins[16];
    for (int w = 0; w < 4; ++w) {
      const __m512i v = piece(unit, w);
      for (int k = 0; k < 4; ++k) {
        p.scale[4 * w + k] = _mm512_and_si512(_mm512_srli_epi32(v, 8 * k), m15);
        mins[4 * w + k] = _mm512_and_si512(_mm512_srli_epi32(v, 8 * k + 4), m15);
      }
    }
    for (int i = 0; i < 8; ++i) p.bsum_w[i] = pair16(mins[2 * i], mins[2 * i + 1]);
  }
  static void levels16(const uint8_t* unit, int h, int l4, __m512i* u) {
    const __m512i q = piece(unit, 4 + 8 * h + l4);
    for (int k = 0; k < 4; ++k) u[k] = field2(q, k);
  }
  template <int T>
  static void sums(const uint8_t* unit, const int8_t* const* x, const Prep& p, __m512i* isum) {
    sums16<Q2K, T>(unit, x, p, isum);
  }
};

// Q3_K: pieces 0..7 = hmask (bit 4h + k of hmask[l]: the third bit of value 128h + 32k + l), 8..23 = qs (as
// Q2_K's), 24..26 = the 12 scale bytes (q3_k_scales' layout), then d (16 x f16).
struct Q3K {
  static constexpr bool kMin = false, kBias = true;
  static constexpr int kBiasShift = 2;  // levels u = q + 4
  static constexpr int kDOffset = 64 * 27;
  static void prep(const uint8_t* unit, Prep& p) {
    p.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + kDOffset)));
    p.dmin = _mm512_setzero_ps();
    const __m512i w[3] = {piece(unit, 24), piece(unit, 25), piece(unit, 26)};
    const __m512i m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3), m32 = _mm512_set1_epi32(32);
    // Scale i: the low nibble of byte i (i < 8) or the high nibble of byte i - 8, and bits 2 (i / 4), +1 of byte
    // 8 + i % 4 on top; minus 32.
    for (int i = 0; i < 16; ++i) {
      const int j = i % 8;
      const __m512i low = _mm512_and_si512(_mm512_srli_epi32(w[j / 4], 8 * (j % 4) + (i < 8 ? 0 : 4)), m15);
      const __m512i high = _mm512_and_si512(_mm512_srli_epi32(w[2], 8 * (i % 4) + 2 * (i / 4)), m3);
      p.scale[i] = _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), m32);
    }
    for (int i = 0; i < 8; ++i) p.bsum_w[i] = pair16(p.scale[2 * i], p.scale[2 * i + 1]);
  }
  static void levels16(const uint8_t* unit, int h, int l4, __m512i* u) {
    const __m512i q = piece(unit, 8 + 8 * h + l4), m = piece(unit, l4);
    for (int k = 0; k < 4; ++k) {
      // Bit 4h + k of each hmask byte moved to bit 2 (again inside its byte, the other bits masked off).
      const int from = 4 * h + k;
      const __m512i hbit = from >= 2 ? _mm512_srli_epi16(m, from - 2) : _mm512_slli_epi16(m, 2 - from);
      u[k] = _mm512_or_si512(field2(q, k), _mm512_and_si512(hbit, byte_set(0x04)));
    }
  }
  template <int T>
  static void sums(const uint8_t* unit, const int8_t* const* x, const Prep& p, __m512i* isum) {
    sums16<Q3K, T>(unit, x, p, isum);
  }
};

// Q6_K: pieces 0..31 = ql, 32..47 = qh, 48..51 = the 16 int8 scales, then d (16 x f16). With A = ql[64h + l],
// B = ql[64h + 32 + l], C = qh[32h + l], value 128h + 32k + l has the level (k = 0: A low, 1: B low, 2: A high,
// 3: B high nibble) | (bits 2k, 2k + 1 of C) << 4.
struct Q6K {
  static constexpr bool kMin = false, kBias = true;
  static constexpr int kBiasShift = 5;  // levels u = q + 32
  static constexpr int kScalePiece = 48, kDOffset = 64 * 52;
  static void prep(const uint8_t* unit, Prep& p) {
    p.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + kDOffset)));
    p.dmin = _mm512_setzero_ps();
    for (int w = 0; w < 4; ++w) {
      const __m512i v = piece(unit, kScalePiece + w);
      for (int k = 0; k < 4; ++k) p.scale[4 * w + k] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * k), 24);
    }
    for (int i = 0; i < 8; ++i) p.bsum_w[i] = pair16(p.scale[2 * i], p.scale[2 * i + 1]);
  }
  static void levels16(const uint8_t* unit, int h, int l4, __m512i* u) {
    const __m512i a = piece(unit, 16 * h + l4), b = piece(unit, 16 * h + 8 + l4);
    const __m512i c = piece(unit, 32 + 8 * h + l4);
    const __m512i lo = byte_set(0x0f), two = byte_set(0x30);
    u[0] = _mm512_or_si512(_mm512_and_si512(a, lo), _mm512_and_si512(_mm512_slli_epi16(c, 4), two));
    u[1] = _mm512_or_si512(_mm512_and_si512(b, lo), _mm512_and_si512(_mm512_slli_epi16(c, 2), two));
    u[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), lo), _mm512_and_si512(c, two));
    u[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 4), lo),
                           _mm512_and_si512(_mm512_srli_epi16(c, 2), two));
  }
  template <int T>
  static void sums(const uint8_t* unit, const int8_t* const* x, const Prep& p, __m512i* isum) {
    sums16<Q6K, T>(unit, x, p, isum);
  }
};

}  // namespace

void gemm_k16_groups(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.type) {
    case gguf::TensorType::Q2_K:
      return gemm_groups_k<Q2K>(a, row_begin, row_end);
    case gguf::TensorType::Q3_K:
      return gemm_groups_k<Q3K>(a, row_begin, row_end);
    case gguf::TensorType::Q6_K:
      return gemm_groups_k<Q6K>(a, row_begin, row_end);
    default:
      return;  // not a type of this file: never called (gemm_k_groups routes by type)
  }
}

}  // namespace preface::kernels::avx512
