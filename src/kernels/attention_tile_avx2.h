// The SIMD attention_tile (attention.h), shared by attention_avx2.cpp and attention_avx512.cpp through an Ops
// policy that supplies the K row layout, the scoring of 8 rows and the V accumulation. Every output follows the
// same arithmetic under both policies:
//   scores: per row, an 8-lane FMA accumulator over the head padded to a multiple of 8 (padding adds exact
//     zeros), 8 values per step in order, reduced by hsum_8x8's tree, times scale; soft-capped by tanh_x8 (the
//     scalar path's softcap_tanh, bit for bit); rows outside the query's [first_pos, n_pos) are -inf;
//   weights: exp_x8; the chunk sum hsum((e0 + e1) + (e2 + e3)) over the chunk's four 8-position groups (groups
//     past the query's last position are zero);
//   acc (per head lane): acc * a, then fma(p_i, V_i, acc) for the chunk's positions from first_pos on in order;
//     out = acc / l.
// Internal linkage (see simd_avx2.h).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_layout.h"
#include "kernels/kv_block_decode.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {
namespace {

constexpr int kGroups = kAttnChunk / 8;
static_assert(kGroups == 4, "the chunk sum adds four 8-position groups");

inline int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

// The row number (block * block_size + slot) of a position given its block's table index and slot; its K row is
// at k_base + row * k_row_bytes, its V row at v_base + row * v_row_bytes.
inline size_t row_number(const KvPages& kv, int32_t table_index, int32_t slot) {
  return static_cast<size_t>(kv.block_table[table_index]) * static_cast<size_t>(kv.block_size) +
         static_cast<size_t>(slot);
}

// Calls fn(i, row) for rows i = 0..n-1 from (table_index, slot) on, row = that position's row_number, then leaves
// (table_index, slot) at the row after them. A block's rows are consecutive, so a block costs one table lookup.
template <typename Fn>
inline void for_rows(const KvPages& kv, int32_t n, int32_t& table_index, int32_t& slot, Fn&& fn) {
  for (int32_t i = 0; i < n;) {
    const int32_t run = min32(kv.block_size - slot, n - i);
    size_t row = row_number(kv, table_index, slot);
    for (int32_t r = 0; r < run; ++r, ++row) fn(i + r, row);
    i += run;
    slot += run;
    if (slot == kv.block_size) {
      slot = 0;
      ++table_index;
    }
  }
}

// Prefetches into L1 the K and V bytes of this head in n rows from (table_index, slot) on, advancing past them
// (n <= 0: none).
inline void prefetch_rows(const KvPages& kv, const KvSpan& k, const KvSpan& v, int32_t n, int32_t& table_index,
                          int32_t& slot) {
  for_rows(kv, n, table_index, slot, [&](int32_t, size_t row) {
    const uint8_t* kp = kv.k_base + row * kv.k_row_bytes + k.offset;
    const uint8_t* vp = kv.v_base + row * kv.v_row_bytes + v.offset;
    for (size_t b = 0; b < k.bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(kp + b), _MM_HINT_T0);
    for (size_t b = 0; b < v.bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(vp + b), _MM_HINT_T0);
  });
}

// 8 values of kElem (F32, F16 or BF16) at p as f32.
template <KvType kElem>
inline __m256 widen8(const uint8_t* p) {
  if constexpr (kElem == KvType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (kElem == KvType::F16) {
    return load_f16x8(reinterpret_cast<const uint16_t*>(p));
  } else {
    return load_bf16x8(reinterpret_cast<const uint16_t*>(p));
  }
}

// 8 int8 levels as f32 times d (plus m when kHasMin): f32(d) * f32(q) is exact, + m rounds once (kv_rows.h).
template <bool kHasMin>
inline __m256 scale_levels8(const int8_t* q, __m256 d, __m256 m) {
  const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  const __m256 v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
  if constexpr (kHasMin) return _mm256_add_ps(v, m);
  return v;
}

// Widens blocks [b0, b0 + n_blocks) of a block-type row to segments s at dst + s * seg_stride; returns the next.
template <KvType kElem>
inline float* widen_blocks(const uint8_t* row, size_t b0, size_t n_blocks, float* dst, size_t seg_stride) {
  constexpr size_t kBlockBytes = kv_type_block_bytes(kElem);
  constexpr bool kHasMin = kv_type_has_offset(kElem);
  for (size_t b = b0; b < b0 + n_blocks; ++b) {
    const uint8_t* block = row + b * kBlockBytes;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(kv_load_u16(block)));
    const __m256 m = kHasMin ? _mm256_set1_ps(_cvtsh_ss(kv_load_u16(block + 2))) : _mm256_setzero_ps();
    if constexpr (kElem == KvType::Q8_0) {  // the levels are the stored bytes
      for (size_t k = 0; k < 4; ++k, dst += seg_stride) {
        _mm256_storeu_ps(dst, scale_levels8<false>(reinterpret_cast<const int8_t*>(block + 2 + 8 * k), d, m));
      }
    } else {
      int8_t q[32];
      kv_block_levels(kElem, block, q);
      for (size_t k = 0; k < 4; ++k, dst += seg_stride) _mm256_storeu_ps(dst, scale_levels8<kHasMin>(q + 8 * k, d, m));
    }
  }
  return dst;
}

// Widens a head of hd values starting at value head_value of a row of kElem to f32, padded with zeros to hp (a
// multiple of 8), writing its 8-value segment s at dst + s * seg_stride.
template <KvType kElem>
void widen_row(const uint8_t* row, size_t head_value, size_t hd, size_t hp, float* dst, size_t seg_stride) {
  size_t d = 0;
  if constexpr (kv_type_is_quantized(kElem)) {
    if (head_value % 32 == 0 && hd % 32 == 0) {
      dst = widen_blocks<kElem>(row, head_value / 32, hd / 32, dst, seg_stride);
      d = hd;
    } else {  // a head inside blocks: value by value, the same floats
      for (; d < hd; d += 8, dst += seg_stride) {
        alignas(32) float seg[8] = {};
        for (size_t j = 0; j < 8 && d + j < hd; ++j) {
          const size_t i = head_value + d + j;
          const uint8_t* block = row + i / 32 * kv_type_block_bytes(kElem);
          const float v = _cvtsh_ss(kv_load_u16(block)) *
                          static_cast<float>(kv_block_level(kElem, block, static_cast<int>(i % 32)));
          seg[j] = kv_type_has_offset(kElem) ? v + _cvtsh_ss(kv_load_u16(block + 2)) : v;
        }
        _mm256_storeu_ps(dst, _mm256_load_ps(seg));
      }
      d = (hd + 7) / 8 * 8;
    }
  } else {
    constexpr size_t kElemBytes = kElem == KvType::F32 ? 4 : 2;
    row += head_value * kElemBytes;
    for (; d + 8 <= hd; d += 8, dst += seg_stride) _mm256_storeu_ps(dst, widen8<kElem>(row + d * kElemBytes));
    if (d < hd) {  // the last values through a zero-padded segment
      alignas(32) uint8_t tail[8 * kElemBytes] = {};
      std::memcpy(tail, row + d * kElemBytes, (hd - d) * kElemBytes);
      _mm256_storeu_ps(dst, widen8<kElem>(tail));
      d += 8;
      dst += seg_stride;
    }
  }
  for (; d < hp; d += 8, dst += seg_stride) _mm256_storeu_ps(dst, _mm256_setzero_ps());
}

using WidenRowFn = void (*)(const uint8_t* row, size_t head_value, size_t hd, size_t hp, float* dst, size_t seg_stride);

inline WidenRowFn widen_row_fn(KvType t) {
  switch (t) {
    case KvType::F32: return widen_row<KvType::F32>;
    case KvType::F16: return widen_row<KvType::F16>;
    case KvType::BF16: return widen_row<KvType::BF16>;
    case KvType::Q8_0: return widen_row<KvType::Q8_0>;
    case KvType::Q4_0: return widen_row<KvType::Q4_0>;
    case KvType::Q4_1: return widen_row<KvType::Q4_1>;
    case KvType::IQ4_NL: return widen_row<KvType::IQ4_NL>;
    case KvType::Q5_0: return widen_row<KvType::Q5_0>;
    case KvType::Q5_1: return widen_row<KvType::Q5_1>;
    case KvType::Q8_PC:  // never asked for: widen_chunk widens a per-channel group itself
    case KvType::Q4_PC: break;
  }
  return widen_row<KvType::F32>;
}

// Widens the K and V rows of positions c0..c0+n_rows-1 (K in Ops' layout, V as [n_rows][hp]), and prefetches the
// rows of the next chunk (positions below n_pos_max) so that they stream in from memory meanwhile. Where Ops has
// a two-row F16 widening (Ops::kPairsF16: 16-lane converts and stores, for heads of whole 16-value segments) and
// K and V are F16, rows are widened in pairs: the same floats in the same places.
template <typename Ops>
void widen_chunk(const KvPages& kv, int32_t c0, int32_t n_rows, int32_t n_pos_max, size_t hd, size_t hp,
                 float* kbuf, float* vbuf) {
  const KvSpan k_head = kv_span(kv.k_type, kv.head_value, hd), v_head = kv_span(kv.v_type, kv.head_value, hd);
  // (table index, slot) of the first row widened and of the first one prefetched.
  int32_t table_index = c0 / kv.block_size, slot = c0 % kv.block_size;
  const int32_t next = c0 + kAttnChunk;
  int32_t ahead_index = next / kv.block_size, ahead_slot = next % kv.block_size;
  prefetch_rows(kv, k_head, v_head, min32(n_rows, n_pos_max - next), ahead_index, ahead_slot);
  size_t row[kAttnChunk];  // [n_rows] row number of each position
  for_rows(kv, n_rows, table_index, slot, [&row](int32_t i, size_t r) { row[i] = r; });
  int32_t i = 0;
  if constexpr (Ops::kPairsF16) {
    if (kv.k_type == KvType::F16 && kv.v_type == KvType::F16 && hd % 16 == 0) {
      const size_t off = 2 * kv.head_value;
      for (; i + 2 <= n_rows; i += 2) {
        Ops::widen_pair_f16(kv.k_base + row[i] * kv.k_row_bytes + off, kv.k_base + row[i + 1] * kv.k_row_bytes + off,
                            hd, Ops::k_row(kbuf, hp, i));
        Ops::widen_f16(kv.v_base + row[i] * kv.v_row_bytes + off, hd, vbuf + static_cast<size_t>(i) * hp);
        Ops::widen_f16(kv.v_base + row[i + 1] * kv.v_row_bytes + off, hd, vbuf + static_cast<size_t>(i + 1) * hp);
      }
    }
  }
  // Per-channel keys: the chunk's group widened once (attention.h), its rows then read as f32 ones.
  thread_local std::vector<float> group;
  const bool channel_keys = kv_type_is_per_channel(kv.k_type);
  if (channel_keys) {
    group.resize(std::max(group.size(), static_cast<size_t>(kAttnChunk) * hd));
    widen_channel_chunk(kv, c0, n_rows, hd, group.data(), hd);
  }
  const WidenRowFn widen_k = widen_row_fn(channel_keys ? KvType::F32 : kv.k_type), widen_v = widen_row_fn(kv.v_type);
  for (; i < n_rows; ++i) {
    const uint8_t* k_src = channel_keys ? reinterpret_cast<const uint8_t*>(group.data() + static_cast<size_t>(i) * hd)
                                        : kv.k_base + row[i] * kv.k_row_bytes;
    widen_k(k_src, channel_keys ? 0 : kv.head_value, hd, hp, Ops::k_row(kbuf, hp, i), Ops::kKSegStride);
    widen_v(kv.v_base + row[i] * kv.v_row_bytes, kv.head_value, hd, hp, vbuf + static_cast<size_t>(i) * hp, 8);
  }
  // Rows up to the end of the last 8-row group are scored (then masked): keep them finite.
  for (int32_t i = n_rows; i < (n_rows + 7) / 8 * 8; ++i) {
    float* dst = Ops::k_row(kbuf, hp, i);
    for (size_t d = 0; d < hp; d += 8, dst += Ops::kKSegStride) _mm256_storeu_ps(dst, _mm256_setzero_ps());
  }
}

// 8 floats rounded to bf16 precision (round to nearest even on the bits; NaN stays NaN).
inline __m256 round_bf16x8(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256 rounded = _mm256_castsi256_ps(_mm256_and_si256(biased, _mm256_set1_epi32(-65536)));
  return _mm256_blendv_ps(rounded, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

inline __m256 round_x8(KvType type, __m256 v) {
  switch (type) {
    case KvType::F32: return v;
    case KvType::F16: return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    case KvType::BF16: return round_bf16x8(v);
    default: return v;  // block types: the query stays f32; rows are dequantized
  }
}

// dst[0..hp) = q rounded to the storage type, then zeros (tail values go through a zero-padded vector).
inline void round_query(KvType type, const float* q, size_t hd, size_t hp, float* dst) {
  size_t d = 0;
  for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(dst + d, round_x8(type, _mm256_loadu_ps(q + d)));
  if (d < hd) {
    alignas(32) float tmp[8] = {};
    std::memcpy(tmp, q + d, (hd - d) * sizeof(float));
    _mm256_store_ps(tmp, round_x8(type, _mm256_load_ps(tmp)));
    std::memcpy(dst + d, tmp, (hd - d) * sizeof(float));
  }
  for (d = hd; d < hp; ++d) dst[d] = 0.0f;
}

// Scores of rows 8g..8g+7: lane r = (q . k_r) * scale, soft-capped when softcap > 0 (inv_cap = 1 / softcap), -inf
// for rows outside [i_lo, n_valid). kWindowed false: i_lo == 0 and softcap == 0 (the code of a tile without
// windows or caps, which is every llama tile, carries none of their tests).
template <typename Ops, bool kWindowed>
inline __m256 score_group(const float* q, const float* kbuf, size_t hp, int g, int32_t i_lo, int32_t n_valid,
                          float scale, float softcap, float inv_cap) {
  __m256 dots[8];
  Ops::dots8(q, kbuf, hp, g, dots);
  __m256 s = _mm256_mul_ps(hsum_8x8(dots), _mm256_set1_ps(scale));
  if (kWindowed && softcap > 0.0f) {
    s = _mm256_mul_ps(_mm256_set1_ps(softcap), tanh_x8(_mm256_mul_ps(s, _mm256_set1_ps(inv_cap))));
  }
  const __m256i index = _mm256_add_epi32(_mm256_set1_epi32(8 * g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), index);
  if (kWindowed && i_lo > 8 * g) valid = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(i_lo), index), valid);
  return _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), s, _mm256_castsi256_ps(valid));
}

// One query's online-softmax step over a chunk: s = the chunk's scores in kGroups groups of 8 (-inf where masked;
// groups from n_groups on are ignored). Updates the running max m and sum l, writes the chunk's weights
// p[0 .. kAttnChunk) (zeros past the groups scored) and returns the rescale factor a = exp(m_old - m_new).
inline float softmax_chunk(const __m256 (&s)[kGroups], int n_groups, float& m, float& l, float* p) {
  __m256 sv[kGroups];
  for (int g = 0; g < kGroups; ++g) sv[g] = g < n_groups ? s[g] : _mm256_set1_ps(-__builtin_inff());
  const float chunk_max = hmax(_mm256_max_ps(_mm256_max_ps(sv[0], sv[1]), _mm256_max_ps(sv[2], sv[3])));
  const float m_new = chunk_max > m ? chunk_max : m;
  const float a = m == m_new ? 1.0f : _mm256_cvtss_f32(exp_x8(_mm256_set1_ps(m - m_new)));
  const __m256 vm = _mm256_set1_ps(m_new);
  __m256 e[kGroups];
  for (int g = 0; g < kGroups; ++g) {
    e[g] = g < n_groups ? exp_x8(_mm256_sub_ps(sv[g], vm)) : _mm256_setzero_ps();
    _mm256_storeu_ps(p + 8 * g, e[g]);
  }
  const float sum = hsum(_mm256_add_ps(_mm256_add_ps(e[0], e[1]), _mm256_add_ps(e[2], e[3])));
  l = __builtin_fmaf(l, a, sum);
  m = m_new;
  return a;
}

constexpr size_t kMaxActive = 16;  // queries whose weights are formed before their V accumulation

// The chunk's first row of query j's window (0 unless the window starts inside the chunk).
template <bool kWindowed>
inline int32_t window_row(const AttnTile& tile, size_t j, int32_t c0) {
  if constexpr (!kWindowed) return 0;
  const int32_t i_lo = tile.queries[j].first_pos - c0;
  return i_lo > 0 ? i_lo : 0;
}

// The V accumulation over rows [i_lo, n_valid) of the chunk for query j alone.
template <typename Ops, bool kWindowed>
void accumulate_one(float* scratch, const AttnLayout& lay, int32_t c0, const AttnTile& tile, const float* vbuf,
                    size_t hp, size_t j) {
  const int32_t i_lo = window_row<kWindowed>(tile, j, c0);
  Ops::accumulate_v(scratch + lay.acc + j * hp, scratch[lay.a + j], scratch + lay.p + j * kAttnChunk + i_lo,
                    vbuf + static_cast<size_t>(i_lo) * hp, hp, min32(kAttnChunk, tile.queries[j].n_pos - c0) - i_lo);
}

// The V accumulation of the chunk for the listed queries, in pairs (a query whose window starts inside the chunk
// alone, from its window's first row; per lane the same sequence as in a pair).
template <typename Ops, bool kWindowed>
void accumulate_active(float* scratch, const AttnLayout& lay, int32_t c0, const AttnTile& tile, const float* vbuf,
                       size_t hp, const size_t* active, size_t n_active) {
  size_t k = 0;
  for (; k + 2 <= n_active; k += 2) {
    const size_t j0 = active[k], j1 = active[k + 1];
    if (window_row<kWindowed>(tile, j0, c0) > 0 || window_row<kWindowed>(tile, j1, c0) > 0) {
      accumulate_one<Ops, kWindowed>(scratch, lay, c0, tile, vbuf, hp, j0);
      accumulate_one<Ops, kWindowed>(scratch, lay, c0, tile, vbuf, hp, j1);
      continue;
    }
    Ops::accumulate_v2(scratch + lay.acc + j0 * hp, scratch[lay.a + j0], scratch + lay.p + j0 * kAttnChunk,
                       min32(kAttnChunk, tile.queries[j0].n_pos - c0), scratch + lay.acc + j1 * hp,
                       scratch[lay.a + j1], scratch + lay.p + j1 * kAttnChunk,
                       min32(kAttnChunk, tile.queries[j1].n_pos - c0), vbuf, hp);
  }
  if (k < n_active) accumulate_one<Ops, kWindowed>(scratch, lay, c0, tile, vbuf, hp, active[k]);
}

template <typename Ops, bool kWindowed>
void attention_tile_body(const AttnTile& tile, float* scratch) {
  const AttnLayout lay(tile.head_dim, tile.n_queries);
  const size_t hd = tile.head_dim, hp = lay.hd_pad;
  const KvPages& kv = tile.kv;
  float* kbuf = scratch + lay.k;  // Ops' layout of [kAttnChunk][hp]
  float* vbuf = scratch + lay.v;  // [kAttnChunk][hp]
  int32_t n_pos_max = 0, first_pos_min = tile.n_queries > 0 ? tile.queries[0].first_pos : 0;
  for (size_t j = 0; j < tile.n_queries; ++j) {
    n_pos_max = tile.queries[j].n_pos > n_pos_max ? tile.queries[j].n_pos : n_pos_max;
    first_pos_min = min32(first_pos_min, tile.queries[j].first_pos);
    round_query(kv.k_type, tile.queries[j].q, hd, hp, scratch + lay.q + j * hp);
    std::memset(scratch + lay.acc + j * hp, 0, hp * sizeof(float));
    scratch[lay.m + j] = -__builtin_inff();
    scratch[lay.l + j] = 0.0f;
  }

  const float inv_cap = tile.softcap > 0.0f ? 1.0f / tile.softcap : 0.0f;
  for (int32_t c0 = first_pos_min / kAttnChunk * kAttnChunk; c0 < n_pos_max; c0 += kAttnChunk) {
    const int32_t n_rows = min32(kAttnChunk, n_pos_max - c0);
    widen_chunk<Ops>(kv, c0, n_rows, n_pos_max, hd, hp, kbuf, vbuf);
    // Weights of every query first, then the V accumulation two queries at a time (independent FMA chains).
    size_t active[kMaxActive];
    size_t n_active = 0;
    for (size_t j = 0; j < tile.n_queries; ++j) {
      const int32_t n_valid = min32(kAttnChunk, tile.queries[j].n_pos - c0);
      const int32_t i_lo = window_row<kWindowed>(tile, j, c0);
      if (n_valid <= i_lo) continue;
      active[n_active++] = j;
      const float* q = scratch + lay.q + j * hp;
      float* p = scratch + lay.p + j * kAttnChunk;
      const int n_groups = (n_valid + 7) / 8;
      __m256 s[kGroups];
      for (int g = 0; g < kGroups; ++g) {  // groups wholly before the window are not scored
        s[g] = g < n_groups && 8 * (g + 1) > i_lo
                   ? score_group<Ops, kWindowed>(q, kbuf, hp, g, i_lo, n_valid, tile.scale, tile.softcap, inv_cap)
                   : _mm256_set1_ps(-__builtin_inff());
      }
      scratch[lay.a + j] = softmax_chunk(s, n_groups, scratch[lay.m + j], scratch[lay.l + j], p);
      if (n_active == kMaxActive) {
        accumulate_active<Ops, kWindowed>(scratch, lay, c0, tile, vbuf, hp, active, n_active);
        n_active = 0;
      }
    }
    accumulate_active<Ops, kWindowed>(scratch, lay, c0, tile, vbuf, hp, active, n_active);
  }

  for (size_t j = 0; j < tile.n_queries; ++j) {
    const float* acc = scratch + lay.acc + j * hp;
    float* out = tile.queries[j].out;
    const __m256 vl = _mm256_set1_ps(attn_denominator(scratch[lay.l + j], scratch[lay.m + j], tile.queries[j].sink));
    size_t d = 0;
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(out + d, _mm256_div_ps(_mm256_loadu_ps(acc + d), vl));
    if (d < hd) {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, _mm256_div_ps(_mm256_loadu_ps(acc + d), vl));  // acc is padded to hp >= d + 8
      std::memcpy(out + d, tmp, (hd - d) * sizeof(float));
    }
  }
}

// The tile's body compiled for what it uses: windows or soft-capping, or neither (the same arithmetic either way).
template <typename Ops>
void attention_tile_impl(const AttnTile& tile, float* scratch) {
  bool windowed = tile.softcap > 0.0f;
  for (size_t j = 0; j < tile.n_queries && !windowed; ++j) windowed = tile.queries[j].first_pos > 0;
  if (windowed) {
    attention_tile_body<Ops, true>(tile, scratch);
  } else {
    attention_tile_body<Ops, false>(tile, scratch);
  }
}

}  // namespace
}  // namespace preface::kernels::avx2
