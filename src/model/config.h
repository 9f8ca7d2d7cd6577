// Hyper-parameters of a decoder-only transformer, read from GGUF metadata (`<arch>.*` keys).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"

namespace preface::model {

struct Config {
  std::string arch_name;      // general.architecture, a row of model/architectures.h
  std::string name;           // general.name, may be empty
  int32_t n_vocab = 0;
  int32_t dim = 0;            // embedding length
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;     // GQA: n_heads % n_kv_heads == 0
  int32_t head_dim = 0;       // attention.key_length, else dim / n_heads
  int32_t ffn_dim = 0;
  int32_t n_rot = 0;          // rope.dimension_count (default head_dim)
  float rope_base = 10000.0f; // rope.freq_base
  bool rope_neox = false;     // true for qwen2 (rotate halves), false for llama (rotate adjacent pairs)
  // Pair i's angle at position p is rope_freq_scale * (p * base^(-2i/n_rot) / rope_freq_factors[i]), as ggml:
  float rope_freq_scale = 1.0f;          // 1 / rope.scaling.factor with rope.scaling.type linear, else 1
  std::vector<float> rope_freq_factors;  // rope_freqs.weight (Llama 3.1 and later), [n_rot / 2]; empty: all 1
  float rms_eps = 1e-5f;
  int32_t ctx_len = 0;        // context_length
  bool qkv_bias = false;      // qwen2
  bool qk_norm = false;       // qwen3: per-head RMSNorm of Q and K before RoPE
  bool fused_projections = false;  // phi3: attn_qkv and a gate+up ffn_up (model/architectures.h)
  bool tied_embeddings = false;  // no output.weight: the output head is token_embd.weight

  int32_t kv_row_values() const { return n_kv_heads * head_dim; }  // K (or V) values per token per layer
  int32_t q_dim() const { return n_heads * head_dim; }  // Q (and attention output) values per token
};

// A description of every RoPE setting above (base, dims, layout, scale, factors), for cache namespaces: two configs
// with the same description rotate every position identically.
std::string rope_description(const Config& config);

// Throws preface::Error for an unsupported architecture or missing/inconsistent values.
Config read_config(const gguf::File& file);

}  // namespace preface::model
