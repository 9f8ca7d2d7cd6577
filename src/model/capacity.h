// KV-cache capacity arithmetic (`preface kv`, --kv-cache-mem): how many bytes one token's K and V take for a model
// shape and a KV type (kernels/kv_type.h), how many tokens and blocks fit in a byte budget, and what a cached
// prefix costs in memory and saves in prefill compute. Pure functions; bad input throws preface::Error.
//
// Bytes per token come from the shape's memory layout (model/base/memory.h's one formula, which kv::KvStorage
// allocates by): for a plain transformer
//   bytes per token = 2 (K and V) x n_layers x n_kv_heads x head_dim x bytes per value
//   bytes per value: f32 4, f16 2, bf16 2, q8_0 34/32 (blocks of 32 values: an f16 scale + 32 int8)
// A q8_0 head row of head_dim values is counted as ceil(head_dim / 32) blocks, so a head_dim that is not a
// multiple of 32 is padded here (real models use 64 or 128, where 34/32 is exact). The KV storage itself
// (kv/kv_storage.h) refuses q8_0 for such models; for the others these numbers equal its bytes_per_token().
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "kernels/kv_type.h"
#include "model/base/memory.h"

namespace preface::model {

enum class ParamSource {
  ComputedFromShape,   // shape_param_count: embeddings, attention, SwiGLU FFN, RMSNorm weights
  CountedFromTensors,  // the sum of n_values over the GGUF's tensors
  Published,           // the model card's figure (shapes whose layers differ, which shape_param_count cannot count)
};
// "computed from the shape" | "counted from the file's tensors" | "published"
std::string_view param_source_text(ParamSource s);

// The dimensions that size the KV cache, plus those that size the weights (for the parameter count).
struct KvShape {
  std::string name;            // the built-in name, or the GGUF file name
  std::string arch = "llama";  // GGUF general.architecture
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;      // grouped-query attention: n_heads % n_kv_heads == 0
  int32_t head_dim = 0;        // values per head row of K, V and Q
  int32_t dim = 0;             // embedding length
  int32_t ffn_dim = 0;         // SwiGLU hidden size; 0 when unknown (read from a file whose arch differs)
  int32_t n_vocab = 0;
  bool tied_embeddings = false;  // the output head reuses token_embd (counted once)
  bool qkv_bias = false;         // Q/K/V projections carry biases (qwen2)
  uint64_t n_params = 0;
  ParamSource params_source = ParamSource::ComputedFromShape;
  // What each layer remembers, from the architecture's row (model/arch/registry.h) when the shape was read from a
  // file of an architecture preface runs; empty: every layer remembers the paged rows the fields above give.
  MemoryLayout memory;
};

// s.memory, or the uniform layout of the fields when it is empty. Validates the shape.
MemoryLayout memory_layout(const KvShape& s);

// Throws preface::Error unless n_layers, n_kv_heads and head_dim are in [1, 65536] (so every product below fits
// in 64 bits) and, when n_heads is set, n_heads is a multiple of n_kv_heads.
void validate_shape(const KvShape& shape);

// Parameters of a Llama-family decoder with this shape: token_embd (+ output unless tied) + per layer
// (Q, K, V, O projections, Q/K/V biases when qkv_bias, gate/up/down FFN, two norms) + the final norm.
uint64_t shape_param_count(const KvShape& shape);

// Built-in shapes of well-known models (published dimensions; n_params = shape_param_count, which equals the
// published exact counts). Names are lower case, e.g. "llama3-8b"; lookup is case-insensitive.
std::optional<KvShape> builtin_shape(std::string_view name);
std::vector<std::string> builtin_shape_names();  // in table order

// The shape from a GGUF's `<arch>.*` metadata (any architecture with the standard keys; head_dim is
// attention.key_length when present, else embedding_length / head_count) with n_params counted from its
// tensors, and the memory layout of its architecture when preface runs it (read_config, then the row's specs).
// Throws preface::Error on missing or inconsistent keys, or K and V head sizes that differ.
KvShape shape_from_gguf(const gguf::File& file);

uint64_t kv_bytes_per_token(const KvShape& shape, const kernels::KvFormat& t);  // memory_layout(shape)'s paged bytes

// Whole blocks of block_size tokens that fit in budget_bytes (a paged pool holds only whole blocks).
struct KvBudget {
  uint64_t budget_bytes = 0;
  uint64_t block_bytes = 0;  // bytes_per_token * block_size
  uint64_t n_blocks = 0;     // floor(budget_bytes / block_bytes)
  uint64_t n_tokens = 0;     // n_blocks * block_size
};
KvBudget fit_budget(const KvShape& shape, const kernels::KvFormat& t, int32_t block_size, uint64_t budget_bytes);

// What caching the first n_tokens of a prompt costs and saves.
struct PrefixCost {
  uint64_t n_tokens = 0;
  uint64_t exact_bytes = 0;   // n_tokens * bytes_per_token
  uint64_t n_blocks = 0;      // ceil(n_tokens / block_size)
  uint64_t block_bytes = 0;   // n_blocks * block_size * bytes_per_token: what the pool really holds
  double prefill_flops = 0;   // about 2 x n_params x n_tokens (one multiply-add per weight per token)
};
PrefixCost prefix_cost(const KvShape& shape, const kernels::KvFormat& t, int32_t block_size, uint64_t n_tokens);

// The most blocks of a window-w group's own pool (kv/window_pool.h) one running sequence holds at once: its window,
// the attention chunk below it (kernels::attention_first_read) and a partly filled block at either end; a step's
// prefill chunk adds its own blocks.
int32_t window_reserve_blocks(int32_t window, int32_t block_size);

// What one sequence of n_tokens computed tokens holds of one memory group, in whole blocks (paged groups) or bytes
// (state groups; layers reading another layer's rows hold nothing): every position kept, and with the windowed
// layers in a pool of their own (MemoryLayout::can_split_windows; --kv-window-reclaim), where a windowed group
// holds only the blocks from the first one its next query may load, ceil(n / B) - attention_first_read(n + 1, w) / B.
struct GroupHold {
  uint64_t n_blocks_kept = 0, bytes_kept = 0;            // every position
  uint64_t n_blocks_reclaim = 0, bytes_reclaim = 0;      // windowed layers in their own pool
};
std::vector<GroupHold> sequence_hold(const MemoryLayout& memory, const kernels::KvFormat& t, int32_t block_size,
                                     uint64_t n_tokens);

}  // namespace preface::model
