// The architectures preface runs, keyed by general.architecture: one file per family under model/arch/
// (llama.cpp, qwen.cpp, qwen35.cpp, phi3.cpp, gemma.cpp, gemma4.cpp, gpt_oss.cpp), each defining its rows, and the
// one table in registry.cpp that lists them. A row says which hyper-parameters the architecture reads beyond the
// common ones (config.cpp) and which layer kinds make each of its blocks (model/layers/). Adding an architecture: a
// file with its row (and any new layer kind it needs) and a line in the table.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "gguf/reader.h"
#include "model/base/config.h"
#include "model/base/memory.h"
#include "model/layers/layer.h"

namespace preface::model {

struct Architecture {
  const char* name;  // general.architecture
  bool rope_neox;    // rotate halves (x[i], x[i + n_rot/2]) rather than adjacent pairs (x[2i], x[2i+1])
  bool qkv_bias;     // Q/K/V projections always carry biases (attn_{q,k,v}.bias)
  bool qk_norm;      // Q and K RMS-normalized per head before RoPE (attn_q_norm, attn_k_norm: [head_dim])
  // One attn_qkv matrix (rows: Q, then K, then V) and one ffn_up matrix (rows: gate, then up) instead of separate
  // ones; the layers take row views of them.
  bool fused_projections;
  // Reads what else the architecture needs (`<arch>.` keys; prefix = "<arch>.") into c, after the common keys;
  // throws preface::Error naming the key on a bad value. nullptr: nothing else.
  void (*read)(const gguf::File& file, const std::string& prefix, Config& c);
  // Block il's layer kinds with their weights read from the file (throws preface::Error naming a bad tensor).
  Block (*block)(const gguf::File& file, const Config& c, int32_t il);
  // What block il remembers (model/base/memory.h): its mixer kind's declaration, from the Config alone, so that
  // the KV storage and the capacity calculator can size memory without reading weights.
  MemorySpec (*memory)(const Config& c, int32_t il);
};

// Attention then a gated FFN, their options from the Config (what read_config and the row's reader set): the
// block of every architecture today.
Block standard_block(const gguf::File& file, const Config& c, int32_t il);
// What standard_block remembers: its attention's paged rows (AttentionLayer::memory).
MemorySpec standard_memory(const Config& c, int32_t il);

// Every layer's spec from the row of c.arch_name (throws preface::Error for an unknown architecture or a layout
// MemoryLayout refuses).
MemoryLayout memory_layout(const Config& c);

// The float at key, which must be finite and > 0 (preface::Error naming the key otherwise), or nullopt when absent.
std::optional<float> positive_float(const gguf::File& file, const std::string& key);
// The mixture-of-experts keys (expert_count, expert_used_count, expert_feed_forward_length, optional
// expert_shared_feed_forward_length, expert_gating_func, expert_weights_norm, expert_weights_scale) into c.moe over
// the architecture's defaults (what llama.cpp assumes where a key is absent); preface::Error naming a bad key.
void read_experts(const gguf::File& file, const std::string& prefix, Config& c, const Config::Moe& defaults);
// The integer at key, which must lie in [lo, hi] (preface::Error naming the key otherwise); `fallback` when the key
// is absent, or an Error saying it is missing when there is no fallback.
int32_t read_int_in(const gguf::File& file, const std::string& key, int64_t lo, int64_t hi,
                    std::optional<int64_t> fallback = std::nullopt);
// The window of <prefix>attention.sliding_window, else fallback (0: none); preface::Error when out of range.
int32_t read_window(const gguf::File& file, const std::string& prefix, int64_t fallback);

// The row for `name`, or nullptr.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen2, qwen3": for messages.
std::string architecture_names();

}  // namespace preface::model
