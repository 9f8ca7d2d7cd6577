// The architectures preface runs, one row each, keyed by general.architecture. The llama-family layer
// (model/forward.cpp: RMSNorm, attention with RoPE, gated FFN) is shared; a row says how an architecture varies it,
// and an architecture whose layer differs in more than flags (gemma2, gemma3: embedding scale, post-norms, GeGLU,
// soft-capping, interleaved sliding-window layers) has its own file under src/model/ with a reader that sets
// those Config fields from its metadata.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "gguf/reader.h"
#include "model/config.h"

namespace preface::model {

struct Architecture {
  const char* name;  // general.architecture
  bool rope_neox;    // rotate halves (x[i], x[i + n_rot/2]) rather than adjacent pairs (x[2i], x[2i+1])
  bool qkv_bias;     // Q/K/V projections always carry biases (attn_{q,k,v}.bias)
  bool qk_norm;      // Q and K RMS-normalized per head before RoPE (attn_q_norm, attn_k_norm: [head_dim])
  // One attn_qkv matrix (rows: Q, then K, then V) and one ffn_up matrix (rows: gate, then up) instead of separate
  // ones; the model takes row views of them, so the layer is the shared one.
  bool fused_projections;
  // Reads what else the architecture needs (`<arch>.` keys; prefix = "<arch>.") into c, after the common keys;
  // throws preface::Error naming the key on a bad value. nullptr: nothing else.
  void (*read)(const gguf::File& file, const std::string& prefix, Config& c);
};

// The readers of the architectures with their own file (model/gemma2.cpp, model/gemma3.cpp), and the llama
// family's sliding window (Mistral: llama.attention.sliding_window on every layer).
void read_gemma2(const gguf::File& file, const std::string& prefix, Config& c);
void read_gemma3(const gguf::File& file, const std::string& prefix, Config& c);
void read_llama_window(const gguf::File& file, const std::string& prefix, Config& c);
// Gemma's shared hyper-parameters: embeddings scaled by sqrt(dim), post-norms, GeGLU, the sliding window
// (attention.sliding_window, else default_window), the query scale (attention.query_pre_attn_scalar when present)
// and the final soft-cap (final_logit_softcapping when present, else default_final_cap; 0: none).
void read_gemma_common(const gguf::File& file, const std::string& prefix, Config& c, int64_t default_window,
                       float default_final_cap);
// The float at key, which must be finite and > 0 (preface::Error naming the key otherwise), or nullopt when absent.
std::optional<float> positive_float(const gguf::File& file, const std::string& key);

// The row for `name`, or nullptr.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen2, qwen3": for messages.
std::string architecture_names();

}  // namespace preface::model
