// attention_prefetch (attention.h): cache hints for the start of a later attention_tiles call.
#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"

namespace preface::kernels {

namespace {

constexpr size_t kLineBytes = 64;

// Into L1 (to_l1) or L2 only.
void prefetch_bytes(const void* p, size_t n_bytes, bool to_l1) {
  const auto* c = static_cast<const char*>(p);
  if (to_l1) {
    for (size_t off = 0; off < n_bytes; off += kLineBytes) __builtin_prefetch(c + off, 0, 3);
  } else {
    for (size_t off = 0; off < n_bytes; off += kLineBytes) __builtin_prefetch(c + off, 0, 2);
  }
}

// Bytes of one KV head's row of head_dim values of elem (Q8_0: head_dim / 32 blocks of 34 bytes).
size_t head_bytes(KvElem elem, size_t head_dim) {
  switch (elem) {
    case KvElem::F32: return head_dim * 4;
    case KvElem::F16:
    case KvElem::BF16: return head_dim * 2;
    case KvElem::Q8_0: return head_dim / 32 * 34;
  }
  return 0;
}

}  // namespace

void attention_prefetch(const AttnTile* tiles, size_t n_tiles) {
  for (size_t i = 0; i < n_tiles; ++i) {
    const AttnTile& tile = tiles[i];
    const KvPages& kv = tile.kv;
    // Queries sharing one n_pos (decode: one token's query heads) are read by a path that reads rows in place,
    // into L1. Others (a prompt's tokens) by tiles that widen each chunk into a copy: asked into L1, their queries
    // and first rows (~40 KB) evicted the running call's copy (512-token Q4_0 prefill 9% slower at 1 thread), so
    // they go to L2, from which the call's own prefetches take them.
    bool to_l1 = true;
    int32_t n_pos = 0;
    for (size_t j = 0; j < tile.n_queries; ++j) {
      to_l1 = to_l1 && tile.queries[j].n_pos == tile.queries[0].n_pos;
      n_pos = tile.queries[j].n_pos > n_pos ? tile.queries[j].n_pos : n_pos;
    }
    for (size_t j = 0; j < tile.n_queries; ++j) prefetch_bytes(tile.queries[j].q, tile.head_dim * sizeof(float), to_l1);
    const int32_t n_rows = n_pos < kAttnChunk ? n_pos : kAttnChunk;
    const size_t bytes = head_bytes(kv.elem, tile.head_dim);
    for (int32_t p = 0; p < n_rows; ++p) {
      const size_t row = static_cast<size_t>(kv.block_table[p / kv.block_size]) * static_cast<size_t>(kv.block_size) +
                         static_cast<size_t>(p % kv.block_size);
      const size_t offset = row * kv.row_bytes + kv.head_offset_bytes;
      prefetch_bytes(kv.k_base + offset, bytes, to_l1);
      prefetch_bytes(kv.v_base + offset, bytes, to_l1);
    }
  }
}

}  // namespace preface::kernels
