// Packed K-quant and IQ4_XS weights (repack.h: per 16-row group and super-block, the rows' blocks in 4-byte
// pieces, piece k of the 16 rows in one 64-byte vector) times Q8_K activations with AVX-512 VNNI, in
// k_groups_avx512.h's tiles: lane r of every register is row r of the group, so a super-block's 256 products per
// row and token are 64 vpdpbusd of the rows' levels against broadcast 4-byte pieces of the token's activations, and
// no sum is ever horizontal. This file: Q4_K, Q5_K and IQ4_XS (a scale per 32 values) and the entry point;
// gemm_k16_groups_avx512.cpp: Q2_K, Q3_K and Q6_K (a scale per 16).
//
// Per super-block: the rows' scales are decoded once into int32 lanes (Prep), then per token each scale group's
// level sum (a vpdpbusd chain) is multiplied by its scale (vpmulld) and added; the min or level-bias term is 8
// vpdpwssd of int16 weight pairs against broadcast pairs of the activations' bsums. Levels go in as unsigned
// bytes: Q4_K's low nibbles as they are and its high nibbles in place, as 16 x nibble (the sum is shifted down by 4,
// exactly); Q5_K's 5-bit levels; IQ4_XS's table value + 128, with 128 x sum(scale x bsum) subtracted after.
//
// Exactness: per output and super-block the integer sums are exact int32 (wrapping adds in any order give the same
// bits, and the scalar dot's sums do not overflow), so they equal scalar::dot_k's; the float steps then run lane
// by lane in super-block order: acc + (d * x.d) * isum, and with a min acc - (dmin * x.d) * imin. So each output
// is the bits of the scalar traits dot of its row and token, whatever the token tile or batch.
//
// Only called where avx512::quant_available(). Standard headers come before the target pragma; this file defines
// only internal-linkage code besides avx512::gemm_k_groups.
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

// Step s (values 64s .. 64s + 63, scale groups 2s and 2s + 1), each group's 8 level vectors in activation order:
// isum[t] += scale[2s] x sum(g0[i] . x_t[64s + 4i ..]) + scale[2s + 1] x (sum(g1[i] . x_t[64s + 32 + 4i ..]) >>
// kHiShift) over the tokens, in slices of 4 (8 independent vpdpbusd chains per slice).
template <int T, int kHiShift>
inline void step64(const __m512i* g0, const __m512i* g1, int s, const int8_t* const* x, const Prep& p,
                        __m512i* isum) {
  for_token_slices<T, 4>([&](int t0, auto n) {
    __m512i s_lo[n], s_hi[n];
    for (int u = 0; u < n; ++u) s_lo[u] = s_hi[u] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      for (int u = 0; u < n; ++u) {
        const int8_t* xs = x[t0 + u] + 64 * s;
        s_lo[u] = _mm512_dpbusd_epi32(s_lo[u], g0[i], bcast(xs, 4 * i));
        s_hi[u] = _mm512_dpbusd_epi32(s_hi[u], g1[i], bcast(xs, 32 + 4 * i));
      }
    }
    for (int u = 0; u < n; ++u) {
      const __m512i g = _mm512_add_epi32(_mm512_mullo_epi32(p.scale[2 * s], s_lo[u]),
                                         _mm512_mullo_epi32(p.scale[2 * s + 1], _mm512_srai_epi32(s_hi[u], kHiShift)));
      isum[t0 + u] = _mm512_add_epi32(isum[t0 + u], g);
    }
  });
}

// Q4_K: piece 0 = {d, dmin}, pieces 1..3 = the 12 scale bytes, pieces 4..35 = qs (qs[32p + l]: value 64p + l in
// the low nibble, 64p + 32 + l in the high one). Scale groups of 32 values; mins weight bsums 2g and 2g + 1.
struct Q4K {
  static constexpr bool kMin = true, kBias = false;
  static void prep(const uint8_t* unit, Prep& p) {
    const __m512i p0 = piece(unit, 0), u0 = piece(unit, 1), u1 = piece(unit, 2), u2 = piece(unit, 3);
    p.d = f16_low(p0);
    p.dmin = f16_low(_mm512_srli_epi32(p0, 16));
    const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
    // ggml's scale_min_k4: scales and mins 0..3 in the low 6 bits of bytes 0..3 and 4..7; 4..7 from the nibbles of
    // bytes 8..11 and the top 2 bits of bytes 0..3 (scales) and 4..7 (mins).
    for (int j = 0; j < 4; ++j) {
      const __m512i top_sc = _mm512_and_si512(_mm512_srli_epi32(u0, 8 * j + 6), m3);
      const __m512i top_mn = _mm512_and_si512(_mm512_srli_epi32(u1, 8 * j + 6), m3);
      p.scale[j] = _mm512_and_si512(_mm512_srli_epi32(u0, 8 * j), m63);
      p.scale[j + 4] =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 8 * j), m15), _mm512_slli_epi32(top_sc, 4));
      const __m512i mn = _mm512_and_si512(_mm512_srli_epi32(u1, 8 * j), m63);
      const __m512i mn4 =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 8 * j + 4), m15), _mm512_slli_epi32(top_mn, 4));
      p.bsum_w[j] = pair16(mn, mn);
      p.bsum_w[j + 4] = pair16(mn4, mn4);
    }
  }
  template <int T>
  static void sums(const uint8_t* unit, const int8_t* const* x, const Prep& p, __m512i* isum) {
    for (int s = 0; s < 4; ++s) {  // groups 2s (low nibbles) and 2s + 1 (high nibbles) of qs[32s..32s+31]
      __m512i lo[8], hi[8];
      for (int i = 0; i < 8; ++i) {
        const __m512i v = piece(unit, 4 + 8 * s + i);
        lo[i] = _mm512_and_si512(v, byte_set(0x0f));
        hi[i] = _mm512_and_si512(v, byte_set(0xf0));  // 16 x the high nibble: 0..240, still unsigned bytes
      }
      step64<T, 4>(lo, hi, s, x, p, isum);
    }
  }
};

// Q5_K: Q4_K's pieces 0..3, then qh (pieces 4..11: bit 2s of qh[l] is the fifth bit of value 64s + l, bit 2s + 1
// that of value 64s + 32 + l), then qs (pieces 12..43, as Q4_K's).
struct Q5K {
  static constexpr bool kMin = true, kBias = false;
  static void prep(const uint8_t* unit, Prep& p) { Q4K::prep(unit, p); }
  template <int T>
  static void sums(const uint8_t* unit, const int8_t* const* x, const Prep& p, __m512i* isum) {
    const __m512i low = byte_set(0x0f), fifth = byte_set(0x10);
    for (int s = 0; s < 4; ++s) {
      __m512i lo[8], hi[8];
      for (int i = 0; i < 8; ++i) {
        const __m512i v = piece(unit, 12 + 8 * s + i), h = piece(unit, 4 + i);  // qs and qh bytes 4i..4i+3
        // Bit 2s (2s + 1) of each qh byte moved to bit 4: shifts within 16-bit words stay inside the byte for
        // the bit kept.
        const __m512i h_lo = 4 - 2 * s >= 0 ? _mm512_slli_epi16(h, 4 - 2 * s) : _mm512_srli_epi16(h, 2 * s - 4);
        const __m512i h_hi = 3 - 2 * s >= 0 ? _mm512_slli_epi16(h, 3 - 2 * s) : _mm512_srli_epi16(h, 2 * s - 3);
        lo[i] = _mm512_or_si512(_mm512_and_si512(v, low), _mm512_and_si512(h_lo, fifth));
        hi[i] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), low), _mm512_and_si512(h_hi, fifth));
      }
      step64<T, 0>(lo, hi, s, x, p, isum);
    }
  }
};

// IQ4_XS levels + 128, as unsigned bytes.
alignas(16) constexpr uint8_t kIq4Biased[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                129, 141, 153, 166, 181, 197, 217, 241};
static_assert(kIq4Biased[0] == kIq4nlValues[0] + 128 && kIq4Biased[15] == kIq4nlValues[15] + 128);

// IQ4_XS: piece 0 = {d, scales_h}, piece 1 = scales_l, pieces 2..33 = qs (qs[16g + j]: value 32g + j in the low
// nibble, 32g + 16 + j in the high one). Scale groups of 32 values.
struct IQ4XS {
  static constexpr bool kMin = false, kBias = true;
  static constexpr int kBiasShift = 7;  // levels = value + 128
  static void prep(const uint8_t* unit, Prep& p) {
    const __m512i p0 = piece(unit, 0), sl = piece(unit, 1);
    const __m512i sh = _mm512_srli_epi32(p0, 16);
    p.d = f16_low(p0);
    p.dmin = _mm512_setzero_ps();
    const __m512i m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3), m32 = _mm512_set1_epi32(32);
    for (int g = 0; g < 8; ++g) {  // scale g: nibble g of scales_l | bits 2g, 2g + 1 of scales_h << 4, minus 32
      const __m512i low = _mm512_and_si512(_mm512_srli_epi32(sl, 4 * g), m15);
      const __m512i high = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * g), m3);
      p.scale[g] = _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), m32);
      p.bsum_w[g] = pair16(p.scale[g], p.scale[g]);
    }
  }
  template <int T>
  static void sums(const uint8_t* unit, const int8_t* const* x, const Prep& p, __m512i* isum) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4Biased)));
    const auto level = [&](__m512i nibbles) {  // the low nibble of each byte through the table
      return _mm512_shuffle_epi8(table, _mm512_and_si512(nibbles, byte_set(0x0f)));
    };
    for (int s = 0; s < 4; ++s) {
      // Group 2s + j reads pieces 2 + 8s + 4j + i (i < 4): values 4i.. of the group in the low nibbles, 16 + 4i..
      // in the high ones.
      __m512i g[2][8];
      for (int j = 0; j < 2; ++j) {
        for (int i = 0; i < 4; ++i) {
          const __m512i v = piece(unit, 2 + 8 * s + 4 * j + i);
          g[j][i] = level(v);
          g[j][4 + i] = level(_mm512_srli_epi16(v, 4));
        }
      }
      step64<T, 0>(g[0], g[1], s, x, p, isum);
    }
  }
};

}  // namespace

void gemm_k_groups(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.type) {
    case gguf::TensorType::Q4_K:
      return gemm_groups_k<Q4K>(a, row_begin, row_end);
    case gguf::TensorType::Q5_K:
      return gemm_groups_k<Q5K>(a, row_begin, row_end);
    case gguf::TensorType::Q2_K:
    case gguf::TensorType::Q3_K:
    case gguf::TensorType::Q6_K:
      return gemm_k16_groups(a, row_begin, row_end);
    case gguf::TensorType::IQ4_XS:
      return gemm_groups_k<IQ4XS>(a, row_begin, row_end);
    default:
      return;  // no packed layout: never called (repack.h's row_group_type)
  }
}

}  // namespace preface::kernels::avx512
