// Causal attention of a tile of query heads over one KV head of paged K/V storage, streaming the positions in
// fixed chunks with an online softmax.
//
// A tile groups queries that read the same K/V rows (the query heads sharing a KV head, for one or more tokens
// of one sequence) so that each chunk of K/V rows is loaded and widened to f32 once for all of them. What is
// computed for one query depends only on that query, its position count and the stored rows — never on the
// other queries of the tile, their number or their positions:
//   for each chunk c of positions [c * kAttnChunk, (c + 1) * kAttnChunk) ∩ [first_pos, n_pos), in order:
//     s_i   = dot(q', K_i) * scale             q' = q rounded to the K type (as ggml does; F32 and the block
//                                              types: q' = q)
//     s_i   = softcap * softcap_tanh(s_i * (1 / softcap)) (ops.h), only when softcap > 0 (gemma2; before the window)
//     m'    = max(m, max_i s_i);   a = exp(m - m')   (a = 0 for the first chunk)
//     p_i   = exp(s_i - m')
//     l     = l * a + sum_i p_i
//     acc   = acc * a + sum_i p_i * V_i        (i in increasing order)
//     m     = m'
//   out = acc / attn_denominator(l, m, sink)   (l, or l + exp(sink - m) with a sink: gpt-oss)
// The dot reduction order, the order of the chunk sum and of the V accumulation are fixed by head_dim and the
// code path (scalar or AVX2) alone. Rows at positions >= n_pos of a query are never read for it; rows below its
// first_pos (a sliding window) may be loaded with its chunk's other rows, but never reach its output (a NaN there
// changes nothing). Chunks are fixed multiples of kAttnChunk in absolute positions, so a window changes which
// positions count, never how the counted ones are summed: the result depends on (q, first_pos, n_pos, rows) only.
// K_i, V_i are the stored rows widened to f32 as kernels::kv_value gives them (kv_rows.h; per-channel keys as
// widen_channel_chunk gives them, the query unrounded): F16/BF16 widen exactly,
// and a block type's value is f32(d) * f32(q) (exact) plus f32(m) for q4_1/q5_1 (one rounding), so every path sees
// the same K_i, V_i.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/kv_type.h"

namespace preface::kernels {

inline constexpr int32_t kAttnChunk = 32;  // positions per online-softmax step

// The first position whose K/V rows any path may load for a query attending [first_pos, n_pos) with
// first_pos = max(0, n_pos - window) (window 0: every position): the start of first_pos's chunk. A query at a
// later position never loads an earlier row, so rows below attention_first_read(n + 1, window) are dead for a
// sequence whose next query is at position n (kv/window_pool.h gives their blocks back).
inline int32_t attention_first_read(int32_t n_pos, int32_t window) {
  const int32_t first_pos = window > 0 && n_pos > window ? n_pos - window : 0;
  return first_pos / kAttnChunk * kAttnChunk;
}

// Where the K and V rows of one KV head live: position p is at block block_table[p / block_size], slot
// p % block_size, i.e. row (block * block_size + slot) of k_base (k_row_bytes apart) and of v_base (v_row_bytes
// apart); the head is the row's values [head_value, head_value + head_dim), of k_type and v_type
// (kernels/kv_type.h; a block type's row is blocks of 32 values, and a head may start inside a block).
struct KvPages {
  KvType k_type = KvType::F16;
  KvType v_type = KvType::F16;
  const uint8_t* k_base = nullptr;  // [n_blocks][block_size][k_row_bytes]
  const uint8_t* v_base = nullptr;  // [n_blocks][block_size][v_row_bytes]
  const int32_t* block_table = nullptr;  // covers positions 0..max n_pos - 1
  int32_t block_size = 16;
  size_t k_row_bytes = 0;  // one token's K row, all KV heads
  size_t v_row_bytes = 0;  // one token's V row
  size_t head_value = 0;   // this KV head's first value within a row (kv_head * head_dim)
  // Per-channel keys (k_type q8_pc or q4_pc, kernels/kv_channels.h), rows of k_row_values values: a chunk is one
  // group (kAttnChunk == kKvChannelGroup, both aligned to absolute positions); a chunk below open_from reads its
  // sealed group (at the chunk's first row of k_base), the chunk at open_from reads the f32 rows of open_k instead,
  // position p's K row at open_k + (p - open_from) * open_k_stride (all KV heads; this one at head_value). Queries
  // of one tile must all lie in the group at open_from.
  size_t k_row_values = 0;
  const float* open_k = nullptr;
  size_t open_k_stride = 0;
  int32_t open_from = INT32_MAX;
};
static_assert(kAttnChunk == kKvChannelGroup, "a chunk of per-channel keys is one sealed or open group");

// Widens values [head_value, head_value + hd) of K rows c0 .. c0 + n_rows - 1 (c0 a multiple of kAttnChunk) of
// per-channel pages to dst[i * dst_stride + d]: the sealed group's values (kv_channels.h) or the open rows'.
void widen_channel_chunk(const KvPages& kv, int32_t c0, int32_t n_rows, size_t hd, float* dst, size_t dst_stride);

struct AttnQuery {
  const float* q = nullptr;  // [head_dim] query head
  float* out = nullptr;      // [head_dim] attention output
  int32_t n_pos = 0;         // attends positions first_pos..n_pos-1 (n_pos >= 1)
  int32_t first_pos = 0;     // 0, or n_pos - window for a sliding window (0 <= first_pos < n_pos)
  // A learned logit of the query's head that joins the softmax's denominator and weighs no row (gpt-oss's attention
  // sinks); -inf: none.
  float sink = -INFINITY;
};

// The softmax denominator of a query whose scores have running max m and running sum l (of exp(s_i - m)): l itself
// without a sink (bit for bit), l + exp(sink - m) with one. Every path finishes with it, so they agree bit for bit.
inline float attn_denominator(float l, float m, float sink) {
  return sink == -INFINITY ? l : l + std::exp(sink - m);
}

struct AttnTile {
  KvPages kv;
  size_t head_dim = 0;
  float scale = 1.0f;            // multiplies q . k
  float softcap = 0.0f;          // > 0: scores soft-capped, softcap * softcap_tanh(s / softcap) (gemma2)
  const AttnQuery* queries = nullptr;  // [n_queries]
  size_t n_queries = 0;
};

// Floats of scratch attention_tile needs for a tile of n_queries queries of head_dim values.
size_t attention_scratch_floats(size_t head_dim, size_t n_queries);

// Writes every query's output. scratch: [attention_scratch_floats(head_dim, n_queries)].
void attention_tile(const AttnTile& tile, float* scratch);

// attention_tile for each of n_tiles tiles over the same KV storage (the KV heads of one token, say), tile i with
// scratch + i * scratch_stride (scratch_stride >= attention_scratch_floats(head_dim, its n_queries)). A path may
// interleave the tiles chunk by chunk, so that rows holding all their heads stream from memory once; each output
// is what attention_tile gives.
void attention_tiles(const AttnTile* tiles, size_t n_tiles, float* scratch, size_t scratch_stride);

// Asks the cache for what an attention_tiles call over these tiles reads first (each tile's queries and the K/V
// rows of its first chunk), to be issued while other work runs; a hint, computing nothing. At short contexts a decode
// call's time is mostly these misses (see docs/perf-log/).
void attention_prefetch(const AttnTile* tiles, size_t n_tiles);

namespace scalar {
void attention_tile(const AttnTile& tile, float* scratch);
}  // namespace scalar

namespace avx2 {
void attention_tile(const AttnTile& tile, float* scratch);
}  // namespace avx2

// Bit-identical to avx2::attention_tile, with 16-lane arithmetic; only where avx512::available().
namespace avx512 {
bool available();  // CPU supports AVX-512 F, BW, VL and DQ (and AVX2, FMA, F16C)
void attention_tile(const AttnTile& tile, float* scratch);
// Several tiles (each as attention_tile computes it) whose queries each share one n_pos and have first_pos 0, without
// soft-capping (decode: one token's query heads per KV head) whose K and V share one type: F32, F16 or BF16 with
// head_dim % 16 == 0, or Q8_0 with heads of whole blocks (head_dim % 32 == 0), reading
// K/V straight from the pages, up to 8 tiles chunk by chunk together (the KV heads of one token share their rows'
// cache lines); returns false, computing nothing, unless every tile qualifies. Tile i's scratch starts at
// scratch + i * scratch_stride.
bool attention_tiles_shared(const AttnTile* tiles, size_t n_tiles, float* scratch, size_t scratch_stride);
}  // namespace avx512

}  // namespace preface::kernels
