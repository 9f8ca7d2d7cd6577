// Causal self-attention of a batch over paged KV storage (internal to the model module).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_view.h"
#include "model/base/config.h"
#include "model/base/batch.h"
#include "model/layers/channel_keys.h"
#include "util/thread_pool.h"

namespace preface::model::detail {

// Converts the K and V rows of batch tokens t_begin..t_end-1 to kv.format's types (kernels::kv_write_row: a block
// type quantizes the whole row in blocks of 32; a row's bytes depend on its f32 values only; per-channel K rows are
// left to seal_keys, model/layers/channel_keys.h) and writes them to layer
// `layer` at each token's (block, slot). k: [n][K row values], v: [n][V row values] f32 (kernels/kv_view.h).
void store_kv(const ForwardBatch& batch, const kernels::KvView& kv, int layer, const float* k, const float* v, size_t t_begin,
              size_t t_end);

// For every batch token t and head h (kv head h / (n_heads / n_kv_heads), layer `layer`'s shape: Config::head_dim_of,
// kv_heads_of; its rows: those of Config::kv_source(layer)):
//   out[t][h] = sum_p softmax_p(cap(dot(q[t][h], K[p]) * config.attn_scale(layer))) * V[p],  p = lo..pos[t],
// lo = 0 on global layers and max(0, pos[t] - window + 1) on local ones (config.layer_window(layer)); cap is the
// identity, or config.attn_softcap's soft-capping (kernels/attention.h),
// with K[p], V[p] read from the storage only, through the block table of t's sequence, by
// kernels::attention_tile (an online softmax over fixed chunks of positions; for F16/BF16 K rows the query head
// is rounded to that type before it meets a K row, as ggml does; block-type rows are dequantized exactly to f32 and
// the query stays f32). Rotation (kv.format.rotate_k / rotate_v) is the caller's: q and the stored rows are then
// rotated, and so is out. Queries that read the same rows — the heads of one KV head for up to kTileTokens
// consecutive batch tokens of one sequence — share a tile, and a run's tiles for all its KV heads go to
// kernels::attention_tiles together (split over threads only when runs are fewer than threads); but each query's
// arithmetic is its own, so the result does not depend on the batch, the tiling or the pool's thread count.
// q, out: [n][n_heads][head_dim]. sinks: nullptr, or [n_heads] logits that join each head's softmax denominator
// (kernels::AttnQuery::sink; gpt-oss). scratch: the tiles' working memory, grown here when too small (so it is
// allocated once, by the first call that needs that much).
// Per-channel keys (kv.format.k, model/layers/channel_keys.h): sealed groups are read from the pool, each run's
// open group from its f32 rows, and runs never straddle a group; k: the batch's K rows ([n][K row values]) and spans: channel_key_spans of the
// batch (both unused, and may be null, otherwise).
void attention(ThreadPool& pool, const Config& config, const ForwardBatch& batch, const kernels::KvView& kv, int layer,
               const float* q, const float* sinks, float* out, std::vector<float>& scratch, const float* k = nullptr,
               const std::vector<SeqSpan>* spans = nullptr);

}  // namespace preface::model::detail
