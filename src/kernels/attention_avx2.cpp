// AVX2 attention_tile (attention.h).
//
// Per query and chunk: scores of 8 rows at a time, each row's dot an 8-lane FMA accumulator over the padded head
// (zero padding adds exact zeros) reduced by hsum_8x8's fixed tree, then times scale; exp by exp_x8; the chunk
// sum as hsum((p0 + p1) + (p2 + p3)) over the four 8-position groups (groups past the query's last position are
// zero); acc lanes updated as acc * a, then fma(p_i, V_i, acc) for i in order.
//
// Must not call inline functions shared with baseline code (see dot_avx2.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention_layout.h"
#include "kernels/simd_avx2.h"

namespace preface::kernels::avx2 {
namespace {

constexpr int kGroups = kAttnChunk / 8;
static_assert(kGroups == 4, "the chunk sum below adds four 8-position groups");

// Byte offset of position `pos`'s row (of this KV head) from a layer base, given its block's table index and slot.
size_t row_offset(const KvPages& kv, int32_t table_index, int32_t slot) {
  const size_t block = static_cast<size_t>(kv.block_table[table_index]);
  return (block * static_cast<size_t>(kv.block_size) + static_cast<size_t>(slot)) * kv.row_bytes +
         kv.head_offset_bytes;
}

float bf16_bits_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// dst[0..hp) = the row's hd values as f32, then zeros.
template <KvElem kElem>
void widen_row(const uint8_t* row, size_t hd, size_t hp, float* dst) {
  size_t d = 0;
  if constexpr (kElem == KvElem::F32) {
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(dst + d, _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d));
    if (d < hd) std::memcpy(dst + d, row + 4 * d, (hd - d) * sizeof(float));
  } else {
    const auto* h = reinterpret_cast<const uint16_t*>(row);
    for (; d + 8 <= hd; d += 8) {
      _mm256_storeu_ps(dst + d, kElem == KvElem::F16 ? load_f16x8(h + d) : load_bf16x8(h + d));
    }
    for (size_t i = d; i < hd; ++i) {
      uint16_t v;
      std::memcpy(&v, row + 2 * i, sizeof(v));
      dst[i] = kElem == KvElem::F16 ? half_to_float(v) : bf16_bits_to_float(v);
    }
  }
  for (d = hd; d < hp; ++d) dst[d] = 0.0f;
}

// Widens the K and V rows of positions c0..c0+n_rows-1 into kbuf, vbuf: [n_rows][hp], and prefetches the rows
// of the next chunk (positions below n_pos_max) so that they stream in from memory meanwhile.
template <KvElem kElem>
void widen_chunk(const KvPages& kv, int32_t c0, int32_t n_rows, int32_t n_pos_max, size_t hd, size_t hp,
                 float* kbuf, float* vbuf) {
  constexpr size_t kElemBytes = kElem == KvElem::F32 ? 4 : 2;
  const size_t head_bytes = hd * kElemBytes;
  // (table index, slot) of the row being widened and of the one prefetched, walked rather than divided per row.
  int32_t table_index = c0 / kv.block_size, slot = c0 % kv.block_size;
  const int32_t next = c0 + kAttnChunk;
  int32_t ahead_index = next / kv.block_size, ahead_slot = next % kv.block_size;
  for (int32_t i = 0; i < n_rows; ++i) {
    if (next + i < n_pos_max) {
      const size_t ahead = row_offset(kv, ahead_index, ahead_slot);
      for (size_t b = 0; b < head_bytes; b += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(kv.k_base + ahead + b), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(kv.v_base + ahead + b), _MM_HINT_T0);
      }
      if (++ahead_slot == kv.block_size) {
        ahead_slot = 0;
        ++ahead_index;
      }
    }
    const size_t offset = row_offset(kv, table_index, slot);
    widen_row<kElem>(kv.k_base + offset, hd, hp, kbuf + static_cast<size_t>(i) * hp);
    widen_row<kElem>(kv.v_base + offset, hd, hp, vbuf + static_cast<size_t>(i) * hp);
    if (++slot == kv.block_size) {
      slot = 0;
      ++table_index;
    }
  }
}

// 8 floats rounded to bf16 precision (round to nearest even on the bits; NaN stays NaN).
__m256 round_bf16x8(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256 rounded = _mm256_castsi256_ps(_mm256_and_si256(biased, _mm256_set1_epi32(-65536)));
  return _mm256_blendv_ps(rounded, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

__m256 round_x8(KvElem elem, __m256 v) {
  switch (elem) {
    case KvElem::F32: return v;
    case KvElem::F16: return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    case KvElem::BF16: return round_bf16x8(v);
  }
  return v;
}

// dst[0..hp) = q rounded to the storage type, then zeros (tail values go through a zero-padded vector).
void round_query(KvElem elem, const float* q, size_t hd, size_t hp, float* dst) {
  size_t d = 0;
  for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(dst + d, round_x8(elem, _mm256_loadu_ps(q + d)));
  if (d < hd) {
    float tmp[8] = {};
    std::memcpy(tmp, q + d, (hd - d) * sizeof(float));
    _mm256_storeu_ps(tmp, round_x8(elem, _mm256_loadu_ps(tmp)));
    std::memcpy(dst + d, tmp, (hd - d) * sizeof(float));
  }
  for (d = hd; d < hp; ++d) dst[d] = 0.0f;
}

// Scores of rows 8g..8g+7 of kbuf: lane r = (q . k_r) * scale, -inf for rows >= n_valid.
__m256 score_group(const float* q, const float* kbuf, size_t hp, int g, int32_t n_valid, float scale) {
  __m256 a[8];
  for (int r = 0; r < 8; ++r) a[r] = _mm256_setzero_ps();
  const float* kg = kbuf + static_cast<size_t>(8 * g) * hp;  // [8][hp]
  for (size_t d = 0; d < hp; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int r = 0; r < 8; ++r) a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(kg + r * hp + d), qv, a[r]);
  }
  const __m256 s = _mm256_mul_ps(hsum_8x8(a), _mm256_set1_ps(scale));
  const __m256i index = _mm256_add_epi32(_mm256_set1_epi32(8 * g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), index));
  return _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), s, valid);
}

// acc[0..8 NR) = acc * a + sum_i p[i] * vbuf[i][0..8 NR), i < n_valid in order. vbuf rows are hp floats apart.
template <int NR>
void accumulate_v(float* acc, float a, const float* p, const float* vbuf, size_t hp, int32_t n_valid) {
  __m256 r[NR];
  const __m256 va = _mm256_set1_ps(a);
  for (int k = 0; k < NR; ++k) r[k] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * k), va);
  for (int32_t i = 0; i < n_valid; ++i) {
    const __m256 pi = _mm256_set1_ps(p[i]);
    const float* v = vbuf + static_cast<size_t>(i) * hp;
    for (int k = 0; k < NR; ++k) r[k] = _mm256_fmadd_ps(pi, _mm256_loadu_ps(v + 8 * k), r[k]);
  }
  for (int k = 0; k < NR; ++k) _mm256_storeu_ps(acc + 8 * k, r[k]);
}

void accumulate_v_any(float* acc, float a, const float* p, const float* vbuf, size_t hp, int32_t n_valid) {
  for (size_t d0 = 0; d0 < hp; d0 += 64) {
    const size_t n_regs = std::min<size_t>(8, (hp - d0) / 8);
    float* ad = acc + d0;
    const float* vd = vbuf + d0;
    switch (n_regs) {
      case 1: accumulate_v<1>(ad, a, p, vd, hp, n_valid); break;
      case 2: accumulate_v<2>(ad, a, p, vd, hp, n_valid); break;
      case 3: accumulate_v<3>(ad, a, p, vd, hp, n_valid); break;
      case 4: accumulate_v<4>(ad, a, p, vd, hp, n_valid); break;
      case 5: accumulate_v<5>(ad, a, p, vd, hp, n_valid); break;
      case 6: accumulate_v<6>(ad, a, p, vd, hp, n_valid); break;
      case 7: accumulate_v<7>(ad, a, p, vd, hp, n_valid); break;
      default: accumulate_v<8>(ad, a, p, vd, hp, n_valid); break;
    }
  }
}

}  // namespace

void attention_tile(const AttnTile& tile, float* scratch) {
  const AttnLayout lay(tile.head_dim, tile.n_queries);
  const size_t hd = tile.head_dim, hp = lay.hd_pad;
  const KvPages& kv = tile.kv;
  float* kbuf = scratch + lay.k;  // [kAttnChunk][hp]
  float* vbuf = scratch + lay.v;  // [kAttnChunk][hp]
  float* p = scratch + lay.p;     // [kAttnChunk]
  int32_t n_pos_max = 0;
  for (size_t j = 0; j < tile.n_queries; ++j) {
    n_pos_max = std::max(n_pos_max, tile.queries[j].n_pos);
    round_query(kv.elem, tile.queries[j].q, hd, hp, scratch + lay.q + j * hp);
    std::memset(scratch + lay.acc + j * hp, 0, hp * sizeof(float));
    scratch[lay.m + j] = -__builtin_inff();
    scratch[lay.l + j] = 0.0f;
  }

  for (int32_t c0 = 0; c0 < n_pos_max; c0 += kAttnChunk) {
    const int32_t n_rows = std::min(kAttnChunk, n_pos_max - c0);
    switch (kv.elem) {
      case KvElem::F32: widen_chunk<KvElem::F32>(kv, c0, n_rows, n_pos_max, hd, hp, kbuf, vbuf); break;
      case KvElem::F16: widen_chunk<KvElem::F16>(kv, c0, n_rows, n_pos_max, hd, hp, kbuf, vbuf); break;
      case KvElem::BF16: widen_chunk<KvElem::BF16>(kv, c0, n_rows, n_pos_max, hd, hp, kbuf, vbuf); break;
    }
    // Rows up to the end of the last 8-row group are scored (then masked): keep them finite.
    const int32_t n_rows_padded = (n_rows + 7) / 8 * 8;
    std::memset(kbuf + static_cast<size_t>(n_rows) * hp, 0, static_cast<size_t>(n_rows_padded - n_rows) * hp * 4);

    for (size_t j = 0; j < tile.n_queries; ++j) {
      const int32_t n_valid = std::min(kAttnChunk, tile.queries[j].n_pos - c0);
      if (n_valid <= 0) continue;
      const float* q = scratch + lay.q + j * hp;
      const int n_groups = (n_valid + 7) / 8;
      __m256 s[kGroups];
      for (int g = 0; g < kGroups; ++g) {
        s[g] = g < n_groups ? score_group(q, kbuf, hp, g, n_valid, tile.scale) : _mm256_set1_ps(-__builtin_inff());
      }
      const float chunk_max = hmax(_mm256_max_ps(_mm256_max_ps(s[0], s[1]), _mm256_max_ps(s[2], s[3])));
      float& m = scratch[lay.m + j];
      float& l = scratch[lay.l + j];
      const float m_new = chunk_max > m ? chunk_max : m;
      const float a = m == m_new ? 1.0f : _mm256_cvtss_f32(exp_x8(_mm256_set1_ps(m - m_new)));
      const __m256 vm = _mm256_set1_ps(m_new);
      __m256 e[kGroups];
      for (int g = 0; g < kGroups; ++g) {
        e[g] = g < n_groups ? exp_x8(_mm256_sub_ps(s[g], vm)) : _mm256_setzero_ps();
        _mm256_storeu_ps(p + 8 * g, e[g]);
      }
      const float sum = hsum(_mm256_add_ps(_mm256_add_ps(e[0], e[1]), _mm256_add_ps(e[2], e[3])));
      l = __builtin_fmaf(l, a, sum);
      m = m_new;
      accumulate_v_any(scratch + lay.acc + j * hp, a, p, vbuf, hp, n_valid);
    }
  }

  for (size_t j = 0; j < tile.n_queries; ++j) {
    const float* acc = scratch + lay.acc + j * hp;
    float* out = tile.queries[j].out;
    const __m256 vl = _mm256_set1_ps(scratch[lay.l + j]);
    size_t d = 0;
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(out + d, _mm256_div_ps(_mm256_loadu_ps(acc + d), vl));
    if (d < hd) {
      float tmp[8];
      _mm256_storeu_ps(tmp, _mm256_div_ps(_mm256_loadu_ps(acc + d), vl));  // acc is padded to hp >= d + 8
      std::memcpy(out + d, tmp, (hd - d) * sizeof(float));
    }
  }
}

}  // namespace preface::kernels::avx2
