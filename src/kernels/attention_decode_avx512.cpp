// AVX-512 attention for tiles whose queries all attend the same positions (decode: the query heads of one token
// that share a KV head), bit-identical to avx2::attention_tile (attention_tile_avx2.h defines the arithmetic).
//
// The shared tile widens every chunk of K and V rows into an f32 copy and reads it back per query: worth it for a
// prefill tile of dozens of queries, but for the 1 - 8 queries of a decode tile the stores and reloads cost more
// than the dots. Here the rows are read straight from the pages:
//   - scores: each 16-lane load holds 8 values of two rows (as ZmmOps stores them), converted once and used by
//     up to kScoreQueries queries, each with its own 4 registers of two rows' 8-lane accumulators;
//   - V: each 16 values of a row, converted once, feed the accumulators of up to kVQueries queries.
// Q8_0 rows are dequantized the same way on the fly (f32(d) * f32(q), exact), 8 or 16 values at a time.
// Per output the steps are the shared tile's: the same 8-lane accumulators over the head in order, hsum_8x8, the
// same chunk max, exp_x8 and chunk sum, acc * a and then fma(p_i, V_i, acc) over the chunk's positions in order.
// Rows past the last position are never read; a group's missing rows are scored against zeros and masked, as
// in the shared tile.
// Several tiles (the KV heads of one token: their slices share every row's cache lines) run chunk by chunk
// together, each with its own state: a thread then reads whole rows in order instead of one head's slice of each,
// which the hardware prefetchers do not follow and which streams from memory far slower (see docs/perf-log/).
//
// Standard headers come before the target pragma and the kernel headers after it have internal linkage, so no
// code compiled for AVX-512 is shared with other translation units.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <algorithm>

#ifndef __clang__  // clang ignores target pragmas: its builds pass the ISA flags for this file instead
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as a don't-care source, which -W(maybe-)uninitialized
// reports as a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/attention_rows_avx512.h"
#include "kernels/attention_tile_avx2.h"

namespace preface::kernels::avx512 {
namespace {

using avx2::for_rows;
using avx2::hsum_8x8;
using avx2::kGroups;
using avx2::min32;
using avx2::prefetch_rows;
using avx2::round_query;
using avx2::softmax_chunk;

constexpr int kScoreQueries = 4;  // queries scored together: 4 accumulators + 1 query register each
constexpr int kVQueries = 4;      // queries whose V accumulators (kVRegs each) are live together
constexpr int kVRegs = 4;         // 16-value registers of a head accumulated per pass over the rows

// Scores of rows 8g..8g+7 (row pointers rows[8g..8g+7]) for NQ queries q[j * hp ...]: p[j * kAttnChunk + 8g + r]
// = (q_j . k_r) * scale, -inf for rows >= n_valid. Per row: ZmmOps::dots8's 8-lane accumulator, hsum_8x8.
template <KvType kElem, int NQ>
void score_group(const uint8_t* const* rows, const float* q, size_t hp, int g, int32_t n_valid, float scale,
                 float* p) {
  __m512 acc[NQ][4];
  for (auto& query : acc) {
    for (__m512& v : query) v = _mm512_setzero_ps();
  }
  const uint8_t* const* r = rows + 8 * g;
  for (size_t s = 0; s < hp / 8; ++s) {
    __m512 k[4];
    for (int pr = 0; pr < 4; ++pr) k[pr] = Rows<kElem>::pair(r[2 * pr], r[2 * pr + 1], s);
    for (int j = 0; j < NQ; ++j) {
      const __m512 q2 = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + static_cast<size_t>(j) * hp + 8 * s));
      for (int pr = 0; pr < 4; ++pr) acc[j][pr] = _mm512_fmadd_ps(k[pr], q2, acc[j][pr]);
    }
  }
  const __m256i index = _mm256_add_epi32(_mm256_set1_epi32(8 * g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), index));
  for (int j = 0; j < NQ; ++j) {
    __m256 dots[8];
    for (int pr = 0; pr < 4; ++pr) {
      dots[2 * pr] = _mm512_castps512_ps256(acc[j][pr]);
      dots[2 * pr + 1] = _mm512_extractf32x8_ps(acc[j][pr], 1);
    }
    const __m256 s = _mm256_mul_ps(hsum_8x8(dots), _mm256_set1_ps(scale));
    _mm256_storeu_ps(p + static_cast<size_t>(j) * kAttnChunk + 8 * g,
                     _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), s, valid));
  }
}

// For NQ queries: acc_j[d0 .. d0 + 16 NZ) = acc_j * a_j + sum_i p_j[i] * V_i[d0 ..], i < n_valid in order.
// acc: [NQ][hp], a: [NQ], p: [NQ][kAttnChunk].
template <KvType kElem, int NQ, int NZ>
void accumulate(float* acc, const float* a, const float* p, const uint8_t* const* rows, size_t hp, size_t d0,
                int32_t n_valid) {
  __m512 r[NQ][NZ];
  for (int j = 0; j < NQ; ++j) {
    const __m512 va = _mm512_set1_ps(a[j]);
    for (int k = 0; k < NZ; ++k) r[j][k] = _mm512_mul_ps(_mm512_loadu_ps(acc + j * hp + d0 + 16 * k), va);
  }
  for (int32_t i = 0; i < n_valid; ++i) {
    __m512 w[NQ];
    for (int j = 0; j < NQ; ++j) w[j] = _mm512_set1_ps(p[j * kAttnChunk + i]);
    for (int k = 0; k < NZ; ++k) {
      const __m512 vk = Rows<kElem>::load16(rows[i], d0 + 16 * static_cast<size_t>(k));
      for (int j = 0; j < NQ; ++j) r[j][k] = _mm512_fmadd_ps(w[j], vk, r[j][k]);
    }
  }
  for (int j = 0; j < NQ; ++j) {
    for (int k = 0; k < NZ; ++k) _mm512_storeu_ps(acc + j * hp + d0 + 16 * k, r[j][k]);
  }
}

template <KvType kElem, int NQ>
void accumulate_queries(float* acc, const float* a, const float* p, const uint8_t* const* rows, size_t hp,
                        int32_t n_valid) {
  for (size_t d0 = 0; d0 < hp; d0 += 16 * kVRegs) {
    switch ((hp - d0) / 16) {
      case 1: accumulate<kElem, NQ, 1>(acc, a, p, rows, hp, d0, n_valid); break;
      case 2: accumulate<kElem, NQ, 2>(acc, a, p, rows, hp, d0, n_valid); break;
      case 3: accumulate<kElem, NQ, 3>(acc, a, p, rows, hp, d0, n_valid); break;
      default: accumulate<kElem, NQ, kVRegs>(acc, a, p, rows, hp, d0, n_valid); break;
    }
  }
}

// One tile's state between chunks; tiles over the same positions run chunk by chunk together (shared_tiles).
template <KvType kK, KvType kV>
class SharedTile {
 public:
  // Rounds the queries and clears the running sums in scratch (attention_scratch_floats(head_dim, n_queries)).
  void begin(const AttnTile& tile, float* scratch) {
    tile_ = &tile;
    scratch_ = scratch;
    lay_ = AttnLayout(tile.head_dim, tile.n_queries);
    n_pos_ = tile.queries[0].n_pos;
    table_index_ = slot_ = 0;
    const size_t hd = tile.head_dim, hp = lay_.hd_pad;  // hp == hd (a multiple of 16)
    zero_row_ = reinterpret_cast<uint8_t*>(scratch + lay_.k);  // the widened copy's space, unused here
    std::memset(zero_row_, 0, kv_row_bytes(kK, hd));  // block types: d = 0 (and m = 0), values 0
    for (size_t j = 0; j < tile.n_queries; ++j) {
      round_query(tile.kv.k_type, tile.queries[j].q, hd, hp, scratch + lay_.q + j * hp);
      std::memset(scratch + lay_.acc + j * hp, 0, hp * sizeof(float));
      scratch[lay_.m + j] = -__builtin_inff();
      scratch[lay_.l + j] = 0.0f;
    }
  }

  int32_t n_pos() const { return n_pos_; }

  // Positions [c0, c0 + kAttnChunk) ∩ [0, n_pos), c0 advancing by kAttnChunk from 0 over successive calls.
  void chunk(int32_t c0) {
    const AttnTile& tile = *tile_;
    const KvPages& kv = tile.kv;
    const size_t hp = lay_.hd_pad, nq = tile.n_queries;
    const KvSpan k_head = kv_span(kK, kv.head_value, tile.head_dim), v_head = kv_span(kV, kv.head_value, tile.head_dim);
    float* q = scratch_ + lay_.q;      // [nq][hp]
    float* acc = scratch_ + lay_.acc;  // [nq][hp]
    float* p = scratch_ + lay_.p;      // [nq][kAttnChunk]
    const int32_t n_valid = min32(kAttnChunk, n_pos_ - c0);
    const int n_groups = (n_valid + 7) / 8;
    for_rows(kv, n_valid, table_index_, slot_, [&](int32_t i, size_t row) {
      k_rows_[i] = kv.k_base + row * kv.k_row_bytes + k_head.offset;
      v_rows_[i] = kv.v_base + row * kv.v_row_bytes + v_head.offset;
    });
    for (int32_t i = n_valid; i < 8 * n_groups; ++i) k_rows_[i] = zero_row_;
    // The next chunk's rows stream in from memory while this one is computed.
    int32_t ahead_index = table_index_, ahead_slot = slot_;
    prefetch_rows(kv, k_head, v_head, min32(kAttnChunk, n_pos_ - c0 - kAttnChunk), ahead_index, ahead_slot);

    for (size_t j0 = 0; j0 < nq; j0 += kScoreQueries) {
      const float* qj = q + j0 * hp;
      float* pj = p + j0 * kAttnChunk;
      for (int g = 0; g < n_groups; ++g) {
        switch (nq - j0) {
          case 1: score_group<kK, 1>(k_rows_, qj, hp, g, n_valid, tile.scale, pj); break;
          case 2: score_group<kK, 2>(k_rows_, qj, hp, g, n_valid, tile.scale, pj); break;
          case 3: score_group<kK, 3>(k_rows_, qj, hp, g, n_valid, tile.scale, pj); break;
          default: score_group<kK, kScoreQueries>(k_rows_, qj, hp, g, n_valid, tile.scale, pj); break;
        }
      }
    }
    // The shared tile's online-softmax step, per query.
    for (size_t j = 0; j < nq; ++j) {
      float* pj = p + j * kAttnChunk;
      __m256 s[kGroups];
      for (int g = 0; g < kGroups; ++g) s[g] = g < n_groups ? _mm256_loadu_ps(pj + 8 * g) : _mm256_setzero_ps();
      scratch_[lay_.a + j] = softmax_chunk(s, n_groups, scratch_[lay_.m + j], scratch_[lay_.l + j], pj);
    }
    for (size_t j0 = 0; j0 < nq; j0 += kVQueries) {
      float* aj = acc + j0 * hp;
      const float* a = scratch_ + lay_.a + j0;
      const float* pj = p + j0 * kAttnChunk;
      switch (nq - j0) {
        case 1: accumulate_queries<kV, 1>(aj, a, pj, v_rows_, hp, n_valid); break;
        case 2: accumulate_queries<kV, 2>(aj, a, pj, v_rows_, hp, n_valid); break;
        case 3: accumulate_queries<kV, 3>(aj, a, pj, v_rows_, hp, n_valid); break;
        default: accumulate_queries<kV, kVQueries>(aj, a, pj, v_rows_, hp, n_valid); break;
      }
    }
  }

  // Writes out = acc / attn_denominator(l, m, sink) for every query.
  void finish() const {
    const size_t hp = lay_.hd_pad;
    for (size_t j = 0; j < tile_->n_queries; ++j) {
      const __m512 vl =
          _mm512_set1_ps(attn_denominator(scratch_[lay_.l + j], scratch_[lay_.m + j], tile_->queries[j].sink));
      const float* acc = scratch_ + lay_.acc + j * hp;
      for (size_t d = 0; d < tile_->head_dim; d += 16) {
        _mm512_storeu_ps(tile_->queries[j].out + d, _mm512_div_ps(_mm512_loadu_ps(acc + d), vl));
      }
    }
  }

 private:
  const AttnTile* tile_ = nullptr;
  float* scratch_ = nullptr;
  AttnLayout lay_{0, 0};
  int32_t n_pos_ = 0;
  int32_t table_index_ = 0, slot_ = 0;  // of the next chunk's first position
  uint8_t* zero_row_ = nullptr;  // zeros standing in for a last 8-row group's rows past n_pos
  const uint8_t* k_rows_[kAttnChunk] = {};  // the current chunk's rows of this tile's head
  const uint8_t* v_rows_[kAttnChunk] = {};
};

constexpr size_t kTogether = 8;  // tiles run chunk by chunk together at most

// Tiles [0, n) in batches of kTogether, each batch chunk by chunk over its longest n_pos.
template <KvType kK, KvType kV>
void shared_tiles(const AttnTile* tiles, size_t n_tiles, float* scratch, size_t scratch_stride) {
  for (size_t t0 = 0; t0 < n_tiles; t0 += kTogether) {
    const size_t n = n_tiles - t0 < kTogether ? n_tiles - t0 : kTogether;
    SharedTile<kK, kV> batch[kTogether];
    int32_t n_pos_max = 0;
    for (size_t i = 0; i < n; ++i) {
      batch[i].begin(tiles[t0 + i], scratch + (t0 + i) * scratch_stride);
      n_pos_max = batch[i].n_pos() > n_pos_max ? batch[i].n_pos() : n_pos_max;
    }
    for (int32_t c0 = 0; c0 < n_pos_max; c0 += kAttnChunk) {
      for (size_t i = 0; i < n; ++i) {
        if (c0 < batch[i].n_pos()) batch[i].chunk(c0);
      }
    }
    for (size_t i = 0; i < n; ++i) batch[i].finish();
  }
}

// The (K, V) type pairs the shared tile is built for: each type with itself, and q8_0 or f16 keys with the smaller
// value types users pair them with. Heads must be whole 16-value segments (F32, F16, BF16) or whole blocks.
using SharedFn = void (*)(const AttnTile*, size_t, float*, size_t);

template <KvType kK, KvType kV>
constexpr std::pair<std::pair<KvType, KvType>, SharedFn> pair_entry() {
  return {{kK, kV}, shared_tiles<kK, kV>};
}

constexpr std::pair<std::pair<KvType, KvType>, SharedFn> kSharedPairs[] = {
    pair_entry<KvType::F16, KvType::F16>(),       pair_entry<KvType::BF16, KvType::BF16>(),
    pair_entry<KvType::F32, KvType::F32>(),       pair_entry<KvType::Q8_0, KvType::Q8_0>(),
    pair_entry<KvType::Q4_0, KvType::Q4_0>(),     pair_entry<KvType::Q4_1, KvType::Q4_1>(),
    pair_entry<KvType::IQ4_NL, KvType::IQ4_NL>(), pair_entry<KvType::Q5_0, KvType::Q5_0>(),
    pair_entry<KvType::Q5_1, KvType::Q5_1>(),     pair_entry<KvType::Q8_0, KvType::Q4_0>(),
    pair_entry<KvType::Q8_0, KvType::Q4_1>(),     pair_entry<KvType::Q8_0, KvType::IQ4_NL>(),
    pair_entry<KvType::Q8_0, KvType::Q5_0>(),     pair_entry<KvType::Q8_0, KvType::Q5_1>(),
    pair_entry<KvType::F16, KvType::Q8_0>(),      pair_entry<KvType::F16, KvType::Q4_0>(),
};

SharedFn shared_fn(KvType k, KvType v) {
  for (const auto& [types, fn] : kSharedPairs) {
    if (types.first == k && types.second == v) return fn;
  }
  return nullptr;
}

size_t head_multiple(KvType t) { return kv_type_is_quantized(t) ? 32 : 16; }

}  // namespace

bool attention_tiles_shared(const AttnTile* tiles, size_t n_tiles, float* scratch, size_t scratch_stride) {
  if (n_tiles == 0) return true;
  const KvType k = tiles[0].kv.k_type, v = tiles[0].kv.v_type;
  const SharedFn fn = shared_fn(k, v);
  if (fn == nullptr) return false;
  const size_t multiple = std::max(head_multiple(k), head_multiple(v));
  for (size_t i = 0; i < n_tiles; ++i) {
    const AttnTile& tile = tiles[i];
    if (tile.kv.k_type != k || tile.kv.v_type != v || tile.n_queries == 0 || tile.head_dim == 0 ||
        tile.head_dim % multiple != 0 || tile.kv.head_value % multiple != 0 || tile.softcap > 0.0f) {
      return false;
    }
    for (size_t j = 0; j < tile.n_queries; ++j) {
      if (tile.queries[j].n_pos != tile.queries[0].n_pos || tile.queries[j].first_pos != 0) return false;
    }
  }
  fn(tiles, n_tiles, scratch, scratch_stride);
  return true;
}

}  // namespace preface::kernels::avx512
