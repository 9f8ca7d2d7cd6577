#include "model/layers/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "util/error.h"
#include "kernels/kv_rows.h"
#include "model/layers/channel_keys.h"

namespace preface::model::detail {
namespace {

// Batch tokens per attention tile: queries of one tile share each K/V chunk widened to f32.
constexpr size_t kTileTokens = 8;

}  // namespace

void store_kv(const ForwardBatch& batch, const kernels::KvView& kv, int layer, const float* k, const float* v, size_t t_begin,
              size_t t_end) {
  const size_t k_row = static_cast<size_t>(kv.layers[static_cast<size_t>(layer)].k_values);
  const size_t v_row = static_cast<size_t>(kv.layers[static_cast<size_t>(layer)].v_values);
  for (size_t t = t_begin; t < t_end; ++t) {
    const int32_t pos = batch.pos[t];
    const std::vector<int32_t>& table = batch.table(batch.seq[t], kv.layers[static_cast<size_t>(layer)].window_pool);
    const int32_t block_id = table[static_cast<size_t>(pos / kv.block_size)];
    const int32_t slot = pos % kv.block_size;
    // Per-channel keys are written a group at a time (seal_keys).
    if (!kernels::kv_type_is_per_channel(kv.format.k)) {
      kernels::kv_write_row(kv.format.k, k + t * k_row, kv.k_row(layer, block_id, slot), k_row);
    }
    kernels::kv_write_row(kv.format.v, v + t * v_row, kv.v_row(layer, block_id, slot), v_row);
  }
}

void attention(ThreadPool& pool, const Config& config, const ForwardBatch& batch, const kernels::KvView& kv, int layer,
               const float* q, const float* sinks, float* out, std::vector<float>& scratch, const float* k,
               const std::vector<SeqSpan>* spans) {
  const bool channel_keys = kernels::kv_type_is_per_channel(kv.format.k);
  if (channel_keys && (spans == nullptr || k == nullptr)) {
    throw Error("attention: per-channel keys need the batch's K rows and sequence spans");
  }
  const size_t head_dim = static_cast<size_t>(config.head_dim_of(layer));
  const size_t n_heads = static_cast<size_t>(config.n_heads);
  const size_t group = static_cast<size_t>(config.n_heads / config.kv_heads_of(layer));
  const size_t n_kv_heads = static_cast<size_t>(config.kv_heads_of(layer));
  const auto rows = static_cast<size_t>(config.kv_source(layer));  // the layer whose K/V rows are read
  // Runs of up to kTileTokens consecutive batch tokens of one sequence: [first token, end token).
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t t = 0; t < batch.size();) {
    size_t end = t + 1;
    // With per-channel keys a run never straddles a group (all its queries read the same groups sealed).
    while (end < batch.size() && end - t < kTileTokens && batch.seq[end] == batch.seq[t] &&
           (!channel_keys || batch.pos[end] / kernels::kKvChannelGroup == batch.pos[t] / kernels::kKvChannelGroup)) {
      ++end;
    }
    runs.emplace_back(t, end);
    t = end;
  }
  // An item is a run's KV heads [h0, h0 + heads_per_item): all of them together (attention_tiles may stream the
  // rows they share once), split only as far as it takes to give every thread an item when runs are few.
  const size_t n_runs = runs.size();
  const size_t n_threads = static_cast<size_t>(pool.n_threads());
  const size_t n_splits = std::min(n_kv_heads, (n_threads + n_runs - 1) / n_runs);
  const size_t heads_per_item = (n_kv_heads + n_splits - 1) / n_splits;
  const size_t items_per_run = (n_kv_heads + heads_per_item - 1) / heads_per_item;
  const int64_t n_items = static_cast<int64_t>(n_runs * items_per_run);
  const int64_t n_slots = std::min<int64_t>(pool.n_threads(), n_items);
  kernels::KvPages pages;
  pages.k_type = kv.format.k;
  pages.v_type = kv.format.v;
  pages.k_base = kv.layers[rows].k;
  pages.v_base = kv.layers[rows].v;
  pages.block_size = kv.block_size;
  pages.k_row_bytes = kv.k_row_bytes(static_cast<int>(rows));
  pages.v_row_bytes = kv.v_row_bytes(static_cast<int>(rows));
  const float scale = config.attn_scale(layer);
  const int32_t window = config.layer_window(layer);  // 0: global

  // Items are dealt round-robin to slots: with a prompt in the batch, later runs attend over more positions, and
  // interleaving spreads that cost evenly.
  const size_t tile_queries = kTileTokens * group;
  const size_t stride = kernels::attention_scratch_floats(head_dim, tile_queries);
  const size_t slot_floats = heads_per_item * stride;
  if (scratch.size() < static_cast<size_t>(n_slots) * slot_floats) scratch.resize(n_slots * slot_floats);
  pool.parallel_for(n_slots, [&](int64_t slot_begin, int64_t slot_end) {
    // Two items' tiles: the next item's are built and its first rows asked for before the current one runs.
    std::vector<kernels::AttnQuery> queries(2 * heads_per_item * tile_queries);  // [2][heads_per_item][tile_queries]
    std::vector<kernels::AttnTile> tiles(2 * heads_per_item);                    // [2][heads_per_item]
    ChannelPages channel_pages[2];  // per-channel keys: each buffer's open group
    // Fills buffer `buf` with item's tiles; returns their count.
    const auto build = [&](int64_t item, size_t buf) {
      const auto [t0, t1] = runs[static_cast<size_t>(item) / items_per_run];
      const size_t h0 = static_cast<size_t>(item) % items_per_run * heads_per_item;
      const size_t h1 = std::min(h0 + heads_per_item, n_kv_heads);
      kernels::KvPages item_pages = pages;
      item_pages.block_table = batch.table(batch.seq[t0], kv.layers[rows].window_pool).data();
      if (channel_keys) {
        const SeqSpan& span = (*spans)[static_cast<size_t>(batch.seq[t0])];
        channel_pages[buf].build(batch, span, kv, static_cast<int>(rows), k, t0, t1, item_pages);
      }
      for (size_t kv_head = h0; kv_head < h1; ++kv_head) {
        kernels::AttnQuery* tq = queries.data() + (buf * heads_per_item + kv_head - h0) * tile_queries;
        size_t n_q = 0;
        for (size_t t = t0; t < t1; ++t) {
          for (size_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
            const size_t offset = (t * n_heads + h) * head_dim;
            const int32_t n_pos = batch.pos[t] + 1;
            tq[n_q++] = {q + offset, out + offset, n_pos, window > 0 ? std::max(0, n_pos - window) : 0,
                         sinks != nullptr ? sinks[h] : -INFINITY};
          }
        }
        kernels::AttnTile& tile = tiles[buf * heads_per_item + kv_head - h0];
        tile.kv = item_pages;
        tile.kv.head_value = kv_head * head_dim;
        tile.head_dim = head_dim;
        tile.scale = scale;
        tile.softcap = config.attn_softcap;
        tile.queries = tq;
        tile.n_queries = n_q;
      }
      return h1 - h0;
    };
    for (int64_t slot = slot_begin; slot < slot_end; ++slot) {
      float* slot_scratch = scratch.data() + static_cast<size_t>(slot) * slot_floats;  // [heads_per_item][stride]
      size_t cur = 0;
      size_t n_tiles = build(slot, cur);
      for (int64_t item = slot; item < n_items; item += n_slots) {
        const int64_t next = item + n_slots;
        size_t n_next = 0;
        if (next < n_items) {
          n_next = build(next, 1 - cur);
          kernels::attention_prefetch(tiles.data() + (1 - cur) * heads_per_item, n_next);
        }
        kernels::attention_tiles(tiles.data() + cur * heads_per_item, n_tiles, slot_scratch, stride);
        cur = 1 - cur;
        n_tiles = n_next;
      }
    }
  });
}

}  // namespace preface::model::detail
