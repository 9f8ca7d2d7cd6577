// Causal self-attention of a batch over paged KV storage (internal to the model module).
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/config.h"
#include "model/kv_view.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace preface::model::detail {

// Converts each batch token's K and V rows to kv.type and writes them to layer `layer` at the token's
// (block, slot). k, v: [n][row_values] f32.
void store_kv(const ForwardBatch& batch, const KvView& kv, int layer, const float* k, const float* v);

// For every batch token t and head h (kv head h / (n_heads / n_kv_heads)):
//   out[t][h] = sum_p softmax_p(dot(q[t][h], K[p]) / sqrt(head_dim)) * V[p],  p = 0..pos[t],
// with K[p], V[p] read from the storage only, through the block table of t's sequence. For F16/BF16 storage the
// query head and the softmax weights are rounded to that type before they meet a K or V row, as ggml does (it
// converts the vector operand of an F16/BF16 dot product); this keeps logits within ~1e-5 of llama.cpp's.
// q, out: [n][n_heads][head_dim]. scores: [n_slots][scores_stride] scratch, scores_stride >= max pos + 1 +
// head_dim (a slot holds the scores of positions 0..pos, and its last head_dim floats the query head rounded to
// the KV type).
// Work slot s computes the (t, h) pairs with index % n_slots == s, each pair by a single call of the same code,
// so the result does not depend on n_slots or on the pool's thread count.
void attention(ThreadPool& pool, const Config& config, const ForwardBatch& batch, const KvView& kv, int layer,
               const float* q, float* out, float* scores, size_t scores_stride, int n_slots);

}  // namespace preface::model::detail
