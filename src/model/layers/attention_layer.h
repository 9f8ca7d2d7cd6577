// Causal self-attention as a layer kind: RMSNorm, Q/K/V projections (separate or one fused matrix, optional
// biases), optional per-head Q/K RMSNorm, RoPE, the K/V rows stored into the paged KV, attention over the paged
// rows only (layers/paged_attention.h: window, soft-cap and scale from the Config and the block index; optional
// sinks), the output projection (after an optional sigmoid output gate; with attn_output.bias when the file has
// it), an optional post-norm, and the residual add.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/reader.h"
#include "model/base/memory.h"
#include "model/layers/layer.h"

namespace preface::model {

struct AttentionOptions {
  bool fused_qkv = false;     // one attn_qkv matrix, rows Q then K then V (phi3)
  bool bias = false;          // attn_{q,k,v}.bias required (qwen2); otherwise applied when the file has them
  bool qk_norm = false;       // attn_q_norm / attn_k_norm: [head_dim], each head normed before RoPE (qwen3, gemma3)
  bool post_norm = false;     // post_attention_norm: the output normed before the residual add (gemma)
  bool local = false;         // a sliding-window layer: rotated by RopeTables::local when the model has one
  // attn_q holds per head head_dim query rows then head_dim gate rows; each head's attention output is multiplied by
  // sigmoid(gate) before the output projection (qwen35; needs Config::attn_output_gate for its buffers).
  bool output_gate = false;
  bool sinks = false;         // attn_sinks.weight: [n_heads] logits joining each head's softmax denominator (gpt-oss)
  bool v_from_k = false;      // a layer without attn_v stores its K projection as V too (before K's norm and RoPE)
};

class AttentionLayer final : public Layer {
 public:
  // Reads blk.<il>.attn_norm, the projections and what `o` asks for; throws preface::Error naming a tensor that is
  // missing or of the wrong shape or type.
  AttentionLayer(const gguf::File& file, const Config& c, int32_t il, const AttentionOptions& o);

  // What block il's attention remembers: a K and a V row of kv_heads_of(il) x head_dim_of(il) per token, and the
  // block's sliding window (Config::layer_window; 0 on global layers); nothing when it reads another layer's rows
  // (Config::kv_source).
  static MemorySpec memory(const Config& c, int32_t il);

  void forward(const Step& s, int32_t il) const override;
  void collect_matrices(std::vector<kernels::Matrix*>& out) override;

 private:
  bool local_;
  bool output_gate_;
  int32_t kv_source_;                      // the layer whose rows it reads; itself when it stores K/V
  int32_t head_dim_, n_kv_heads_, n_rot_;  // this layer's shape (Config::head_dim_of, kv_heads_of, n_rot_of)
  std::vector<float> norm_;                // [dim]
  kernels::Matrix wq_, wk_, wv_, wo_;      // [q_dim x dim], [kv x dim], [kv x dim], [dim x q_dim] (rows x cols);
                                           // wk_, wv_ empty when reading another layer's rows, wv_ when V = K
  std::vector<float> bq_, bk_, bv_;        // empty: no biases
  std::vector<float> bo_;                  // [dim] attn_output.bias; empty: none
  std::vector<float> sinks_;               // [n_heads]; empty: none
  std::vector<float> q_norm_, k_norm_;     // [head_dim]; empty: none
  std::vector<float> v_norm_;              // [head_dim] of ones (Config::v_norm: RMS-normalized, no weight); or empty
  std::vector<float> post_norm_;           // [dim]; empty: none
};

}  // namespace preface::model
