// Hyper-parameters of a decoder-only transformer, read from GGUF metadata (`<arch>.*` keys).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kernels/ops.h"

namespace preface::model {

struct Config {
  std::string arch_name;      // general.architecture, a row of model/arch/registry.h
  std::string name;           // general.name, may be empty
  int32_t n_vocab = 0;
  int32_t dim = 0;            // embedding length
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;     // GQA: n_heads % n_kv_heads == 0; the largest of layer_kv_heads when that is set
  int32_t head_dim = 0;       // attention.key_length, else dim / n_heads
  int32_t ffn_dim = 0;        // the largest of layer_ffn when that is set
  int32_t n_rot = 0;          // rope.dimension_count (default head_dim)
  float rope_base = 10000.0f; // rope.freq_base
  bool rope_neox = false;     // true for qwen2 (rotate halves), false for llama (rotate adjacent pairs)
  // Pair i's angle at position p is rope_freq_scale * (p * base^(-2i/n_rot) / rope_freq_factors[i]), as ggml:
  float rope_freq_scale = 1.0f;          // 1 / rope.scaling.factor with rope.scaling.type linear or yarn, else 1
  // rope_freqs.weight (Llama 3.1 and later), else LongRoPE's rope_factors_long.weight or rope_factors_short.weight
  // (the long ones when context_length > rope.scaling.original_context_length), [n_rot / 2]; empty: all 1.
  std::vector<float> rope_freq_factors;
  // kernels::rope_cos_sin's RopeYarn, as llama.cpp sets it: attn_factor rope.scaling.attn_factor (default 1, any
  // scaling type), n_ctx_orig rope.scaling.original_context_length (default context_length); with
  // rope.scaling.type yarn also ext_factor 1 (or rope.scaling.yarn_ext_factor), attn_factor times
  // rope.scaling.yarn_attn_factor, beta_fast / beta_slow 32 / 1 (or rope.scaling.yarn_beta_fast / _slow).
  // Inactive (ext_factor 0, attn_factor 1) for files without these keys.
  kernels::RopeYarn rope_yarn;
  float rms_eps = 1e-5f;
  int32_t ctx_len = 0;        // context_length
  bool qkv_bias = false;      // qwen2
  bool qk_norm = false;       // qwen3: per-head RMSNorm of Q and K before RoPE
  bool fused_projections = false;  // phi3: attn_qkv and a gate+up ffn_up (model/arch/phi3.cpp)
  bool tied_embeddings = false;  // no output.weight: the output head is token_embd.weight
  float query_scale = 0.0f;   // > 0: multiplies q . k (gemma: 1 / sqrt(attention.query_pre_attn_scalar)); 0: the default

  // Set by an architecture's reader (model/arch/); the defaults leave the llama block as it is.
  float embd_scale = 0.0f;    // > 0: token embeddings multiplied by it (gemma: sqrt(dim))
  bool post_norms = false;    // gemma: attention and FFN outputs RMS-normalized (post_attention_norm, post_ffw_norm)
                              // before their residual add
  bool ffn_gelu = false;      // gemma: GELU (tanh form) of the gate times up, instead of SiLU
  float attn_softcap = 0.0f;  // > 0: attention scores soft-capped, cap * tanh(s / cap), before the mask (gemma2)
  float final_softcap = 0.0f; // > 0: logits soft-capped the same way (gemma2; gemma3 when its file says so)
  // Sliding-window attention: a local layer's query at position p sees keys max(0, p - window + 1)..p.
  int32_t sliding_window = 0;       // 0: every layer global
  std::vector<uint8_t> layer_local;  // [n_layers] 1 = local (sliding-window) layer; empty: none
  // RoPE of the local layers (gemma3: rope.freq_base_swa, no scaling); the global settings above otherwise.
  float rope_base_local = 10000.0f;
  float rope_freq_scale_local = 1.0f;
  // qwen35: attn_q holds, per head, head_dim query rows then head_dim gate rows; the attention output of each head
  // is multiplied by sigmoid(gate) before attn_output.
  bool attn_output_gate = false;
  // Recurrent (Gated DeltaNet) layers, qwen35 (model/layers/delta_net.h); empty: none.
  std::vector<uint8_t> layer_recurrent;  // [n_layers] 1 = the block's mixer is recurrent
  struct Ssm {
    int32_t conv_kernel = 0;  // ssm.conv_kernel: taps of the causal depthwise conv (the newest input included)
    int32_t head_dim = 0;     // ssm.state_size: values per Q, K and V head
    int32_t n_k_heads = 0;    // ssm.group_count: Q and K heads
    int32_t n_v_heads = 0;    // ssm.time_step_rank: V heads (and gates, decays, state matrices)
    int32_t qk_dim() const { return n_k_heads * head_dim; }
    int32_t v_dim() const { return n_v_heads * head_dim; }  // ssm.inner_size
    int32_t conv_dim() const { return 2 * qk_dim() + v_dim(); }  // the conv's channels: q, k, v
  } ssm;

  // Per-layer shapes (gemma4); each empty or 0 where every layer has the scalar one above:
  std::vector<int32_t> layer_kv_heads;  // [n_layers] attention.head_count_kv as an array
  std::vector<int32_t> layer_ffn;       // [n_layers] feed_forward_length as an array
  int32_t head_dim_local = 0;           // local layers' head size (attention.key_length_swa)
  int32_t n_rot_local = 0;              // local layers' rotated dims (rope.dimension_count_swa)
  bool rope_factors_global_only = false;  // rope_freq_factors rotate global layers only (gemma4's proportional rope)
  // [n_layers] the layer whose K/V rows each layer attends over: itself, or an earlier layer of the same kind
  // (gemma4's attention.shared_kv_layers: the last layers store nothing and read a donor's rows); empty: itself.
  std::vector<int32_t> layer_kv_source;
  bool v_norm = false;     // V RMS-normalized per head without a weight before it is stored (gemma4)
  int32_t ple_dim = 0;     // embedding_length_per_layer_input: per-layer embeddings (model/layers/per_layer_input.h)

  // Mixture-of-experts FFN (model/layers/moe_ffn.h), read by model/arch/experts.cpp; n_experts 0: a dense FFN.
  enum class ExpertGating {
    SoftmaxThenTopK,  // softmax over every router logit, the k largest probabilities kept (qwen3moe, qwen35moe)
    TopKThenSoftmax,  // the k largest logits kept, softmaxed among themselves (gpt-oss)
    Sigmoid,          // sigmoid of each logit (deepseek2)
  };
  struct Moe {
    int32_t n_experts = 0;   // expert_count
    int32_t n_used = 0;      // expert_used_count: experts per token
    int32_t expert_ffn = 0;  // expert_feed_forward_length: each routed expert's hidden width
    int32_t shared_ffn = 0;  // expert_shared_feed_forward_length: the shared expert's width; 0: none
    ExpertGating gating = ExpertGating::SoftmaxThenTopK;
    bool norm_weights = false;   // the selected experts' weights divided by their sum
    float weights_scale = 1.0f;  // expert_weights_scale: multiplies every selected weight
    int32_t max_ffn() const { return expert_ffn > shared_ffn ? expert_ffn : shared_ffn; }
  } moe;

  // Layer il's attention shape and FFN width (the scalars above unless a per-layer field says otherwise).
  int32_t head_dim_of(int32_t il) const { return is_local(il) && head_dim_local > 0 ? head_dim_local : head_dim; }
  int32_t kv_heads_of(int32_t il) const {
    return layer_kv_heads.empty() ? n_kv_heads : layer_kv_heads[static_cast<size_t>(il)];
  }
  int32_t n_rot_of(int32_t il) const { return is_local(il) && n_rot_local > 0 ? n_rot_local : n_rot; }
  int32_t ffn_of(int32_t il) const { return layer_ffn.empty() ? ffn_dim : layer_ffn[static_cast<size_t>(il)]; }
  int32_t kv_source(int32_t il) const {
    return layer_kv_source.empty() ? il : layer_kv_source[static_cast<size_t>(il)];
  }
  // Widths for buffers: the largest over the layers.
  int32_t max_head_dim() const { return head_dim_local > head_dim ? head_dim_local : head_dim; }
  int32_t kv_row_values() const { return n_kv_heads * max_head_dim(); }  // K (or V) values per token, at most
  int32_t q_dim() const { return n_heads * max_head_dim(); }  // Q (and attention output) values per token, at most
  float attn_scale(int32_t layer = -1) const {  // what multiplies q . k in `layer` (-1: a global layer's)
    const int32_t d = layer < 0 ? head_dim : head_dim_of(layer);
    return query_scale > 0.0f ? query_scale : 1.0f / std::sqrt(static_cast<float>(d));
  }
  bool is_recurrent(int32_t layer) const {
    return !layer_recurrent.empty() && layer_recurrent[static_cast<size_t>(layer)] != 0;
  }
  bool is_local(int32_t layer) const { return !layer_local.empty() && layer_local[static_cast<size_t>(layer)] != 0; }
  int32_t layer_window(int32_t layer) const { return is_local(layer) ? sliding_window : 0; }  // 0: global
  bool any_local() const;
  // Whether local layers rotate differently from global ones (so forward needs a second set of rotations).
  bool local_rope_differs() const {
    return any_local() && (rope_base_local != rope_base || rope_freq_scale_local != rope_freq_scale ||
                           (n_rot_local > 0 && n_rot_local != n_rot) ||
                           (rope_factors_global_only && !rope_freq_factors.empty()));
  }
};

// A description of every RoPE setting above (base, dims, layout, scale, factors; the local layers' when they
// differ), for cache namespaces: two configs with the same description rotate every position identically.
std::string rope_description(const Config& config);

// The keys every architecture shares (`<arch_name>.embedding_length`, heads, context, RoPE and its scaling,
// norm epsilon, vocabulary); the architecture's own flags and keys are left at their defaults. Throws
// preface::Error naming a missing or inconsistent value.
Config read_common_config(const gguf::File& file, const std::string& arch_name);

// The whole configuration: the common keys, then the architecture row's flags and reader (model/arch/registry.h;
// defined in model/arch/read_config.cpp). Throws preface::Error for an unsupported architecture or a missing or
// inconsistent value.
Config read_config(const gguf::File& file);

}  // namespace preface::model
