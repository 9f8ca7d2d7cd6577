// Hyper-parameters of a decoder-only transformer, read from GGUF metadata (`<arch>.*` keys).
#pragma once
#include <cstdint>
#include <string>

#include "gguf/reader.h"

namespace preface::model {

enum class Arch { Llama, Qwen2 };

struct Config {
  Arch arch = Arch::Llama;
  std::string arch_name;      // "llama" | "qwen2"
  std::string name;           // general.name, may be empty
  int32_t n_vocab = 0;
  int32_t dim = 0;            // embedding length
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;     // GQA: n_heads % n_kv_heads == 0
  int32_t head_dim = 0;       // dim / n_heads
  int32_t ffn_dim = 0;
  int32_t n_rot = 0;          // rope.dimension_count (default head_dim)
  float rope_base = 10000.0f; // rope.freq_base
  bool rope_neox = false;     // true for qwen2 (rotate halves), false for llama (rotate adjacent pairs)
  float rms_eps = 1e-5f;
  int32_t ctx_len = 0;        // context_length
  bool qkv_bias = false;      // qwen2
  bool tied_embeddings = false;  // no output.weight: the output head is token_embd.weight

  int32_t kv_row_values() const { return n_kv_heads * head_dim; }  // K (or V) values per token per layer
};

// Throws preface::Error for an unsupported architecture or missing/inconsistent values.
Config read_config(const gguf::File& file);

}  // namespace preface::model
