// The architectures preface runs, one row each, keyed by general.architecture. The llama-family layer
// (model/forward.cpp: RMSNorm, attention with RoPE, SwiGLU FFN) is shared; a row says how an architecture varies it.
// An architecture whose layer differs in kind (gemma's extra norms and soft-capping) gets its own file under
// src/model/ behind this table when it is added.
#pragma once
#include <string>
#include <string_view>

namespace preface::model {

struct Architecture {
  const char* name;  // general.architecture
  bool rope_neox;    // rotate halves (x[i], x[i + n_rot/2]) rather than adjacent pairs (x[2i], x[2i+1])
  bool qkv_bias;     // Q/K/V projections always carry biases (attn_{q,k,v}.bias)
  bool qk_norm;      // Q and K RMS-normalized per head before RoPE (attn_q_norm, attn_k_norm: [head_dim])
  // One attn_qkv matrix (rows: Q, then K, then V) and one ffn_up matrix (rows: gate, then up) instead of separate
  // ones; the model takes row views of them, so the layer is the shared one.
  bool fused_projections;
};

// The row for `name`, or nullptr.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen2, qwen3": for messages.
std::string architecture_names();

}  // namespace preface::model
