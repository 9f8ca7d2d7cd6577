// Scalar reference of attention_tile (attention.h): plain loops, one float accumulator per dot, std::exp. Also the
// baseline-compiled helpers every path shares: attention_scratch_floats and attention_prefetch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention_layout.h"
#include "kernels/kv_channels.h"
#include "kernels/kv_rows.h"
#include "kernels/ops.h"
#include "util/fp16.h"

namespace preface::kernels {

namespace {

// The start of the row (all KV heads) of position pos in a region of rows row_bytes apart.
const uint8_t* row_at(const KvPages& kv, const uint8_t* base, size_t row_bytes, int32_t pos) {
  const size_t block = static_cast<size_t>(kv.block_table[pos / kv.block_size]);
  return base + (block * static_cast<size_t>(kv.block_size) + static_cast<size_t>(pos % kv.block_size)) * row_bytes;
}

// Asks for the cache line at p, into L1 (kToL1) or L2 only. An asm statement, which the compiler must keep: GCC 12
// deleted loops of __builtin_prefetch in attention_prefetch as dead code (the L1 ones at -O3, all at -O2).
template <bool kToL1>
void prefetch_line(const char* p) {
#if defined(__x86_64__) || defined(__i386__)
  if constexpr (kToL1) {
    asm volatile("prefetcht0 %0" : : "m"(*p));
  } else {
    asm volatile("prefetcht1 %0" : : "m"(*p));
  }
#else
  __builtin_prefetch(p, 0, kToL1 ? 3 : 2);
#endif
}

// Asks for n_bytes from p into L1 (to_l1) or L2 only.
void prefetch_bytes(const void* p, size_t n_bytes, bool to_l1) {
  constexpr size_t kLineBytes = 64;
  const auto* c = static_cast<const char*>(p);
  for (size_t off = 0; off < n_bytes; off += kLineBytes) {
    if (to_l1) {
      prefetch_line<true>(c + off);
    } else {
      prefetch_line<false>(c + off);
    }
  }
}

}  // namespace

void widen_channel_chunk(const KvPages& kv, int32_t c0, int32_t n_rows, size_t hd, float* dst, size_t dst_stride) {
  if (c0 >= kv.open_from) {
    for (int32_t i = 0; i < n_rows; ++i) {
      const float* src = kv.open_k + static_cast<size_t>(c0 + i - kv.open_from) * kv.open_k_stride + kv.head_value;
      std::memcpy(dst + static_cast<size_t>(i) * dst_stride, src, hd * sizeof(float));
    }
    return;
  }
  kv_widen_group(kv.k_type, row_at(kv, kv.k_base, kv.k_row_bytes, c0), kv.k_row_values, kv.head_value, hd,
                 static_cast<size_t>(n_rows), dst, dst_stride);
}

size_t attention_scratch_floats(size_t head_dim, size_t n_queries) { return AttnLayout(head_dim, n_queries).total; }

void attention_prefetch(const AttnTile* tiles, size_t n_tiles) {
  for (size_t i = 0; i < n_tiles; ++i) {
    const AttnTile& tile = tiles[i];
    // Queries sharing one n_pos (decode: one token's query heads) are read by a path that reads rows in place,
    // into L1. Others (a prompt's tokens) by tiles that widen each chunk into a copy: asked into L1, their queries
    // and first rows (~40 KB) evicted the running call's copy (prefill got slower), so they go to L2, from which
    // the call's own prefetches take them.
    bool to_l1 = true;
    int32_t n_pos = 0, first = INT32_MAX;
    for (size_t j = 0; j < tile.n_queries; ++j) {
      to_l1 = to_l1 && tile.queries[j].n_pos == tile.queries[0].n_pos;
      n_pos = std::max(n_pos, tile.queries[j].n_pos);
      first = std::min(first, tile.queries[j].first_pos);
    }
    first = first / kAttnChunk * kAttnChunk;  // the first chunk read
    for (size_t j = 0; j < tile.n_queries; ++j) prefetch_bytes(tile.queries[j].q, tile.head_dim * sizeof(float), to_l1);
    const KvPages& kv = tile.kv;
    const KvSpan k = kv_span(kv.k_type, kv.head_value, tile.head_dim), v = kv_span(kv.v_type, kv.head_value, tile.head_dim);
    for (int32_t p = first; p < std::min(n_pos, first + kAttnChunk); ++p) {
      prefetch_bytes(row_at(kv, kv.k_base, kv.k_row_bytes, p) + k.offset, k.bytes, to_l1);
      prefetch_bytes(row_at(kv, kv.v_base, kv.v_row_bytes, p) + v.offset, v.bytes, to_l1);
    }
  }
}

namespace scalar {
namespace {

float round_to(KvType type, float x) {
  switch (type) {
    case KvType::F32: return x;
    case KvType::F16: return f16_to_f32(f32_to_f16(x));
    case KvType::BF16: return bf16_to_f32(f32_to_bf16(x));
    default: return x;  // block types: the query stays f32; rows are dequantized
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
  int32_t n_pos_max = 0, first_pos_min = INT32_MAX;
  for (size_t j = 0; j < tile.n_queries; ++j) {
    const AttnQuery& qj = tile.queries[j];
    n_pos_max = std::max(n_pos_max, qj.n_pos);
    first_pos_min = std::min(first_pos_min, qj.first_pos);
    float* q = scratch + lay.q + j * hp;
    for (size_t d = 0; d < hd; ++d) q[d] = round_to(kv.k_type, qj.q[d]);
    std::memset(scratch + lay.acc + j * hp, 0, hp * sizeof(float));
    scratch[lay.m + j] = -INFINITY;
    scratch[lay.l + j] = 0.0f;
  }

  const float inv_cap = tile.softcap > 0.0f ? 1.0f / tile.softcap : 0.0f;
  const bool channel_keys = kv_type_is_per_channel(kv.k_type);
  for (int32_t c0 = first_pos_min / kAttnChunk * kAttnChunk; c0 < n_pos_max; c0 += kAttnChunk) {
    const int32_t n_rows = std::min(kAttnChunk, n_pos_max - c0);
    if (channel_keys) widen_channel_chunk(kv, c0, n_rows, hd, kbuf, hp);
    for (int32_t i = 0; i < n_rows; ++i) {
      float* k = kbuf + static_cast<size_t>(i) * hp;
      float* v = vbuf + static_cast<size_t>(i) * hp;
      const uint8_t* v_row = row_at(kv, kv.v_base, kv.v_row_bytes, c0 + i);
      for (size_t d = 0; d < hd; ++d) v[d] = kv_value(kv.v_type, v_row, kv.head_value + d);
      if (channel_keys) continue;
      const uint8_t* k_row = row_at(kv, kv.k_base, kv.k_row_bytes, c0 + i);
      for (size_t d = 0; d < hd; ++d) k[d] = kv_value(kv.k_type, k_row, kv.head_value + d);
    }
    for (size_t j = 0; j < tile.n_queries; ++j) {
      // Rows [i_lo, n_valid) of the chunk are the query's.
      const int32_t n_valid = std::min(kAttnChunk, tile.queries[j].n_pos - c0);
      const int32_t i_lo = std::max(0, tile.queries[j].first_pos - c0);
      if (n_valid <= i_lo) continue;
      const float* q = scratch + lay.q + j * hp;
      float chunk_max = -INFINITY;
      for (int32_t i = i_lo; i < n_valid; ++i) {
        const float* k = kbuf + static_cast<size_t>(i) * hp;
        float s = 0.0f;
        for (size_t d = 0; d < hd; ++d) s += q[d] * k[d];
        p[i] = s * tile.scale;
        if (tile.softcap > 0.0f) p[i] = tile.softcap * softcap_tanh(p[i] * inv_cap);
        chunk_max = std::fmax(chunk_max, p[i]);
      }
      float& m = scratch[lay.m + j];
      float& l = scratch[lay.l + j];
      const float m_new = std::fmax(m, chunk_max);
      const float a = m == m_new ? 1.0f : std::exp(m - m_new);
      float sum = 0.0f;
      for (int32_t i = i_lo; i < n_valid; ++i) {
        p[i] = std::exp(p[i] - m_new);
        sum += p[i];
      }
      l = l * a + sum;
      m = m_new;
      float* acc = scratch + lay.acc + j * hp;
      for (size_t d = 0; d < hd; ++d) acc[d] *= a;
      for (int32_t i = i_lo; i < n_valid; ++i) {
        const float* v = vbuf + static_cast<size_t>(i) * hp;
        for (size_t d = 0; d < hd; ++d) acc[d] += p[i] * v[d];
      }
    }
  }

  for (size_t j = 0; j < tile.n_queries; ++j) {
    const float* acc = scratch + lay.acc + j * hp;
    const float l = attn_denominator(scratch[lay.l + j], scratch[lay.m + j], tile.queries[j].sink);
    for (size_t d = 0; d < hd; ++d) tile.queries[j].out[d] = acc[d] / l;
  }
}

}  // namespace scalar
}  // namespace preface::kernels
