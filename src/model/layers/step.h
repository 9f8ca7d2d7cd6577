// What every layer kind's forward() works with: the batch, the paged KV it reads and writes, the thread pool, and
// the activation buffers the model allocates once (at load, for max_batch_tokens).
//
// The residual stream `x` is the only buffer that carries state from one layer to the next: a layer reads x,
// works in the scratch buffers and adds its output to x before it returns. Every per-token loop is independent
// across tokens, so how for_tokens splits the batch never changes a result.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_view.h"
#include "model/base/batch.h"
#include "model/base/config.h"
#include "util/thread_pool.h"

namespace preface::model {

// Activation buffers, each [max_batch_tokens][width]; widths from the Config.
struct Activations {
  std::vector<float> x;         // [dim] the residual stream
  std::vector<float> xb;        // [dim] a block's normed input, then its output projection
  std::vector<float> q;         // [n_heads][head_dim]
  std::vector<float> k, v;      // [n_kv_heads][head_dim]
  std::vector<float> attn_out;  // [n_heads][head_dim]
  std::vector<float> gate, up;  // [ffn_dim]
  std::vector<float> ffn_out;   // [dim]
  std::vector<float> q_gate;    // attn_output_gate: [n_heads][2][head_dim] the query and gate projection
  std::vector<float> attn_gate; // attn_output_gate: [n_heads][head_dim]
  std::vector<float> ssm_qkv;   // recurrent layers: [ssm.conv_dim()] the projection, then the conv's output
  std::vector<float> ssm_z;     // recurrent layers: [ssm.v_dim()] the output gate
  std::vector<float> ssm_beta;  // recurrent layers: [ssm.n_v_heads]
  std::vector<float> ssm_alpha; // recurrent layers: [ssm.n_v_heads]
  std::vector<float> ssm_out;   // recurrent layers: [ssm.v_dim()] the gated, normed output of the state
  // Mixture-of-experts layers (moe.n_experts > 0); an expert's rows hold the batch tokens routed to it, in batch order:
  std::vector<float> moe_logits;        // [moe.n_experts] router logits
  std::vector<int32_t> moe_expert;      // [moe.n_used] each token's experts, in selection order
  std::vector<float> moe_weight;        // [moe.n_used] their weights
  std::vector<float> moe_x;             // [dim] an expert's input rows (also its output rows)
  std::vector<float> moe_gate, moe_up;  // [moe.max_ffn()]
  std::vector<float> moe_out;           // [moe.n_used][dim] each selected expert's output
  std::vector<float> ple;       // per-layer inputs (ple_dim > 0): [n_layers][ple_dim]
  std::vector<float> ple_gate;  // per-layer inputs: [ple_dim]
  std::vector<uint8_t> quant_scratch;  // quantized activation rows for matmuls (grown by matmul when needed)
  std::vector<float> attn_scratch;     // detail::attention's tiles, sized by its first call

  void allocate(const Config& c, int32_t max_batch_tokens);
};

// RoPE cos/sin per batch token, computed once per forward for all layers: [n][n_rot]; `local` for the
// sliding-window layers when they rotate differently (gemma3, gemma4: [n][n_rot_local]), else empty.
struct RopeTables {
  std::vector<float> global, local;
  size_t n_rot = 0, n_rot_local = 0;  // each table's floats per token
};

struct Step {
  ThreadPool& pool;
  const Config& config;
  const ForwardBatch& batch;
  const kernels::KvView& kv;
  Activations& act;
  const RopeTables& rope;
};

// Batches of at least this many tokens run their per-token passes (norms, rope, KV stores, activation) on the
// pool; smaller ones inline on the calling thread, since waking the pool costs more than the work (the choice of
// threshold is measured in docs/perf-log/).
inline constexpr int64_t kParallelTokens = 8;

// fn(t_begin, t_end) over [0, n_tokens). Each token's work is independent of the others, so the split changes
// nothing in the results.
template <typename Fn>
void for_tokens(ThreadPool& pool, int64_t n_tokens, const Fn& fn) {
  if (n_tokens >= kParallelTokens) {
    pool.parallel_for(n_tokens,
                      [&fn](int64_t t0, int64_t t1) { fn(static_cast<size_t>(t0), static_cast<size_t>(t1)); });
  } else {
    fn(size_t{0}, static_cast<size_t>(n_tokens));
  }
}

// The two ends every layer kind shares, over the whole batch:
// xb[t] = RMSNorm(x[t]) * weight  (the sublayer's input; weight: [dim]).
void norm_input(const Step& s, const std::vector<float>& weight);
// x[t] += RMSNorm(out[t]) * post_norm, or x[t] += out[t] when post_norm is empty (out: [n][dim], normed in place).
void add_output(const Step& s, float* out, const std::vector<float>& post_norm);

}  // namespace preface::model
