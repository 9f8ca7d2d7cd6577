#include "model/capacity.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>

#include "kernels/attention.h"
#include "model/arch/registry.h"
#include "util/error.h"

namespace preface::model {
namespace {

constexpr int32_t kMaxShapeDim = 1 << 16;  // bound on layers, heads, head_dim: keeps products < 2^64
constexpr int32_t kMaxBlockSize = 1 << 20;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// a * b, or preface::Error naming `what` when the product exceeds 2^64 - 1.
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw Error(std::string(what) + " does not fit in 64 bits");
  return out;
}

void check_block_size(int32_t block_size) {
  if (block_size < 1 || block_size > kMaxBlockSize) {
    throw Error("block size " + std::to_string(block_size) + " is out of range [1, " +
                std::to_string(kMaxBlockSize) + "]");
  }
}

struct BuiltinRow {
  const char* name;
  const char* arch;
  int32_t n_layers, n_heads, n_kv_heads, head_dim, dim, ffn_dim, n_vocab;
  bool tied_embeddings, qkv_bias;
};

// Published configurations (the models' config.json on their official Hugging Face repositories).
// *stories260k: llama2.c's checkpoint ties the classifier (260,032 parameters); its GGUF conversion stores a
// separate output.weight (292,800 parameters counted from the file).
constexpr BuiltinRow kBuiltins[] = {
    // name             arch     layers heads kv  hdim  dim   ffn    vocab  tied   bias
    {"llama2-7b",      "llama", 32,    32,   32, 128,  4096, 11008, 32000,  false, false},
    {"llama2-13b",     "llama", 40,    40,   40, 128,  5120, 13824, 32000,  false, false},
    {"llama3-8b",      "llama", 32,    32,   8,  128,  4096, 14336, 128256, false, false},
    {"llama3-70b",     "llama", 80,    64,   8,  128,  8192, 28672, 128256, false, false},
    {"mistral-7b",     "llama", 32,    32,   8,  128,  4096, 14336, 32000,  false, false},  // v0.1
    {"qwen2-7b",       "qwen2", 28,    28,   4,  128,  3584, 18944, 152064, false, true},
    {"qwen2.5-0.5b",   "qwen2", 24,    14,   2,  64,   896,  4864,  151936, true,  true},
    {"tinyllama-1.1b", "llama", 22,    32,   4,  64,   2048, 5632,  32000,  false, false},
    {"smollm-135m",    "llama", 30,    9,    3,  64,   576,  1536,  49152,  true,  false},
    {"stories260k",    "llama", 5,     8,    4,  8,    64,   172,   512,    true,  false},  // llama2.c, tied*
};

// Shapes whose layers differ: every `period`-th layer (the last of each period) global, the others sliding-window.
// The top-level KV fields are the sliding layers'; the parameter count is the published one.
struct PatternedRow {
  const char* name;
  const char* arch;
  int32_t n_layers, n_heads, n_kv_heads, head_dim, dim, ffn_dim, n_vocab;
  int32_t period, window, global_kv_heads, global_head_dim;
  uint64_t n_params;
};

// gemma4-31b: 60 layers (50 sliding + 10 global), sliding 16 KV heads x 256, global 4 KV heads x 512 with keys used
// as values (engines that store K once report ~840 KiB per token in f16; preface stores V rows too).
constexpr PatternedRow kPatterned[] = {
    {"gemma4-31b", "gemma4", 60, 32, 16, 256, 5376, 21504, 262144, 6, 1024, 4, 512, 30'700'000'000},
};

// The fields both tables share.
template <typename Row>
KvShape row_shape(const Row& r) {
  KvShape s;
  s.name = r.name;
  s.arch = r.arch;
  s.n_layers = r.n_layers;
  s.n_heads = r.n_heads;
  s.n_kv_heads = r.n_kv_heads;
  s.head_dim = r.head_dim;
  s.dim = r.dim;
  s.ffn_dim = r.ffn_dim;
  s.n_vocab = r.n_vocab;
  return s;
}

// The positive integer at `key`; when absent, `fallback` unless it is 0 (the key is required).
int32_t meta_count(const gguf::File& file, const std::string& key, int32_t fallback) {
  if (!file.find(key)) {
    if (fallback > 0) return fallback;
    throw Error("metadata " + key + " is missing");
  }
  const int64_t v = file.get_int(key);
  if (v <= 0 || v > std::numeric_limits<int32_t>::max()) {
    throw Error("metadata " + key + " = " + std::to_string(v) + " is out of range");
  }
  return static_cast<int32_t>(v);
}

}  // namespace

std::string_view param_source_text(ParamSource s) {
  switch (s) {
    case ParamSource::ComputedFromShape: return "computed from the shape";
    case ParamSource::CountedFromTensors: return "counted from the file's tensors";
    case ParamSource::Published: return "published";
  }
  return "?";
}

void validate_shape(const KvShape& s) {
  const auto check = [&](const char* field, int32_t v) {
    if (v < 1 || v > kMaxShapeDim) {
      throw Error("shape '" + s.name + "': " + field + " = " + std::to_string(v) + " is out of range [1, " +
                  std::to_string(kMaxShapeDim) + "]");
    }
  };
  check("n_layers", s.n_layers);
  check("n_kv_heads", s.n_kv_heads);
  check("head_dim", s.head_dim);
  if (s.n_heads != 0 && (s.n_heads < 0 || s.n_heads % s.n_kv_heads != 0)) {
    throw Error("shape '" + s.name + "': n_heads " + std::to_string(s.n_heads) + " is not a multiple of n_kv_heads " +
                std::to_string(s.n_kv_heads));
  }
}

uint64_t shape_param_count(const KvShape& s) {
  validate_shape(s);
  const auto dim = static_cast<uint64_t>(s.dim);
  const auto q_width = static_cast<uint64_t>(s.n_heads) * static_cast<uint64_t>(s.head_dim);
  const auto kv_width = static_cast<uint64_t>(s.n_kv_heads) * static_cast<uint64_t>(s.head_dim);
  const uint64_t embed = dim * static_cast<uint64_t>(s.n_vocab) * (s.tied_embeddings ? 1 : 2);
  const uint64_t attn = 2 * dim * q_width + 2 * dim * kv_width + (s.qkv_bias ? q_width + 2 * kv_width : 0);
  const uint64_t ffn = 3 * dim * static_cast<uint64_t>(s.ffn_dim);
  const uint64_t per_layer = attn + ffn + 2 * dim;
  return embed + static_cast<uint64_t>(s.n_layers) * per_layer + dim;
}

std::optional<KvShape> builtin_shape(std::string_view name) {
  const std::string n = lower(name);
  for (const BuiltinRow& r : kBuiltins) {
    if (n != r.name) continue;
    KvShape s = row_shape(r);
    s.tied_embeddings = r.tied_embeddings;
    s.qkv_bias = r.qkv_bias;
    s.n_params = shape_param_count(s);
    s.params_source = ParamSource::ComputedFromShape;
    return s;
  }
  for (const PatternedRow& r : kPatterned) {
    if (n != r.name) continue;
    KvShape s = row_shape(r);
    s.tied_embeddings = true;
    std::vector<MemorySpec> layers;
    for (int32_t il = 0; il < r.n_layers; ++il) {
      layers.push_back((il + 1) % r.period == 0
                           ? MemorySpec::paged(r.global_kv_heads, r.global_head_dim, r.global_head_dim)
                           : MemorySpec::paged(r.n_kv_heads, r.head_dim, r.head_dim, r.window));
    }
    s.memory = MemoryLayout(std::move(layers));
    s.n_params = r.n_params;
    s.params_source = ParamSource::Published;
    return s;
  }
  return std::nullopt;
}

std::vector<std::string> builtin_shape_names() {
  std::vector<std::string> names;
  for (const BuiltinRow& r : kBuiltins) names.emplace_back(r.name);
  for (const PatternedRow& r : kPatterned) names.emplace_back(r.name);
  return names;
}

int32_t window_reserve_blocks(int32_t window, int32_t block_size) {
  return (window + kernels::kAttnChunk + block_size - 1) / block_size + 2;
}

std::vector<GroupHold> sequence_hold(const MemoryLayout& memory, const kernels::KvFormat& t, int32_t block_size,
                                     uint64_t n_tokens) {
  check_block_size(block_size);
  if (n_tokens > (uint64_t{1} << 31) - 2) throw Error("sequence_hold: " + std::to_string(n_tokens) + " tokens");
  const auto bs = static_cast<uint64_t>(block_size);
  const uint64_t n_blocks = (n_tokens + bs - 1) / bs;
  const bool split = memory.can_split_windows();
  std::vector<GroupHold> out;
  for (const MemoryGroup& g : memory.groups()) {
    GroupHold h;
    if (g.spec.kind == MemoryKind::PagedRows) {
      const uint64_t block_bytes = checked_mul(g.spec.token_bytes(t) * g.layers.size(), bs, "group block bytes");
      h.n_blocks_kept = n_blocks;
      h.n_blocks_reclaim = n_blocks;
      if (split && g.spec.window > 0) {
        const auto next = static_cast<int32_t>(n_tokens) + 1;
        h.n_blocks_reclaim -= static_cast<uint64_t>(kernels::attention_first_read(next, g.spec.window)) / bs;
      }
      h.bytes_kept = checked_mul(h.n_blocks_kept, block_bytes, "group bytes");
      h.bytes_reclaim = checked_mul(h.n_blocks_reclaim, block_bytes, "group bytes");
    } else if (g.spec.kind == MemoryKind::State) {
      h.bytes_kept = h.bytes_reclaim = g.spec.state_bytes * g.layers.size();
    }
    out.push_back(h);
  }
  return out;
}

KvShape shape_from_gguf(const gguf::File& file) {
  KvShape s;
  s.arch = file.get_string("general.architecture");
  s.name = std::filesystem::path(file.path()).filename().string();
  const std::string p = s.arch + ".";
  if (find_architecture(s.arch) != nullptr) {
    // The architecture's own reading: the layers it runs (qwen35: without its MTP block) and per-layer shapes
    // (gemma4: head sizes, KV heads and FFN widths per layer, shared KV).
    const Config c = read_config(file);
    s.dim = c.dim;
    s.n_layers = c.n_layers;
    s.n_heads = c.n_heads;
    s.n_kv_heads = c.n_kv_heads;
    s.head_dim = c.head_dim;
    s.ffn_dim = c.layer_ffn.empty() ? c.ffn_dim : 0;  // 0: unknown (widths differ per layer)
    s.memory = memory_layout(c);
  } else {
    s.dim = meta_count(file, p + "embedding_length", 0);
    s.n_layers = meta_count(file, p + "block_count", 0);
    s.n_heads = meta_count(file, p + "attention.head_count", 0);
    s.n_kv_heads = meta_count(file, p + "attention.head_count_kv", s.n_heads);
    s.head_dim = meta_count(file, p + "attention.key_length", s.dim % s.n_heads == 0 ? s.dim / s.n_heads : 0);
    if (meta_count(file, p + "attention.value_length", s.head_dim) != s.head_dim) {
      throw Error("unsupported: " + p + "attention.value_length differs from the key length");
    }
    const gguf::Value* ffn = file.find(p + "feed_forward_length");
    s.ffn_dim = ffn != nullptr && !ffn->is_array() ? meta_count(file, p + "feed_forward_length", 0) : 0;  // 0: unknown
  }
  if (const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight"); embd && embd->dims.size() == 2) {
    s.n_vocab = static_cast<int32_t>(std::min<uint64_t>(embd->dims[1], std::numeric_limits<int32_t>::max()));
  }
  s.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  s.qkv_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  validate_shape(s);
  uint64_t n_params = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (__builtin_add_overflow(n_params, t.n_values, &n_params)) throw Error("tensor element count overflows");
  }
  s.n_params = n_params;
  s.params_source = ParamSource::CountedFromTensors;
  return s;
}

MemoryLayout memory_layout(const KvShape& s) {
  validate_shape(s);
  return s.memory.n_layers() > 0 ? s.memory : MemoryLayout::uniform(s.n_layers, s.n_kv_heads, s.head_dim);
}

uint64_t kv_bytes_per_token(const KvShape& s, const kernels::KvFormat& t) { return memory_layout(s).paged_bytes_per_token(t); }

KvBudget fit_budget(const KvShape& s, const kernels::KvFormat& t, int32_t block_size, uint64_t budget_bytes) {
  check_block_size(block_size);
  KvBudget b;
  b.budget_bytes = budget_bytes;
  b.block_bytes = checked_mul(kv_bytes_per_token(s, t), static_cast<uint64_t>(block_size), "bytes per block");
  b.n_blocks = budget_bytes / b.block_bytes;
  b.n_tokens = b.n_blocks * static_cast<uint64_t>(block_size);  // <= budget_bytes / bytes_per_token
  return b;
}

PrefixCost prefix_cost(const KvShape& s, const kernels::KvFormat& t, int32_t block_size, uint64_t n_tokens) {
  check_block_size(block_size);
  const uint64_t per_token = kv_bytes_per_token(s, t);
  const auto bs = static_cast<uint64_t>(block_size);
  PrefixCost c;
  c.n_tokens = n_tokens;
  c.exact_bytes = checked_mul(n_tokens, per_token, "prefix bytes");
  c.n_blocks = n_tokens / bs + (n_tokens % bs != 0 ? 1 : 0);
  c.block_bytes = checked_mul(checked_mul(c.n_blocks, bs, "prefix block tokens"), per_token, "prefix block bytes");
  c.prefill_flops = 2.0 * static_cast<double>(s.n_params) * static_cast<double>(n_tokens);
  return c;
}

}  // namespace preface::model
