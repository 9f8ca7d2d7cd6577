// Gated DeltaNet as a layer kind (qwen35's linear-attention mixer): a recurrent mixer whose memory is a fixed-size
// state per sequence (model/base/memory.h's State), not rows per token.
//
// Per token t of a sequence, with x = RMSNorm(x_t) * attn_norm:
//   qkv = attn_qkv x                       [conv_dim]: q (n_k_heads x d), k (n_k_heads x d), v (n_v_heads x d)
//   qkv = SiLU(causal depthwise conv)      channel c: sum_j ssm_conv1d[c][j] * in_{t-K+1+j}[c], j = 0..K-1 (oldest
//                                          first; inputs before position 0 are zeros)
//   q, k = each head / sqrt(sum^2 + 1e-6); q *= 1 / sqrt(d)
//   beta_j = sigmoid(ssm_beta x)_j,  g_j = ssm_a_j * softplus((ssm_alpha x)_j + ssm_dt.bias_j)       j: V heads
//   for V head j (K head j mod n_k_heads):  S_j = exp(g_j) S_j;  S_j += k (beta_j (v_j - S_j^T k))^T;  o_j = S_j^T q
//   y = ssm_out (RMSNorm(o_j) * ssm_norm * SiLU(z_j) for each j),  z = attn_gate x
// and x_t += y. V heads are in ggml's tiled order (the converter's), which is why head j reads K head j mod n_k_heads.
//
// Exactness: the state is updated token by token in this recurrent form, in a fixed order, for prompts and decode
// alike (no chunked form): a sequence's conv window by one thread in position order, each V head's S by one thread
// in position order (kernels/delta_rule.h, the same bits on every path); so the state after token t, and every
// output, is the same bits however the tokens arrived (one prompt, chunks of any size, one at a time, batched with
// other sequences, any thread count).
//
// The state of one sequence (kernels::KvView::state, state_bytes bytes):
//   int64 next position (the position its next token must have: model/base/memory.h's State contract), int64 0,
//   conv window: (K - 1) x conv_dim f32, the last K - 1 projected inputs, oldest first,
//   S: n_v_heads x d x d f32, S[j][i][m] (i over the key's values, m over the value's).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/reader.h"
#include "model/base/memory.h"
#include "model/layers/layer.h"

namespace preface::model {

class DeltaNetLayer final : public Layer {
 public:
  // Reads blk.<il>.attn_norm, attn_qkv, attn_gate, ssm_conv1d, ssm_a, ssm_dt.bias, ssm_alpha, ssm_beta, ssm_norm and
  // ssm_out; throws preface::Error naming a tensor that is missing or of the wrong shape or type.
  DeltaNetLayer(const gguf::File& file, const Config& c, int32_t il);

  // The state bytes of one sequence (see the header).
  static uint64_t state_bytes(const Config& c);
  static MemorySpec memory(const Config& c) { return MemorySpec::state(state_bytes(c)); }

  void forward(const Step& s, int32_t il) const override;
  void collect_matrices(std::vector<kernels::Matrix*>& out) override;

 private:
  // Tokens [t0, t1) of one sequence, consecutive positions: through its conv window (ssm_qkv's rows replaced by the
  // conv's output, q and k normalized); then through V head j's S (ssm_out's rows of head j, gated).
  void conv_sequence(const Step& s, uint8_t* state, size_t t0, size_t t1) const;
  void delta_head(const Step& s, uint8_t* state, size_t t0, size_t t1, size_t j, float* scratch) const;

  std::vector<float> norm_;          // [dim]
  kernels::Matrix w_qkv_, w_z_;      // [conv_dim x dim], [v_dim x dim]
  kernels::Matrix w_alpha_, w_beta_; // [n_v_heads x dim]
  kernels::Matrix w_out_;            // [dim x v_dim]
  std::vector<float> conv_;          // [conv_dim][K]
  std::vector<float> a_, dt_bias_;   // [n_v_heads]
  std::vector<float> out_norm_;      // [d]
};

}  // namespace preface::model
