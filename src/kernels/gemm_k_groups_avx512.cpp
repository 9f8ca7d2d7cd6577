// Packed Q4_K, Q5_K, Q6_K and IQ4_XS weights (repack.h: per 16-row group and super-block, the rows' blocks in 4-byte
// pieces, piece k of the 16 rows in one 64-byte vector) times Q8_K activations with AVX-512 VNNI. Lane r of every
// register is row r of the group, so a super-block's 256 products per row and token are 64 vpdpbusd of the rows'
// levels against broadcast 4-byte pieces of the token's activations, and no sum is ever horizontal.
//
// Per super-block: the rows' scales are decoded once into int32 lanes (Prep), then per token each scale group's
// level sum (a vpdpbusd chain) is multiplied by its scale (vpmulld) and added; the min or level-bias term is 8
// vpdpwssd of int16 weight pairs against broadcast pairs of the activations' bsums. Levels go in as unsigned
// bytes: Q4_K's low nibbles as they are and its high nibbles in place, as 16 x nibble (the sum is shifted down by 4,
// exactly); Q6_K's 6-bit q (value q - 32) and IQ4_XS's table value + 128, with 32 (128) x sum(scale x bsum)
// subtracted after.
//
// Exactness: per output and super-block the integer sums are exact int32 (wrapping adds in any order give the same
// bits, and the scalar dot's sums do not overflow), so they equal scalar::dot_k's; the float steps then run lane
// by lane in super-block order: acc + (d * x.d) * isum, and for Q4_K acc - (dmin * x.d) * imin. So each output
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

namespace preface::kernels::avx512 {

namespace {

constexpr int kMaxTokens = 8;  // tokens per tile: their sums share each unpacked level vector
// Units fetched ahead of the one being read: a unit's pieces are not read in address order (scales first, Q6_K's
// levels from three places), which the hardware prefetchers follow poorly when weights stream from L3 or DRAM.
constexpr size_t kPrefetchUnits = 2;

// What a 16-row group contributes to one super-block, lane r = row r: each scale group's int32 scale, the int16
// pairs that weight the activations' bsums 2i and 2i + 1 (Q4_K: its mins; Q6_K, IQ4_XS: its scales, for the level
// bias), and the f16 scales as f32.
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

// Q4_K / Q5_K step s (values 64s .. 64s + 63): isum[t] += scale[2s] x sum(lo[i] . x_t[64s + 4i ..]) +
// scale[2s + 1] x (sum(hi[i] . x_t[64s + 32 + 4i ..]) >> kHiShift) over the tokens, in slices of 4 (8 independent
// vpdpbusd chains per slice).
template <int T, int kHiShift>
inline void nibble_step(const __m512i* lo, const __m512i* hi, int s, const int8_t* const* x, const Prep& p,
                        __m512i* isum) {
  for_token_slices<T, 4>([&](int t0, auto n) {
    __m512i s_lo[n], s_hi[n];
    for (int u = 0; u < n; ++u) s_lo[u] = s_hi[u] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      for (int u = 0; u < n; ++u) {
        const int8_t* xs = x[t0 + u] + 64 * s;
        s_lo[u] = _mm512_dpbusd_epi32(s_lo[u], lo[i], bcast(xs, 4 * i));
        s_hi[u] = _mm512_dpbusd_epi32(s_hi[u], hi[i], bcast(xs, 32 + 4 * i));
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
  static constexpr int kBiasShift = 0;
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
      nibble_step<T, 4>(lo, hi, s, x, p, isum);
    }
  }
};

// Q5_K: Q4_K's pieces 0..3, then qh (pieces 4..11: bit 2s of qh[l] is the fifth bit of value 64s + l, bit 2s + 1
// that of value 64s + 32 + l), then qs (pieces 12..43, as Q4_K's).
struct Q5K {
  static constexpr bool kMin = true, kBias = false;
  static constexpr int kBiasShift = 0;
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
      nibble_step<T, 0>(lo, hi, s, x, p, isum);
    }
  }
};

// Q6_K: pieces 0..31 = ql, 32..47 = qh, 48..51 = the 16 int8 scales, then d (16 x f16). Half h of the
// super-block: with A = ql[64h + l], B = ql[64h + 32 + l], C = qh[32h + l], value 128h + 32 k + l has the level
// (k = 0: A low, 1: B low, 2: A high, 3: B high nibble) | (bits 2k, 2k + 1 of C) << 4, scale group 8h + 2k + l / 16.
struct Q6K {
  static constexpr bool kMin = false, kBias = true;
  static constexpr int kBiasShift = 5;  // levels q = value + 32
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
  template <int T>
  static void sums(const uint8_t* unit, const int8_t* const* x, const Prep& p, __m512i* isum) {
    for (int h = 0; h < 2; ++h) {
      for (int q = 0; q < 2; ++q) {  // l = 16q .. 16q + 15: scale groups 8h + 2k + q
        __m512i v[4][4];
        for (int i = 0; i < 4; ++i) {
          const int l4 = 4 * q + i;  // pieces of l = 4 l4 .. 4 l4 + 3
          const __m512i a = piece(unit, 16 * h + l4), b = piece(unit, 16 * h + 8 + l4);
          const __m512i c = piece(unit, 32 + 8 * h + l4);
          const __m512i lo = byte_set(0x0f), two = byte_set(0x30);
          v[0][i] = _mm512_or_si512(_mm512_and_si512(a, lo), _mm512_and_si512(_mm512_slli_epi16(c, 4), two));
          v[1][i] = _mm512_or_si512(_mm512_and_si512(b, lo), _mm512_and_si512(_mm512_slli_epi16(c, 2), two));
          v[2][i] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), lo), _mm512_and_si512(c, two));
          v[3][i] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 4), lo),
                                    _mm512_and_si512(_mm512_srli_epi16(c, 2), two));
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
    for (int s = 0; s < 4; ++s) {  // groups 2s (pieces 8s..8s+3) and 2s + 1 (8s+4..8s+7)
      __m512i lo[8], hi[8];
      for (int i = 0; i < 8; ++i) {
        const __m512i v = piece(unit, 2 + 8 * s + i);
        lo[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, byte_set(0x0f)));
        hi[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), byte_set(0x0f)));
      }
      for_token_slices<T, 4>([&](int t0, auto n) {
        __m512i s0[n], s1[n];
        for (int u = 0; u < n; ++u) s0[u] = s1[u] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          for (int u = 0; u < n; ++u) {
            const int8_t* xs = x[t0 + u] + 64 * s;
            s0[u] = _mm512_dpbusd_epi32(s0[u], lo[i], bcast(xs, 4 * i));
            s0[u] = _mm512_dpbusd_epi32(s0[u], hi[i], bcast(xs, 16 + 4 * i));
            s1[u] = _mm512_dpbusd_epi32(s1[u], lo[4 + i], bcast(xs, 32 + 4 * i));
            s1[u] = _mm512_dpbusd_epi32(s1[u], hi[4 + i], bcast(xs, 48 + 4 * i));
          }
        }
        for (int u = 0; u < n; ++u) {
          const __m512i g = _mm512_add_epi32(_mm512_mullo_epi32(p.scale[2 * s], s0[u]),
                                             _mm512_mullo_epi32(p.scale[2 * s + 1], s1[u]));
          isum[t0 + u] = _mm512_add_epi32(isum[t0 + u], g);
        }
      });
    }
  }
};

// y[t0 + t][r0 .. r0 + 15] for t < T: the 16 rows of the group at `group` (n_blocks units).
template <typename K, int T>
void group_tile(const GemmArgs& a, const uint8_t* group, size_t unit_bytes, int64_t r0, int64_t t0) {
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
    for (size_t off = 0; off < unit_bytes; off += 64) {
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
    for (; t + kMaxTokens <= a.n_tokens; t += kMaxTokens) group_tile<K, kMaxTokens>(a, group, unit_bytes, r, t);
    if (t + 4 <= a.n_tokens) group_tile<K, 4>(a, group, unit_bytes, r, t), t += 4;
    if (t + 2 <= a.n_tokens) group_tile<K, 2>(a, group, unit_bytes, r, t), t += 2;
    if (t < a.n_tokens) group_tile<K, 1>(a, group, unit_bytes, r, t);
  }
}

}  // namespace

void gemm_k_groups(const GemmArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.type) {
    case gguf::TensorType::Q4_K:
      return gemm_groups_k<Q4K>(a, row_begin, row_end);
    case gguf::TensorType::Q5_K:
      return gemm_groups_k<Q5K>(a, row_begin, row_end);
    case gguf::TensorType::Q6_K:
      return gemm_groups_k<Q6K>(a, row_begin, row_end);
    case gguf::TensorType::IQ4_XS:
      return gemm_groups_k<IQ4XS>(a, row_begin, row_end);
    default:
      return;  // no packed layout: never called (repack.h's row_group_type)
  }
}

}  // namespace preface::kernels::avx512
