// Synthetic models: random-weight GGUF files in the llama/qwen2/qwen3moe/gpt-oss/qwen35 layout that llama.cpp loads, for
// tests and benchmarks of any size. Output depends only on the spec (same spec and seed -> identical bytes).
#pragma once
#include <cstdint>
#include <string>

#include "gguf/types.h"

namespace preface::model {

struct SynthSpec {
  // "llama" | "qwen2" (adds F32 Q/K/V biases) | "qwen3moe" (per-head Q/K norms, a mixture-of-experts FFN: an F32
  // router and n_experts experts of expert_ffn, n_experts_used per token, softmax then top-k, renormalized) |
  // "gpt-oss" (Q/K/V/O biases, attention sinks, a sliding window on even layers, post_attention_norm before a
  // mixture-of-experts FFN with router and expert biases, experts in MXFP4 whatever `type`, as published files) |
  // "qwen35" (Gated DeltaNet hybrid: model/synth_qwen35.cpp)
  std::string arch = "llama";
  int32_t dim = 128;           // embedding length; multiple of n_heads (and of 32 for quantized types)
  int32_t n_layers = 2;
  int32_t n_heads = 8;
  int32_t n_kv_heads = 2;      // divides n_heads
  int32_t ffn_dim = 0;         // 0: 8/3 * dim rounded up to a multiple of 32
  int32_t n_experts = 64;      // qwen3moe and gpt-oss
  int32_t n_experts_used = 8;  // qwen3moe and gpt-oss
  int32_t expert_ffn = 0;      // qwen3moe and gpt-oss; 0: ffn_dim / 4 rounded up to a multiple of 32
  int32_t sliding_window = 128;  // gpt-oss only
  int32_t head_dim = 0;        // attention head size; 0: dim / n_heads
  // qwen35 only: rotated dims per attention head (0: head_dim / 4); every this-many-th block full attention, the
  // others Gated DeltaNet with ssm_k_heads K heads and ssm_v_heads V heads of ssm_head_dim and a conv of ssm_conv.
  int32_t rope_dims = 0;
  int32_t full_attention_interval = 4;
  int32_t ssm_k_heads = 2, ssm_v_heads = 4, ssm_head_dim = 32, ssm_conv = 4;
  int32_t ctx_len = 2048;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  gguf::TensorType type = gguf::TensorType::F16;  // 2-D weights incl. token_embd; norms and biases are F32
  // llama-quantize's "_M" mix (Q4_K_M, Q5_K_M): attn_v and ffn_down in Q6_K on the layers llama.cpp gives more
  // bits (use_more_bits). With a K-quant or IQ4_XS `type`, output.weight is Q6_K either way, as llama-quantize.
  bool k_mix = false;
  bool tied = false;           // no output.weight: the output head reuses token_embd.weight
  uint64_t seed = 0;
  std::string vocab_from;      // GGUF whose tokenizer.* metadata is copied verbatim; n_vocab = its token count
  std::string name;            // general.name; empty: "synthetic-<arch>-d<dim>-l<layers>-<type>"
};

// The type synth writes for tensor `name` ("output.weight", "blk.3.attn_v.weight", ...): spec.type or the mix's.
gguf::TensorType synth_tensor_type(const SynthSpec& spec, const std::string& name);

// The attention head size actually used (resolves 0 to dim / n_heads).
int32_t synth_head_dim(const SynthSpec& spec);
// The ffn_dim actually used for `spec` (resolves 0 to the default).
int32_t synth_ffn_dim(const SynthSpec& spec);
// The expert_ffn actually used for a qwen3moe or gpt-oss `spec` (resolves 0 to the default).
int32_t synth_expert_ffn(const SynthSpec& spec);

// Writes the model to `out_path`. Throws preface::Error for an inconsistent spec, an unreadable vocab file or
// an I/O failure.
void write_synth_model(const SynthSpec& spec, const std::string& out_path);

}  // namespace preface::model
