#include "model/base/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "gguf/writer.h"
#include "util/error.h"

namespace preface::model {
namespace {

// Upper bounds that keep buffer sizes computed from metadata far from overflow; real models are well below.
constexpr int64_t kMaxDim = 1 << 16;
constexpr int64_t kMaxLayers = 1 << 10;
constexpr int64_t kMaxHeads = 1 << 10;
constexpr int64_t kMaxCtx = 1 << 20;

int32_t get_count(const gguf::File& file, const std::string& key, int64_t max_value) {
  const int64_t v = file.get_int(key);
  if (v <= 0 || v > max_value) {
    throw Error("metadata " + key + " = " + std::to_string(v) + " is out of range [1, " +
                std::to_string(max_value) + "]");
  }
  return static_cast<int32_t>(v);
}

int32_t try_count(const gguf::File& file, const std::string& key, int64_t max_value, int32_t fallback) {
  return file.find(key) ? get_count(file, key, max_value) : fallback;
}

// A count, or an array of one count per layer (gemma4), each in [1, max_value]: the scalar (the array's largest,
// with the array in per_layer), or fallback when the key is absent.
int32_t try_count_or_per_layer(const gguf::File& file, const std::string& key, int64_t max_value, int32_t fallback,
                               int32_t n_layers, std::vector<int32_t>& per_layer) {
  const gguf::Value* v = file.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_array()) return get_count(file, key, max_value);
  if (v->nums.size() != static_cast<size_t>(n_layers)) {
    throw Error("metadata " + key + " has " + std::to_string(v->nums.size()) + " values for " +
                std::to_string(n_layers) + " layers");
  }
  int32_t largest = 0;
  for (const double x : v->nums) {
    if (!(x >= 1.0 && x <= static_cast<double>(max_value)) || x != std::floor(x)) {
      throw Error("metadata " + key + " holds a value outside [1, " + std::to_string(max_value) + "]");
    }
    per_layer.push_back(static_cast<int32_t>(x));
    largest = std::max(largest, per_layer.back());
  }
  return largest;
}

// Vocabulary size: rows of token_embd.weight (dims {dim, n_vocab}); the tokenizer must agree when present.
int32_t read_n_vocab(const gguf::File& file) {
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
  int64_t n_vocab = 0;
  if (embd != nullptr && embd->dims.size() == 2) {
    n_vocab = static_cast<int64_t>(embd->dims[1]);
  } else if (tokens != nullptr && tokens->is_array()) {
    n_vocab = static_cast<int64_t>(tokens->array_size());
  } else {
    throw Error("cannot determine the vocabulary size: no 2-D token_embd.weight and no tokenizer.ggml.tokens");
  }
  if (n_vocab <= 0 || n_vocab > std::numeric_limits<int32_t>::max()) {
    throw Error("vocabulary size " + std::to_string(n_vocab) + " is out of range");
  }
  if (tokens != nullptr && tokens->is_array() && static_cast<int64_t>(tokens->array_size()) != n_vocab) {
    throw Error("token_embd.weight has " + std::to_string(n_vocab) + " rows but tokenizer.ggml.tokens has " +
                std::to_string(tokens->array_size()) + " entries");
  }
  return static_cast<int32_t>(n_vocab);
}

// A finite float at key in [lo, hi], or `fallback` when the key is absent.
float float_in(const gguf::File& file, const std::string& key, double lo, double hi, float fallback) {
  const std::optional<double> v = file.try_float(key);
  if (!v) return fallback;
  if (!std::isfinite(*v) || *v < lo || *v > hi) {
    throw Error(key + " = " + std::to_string(*v) + " is out of range [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  }
  return static_cast<float>(*v);
}

// YaRN's settings (Config::rope_yarn), after rope.scaling.factor; needs c.ctx_len.
void read_yarn(const gguf::File& file, const std::string& p, Config& c) {
  if (file.find(p + "rope.scaling.yarn_log_multiplier")) {
    throw Error("unsupported rope scaling: yarn with " + p + "rope.scaling.yarn_log_multiplier (DeepSeek-style mscale)");
  }
  kernels::RopeYarn& y = c.rope_yarn;
  y.ext_factor = float_in(file, p + "rope.scaling.yarn_ext_factor", 0.0, 1.0, 1.0f);
  y.attn_factor *= float_in(file, p + "rope.scaling.yarn_attn_factor", 1e-3, 1e3, 1.0f);
  y.beta_fast = float_in(file, p + "rope.scaling.yarn_beta_fast", 1e-3, 1e6, 32.0f);
  y.beta_slow = float_in(file, p + "rope.scaling.yarn_beta_slow", 1e-3, 1e6, 1.0f);
}

// One factor per rotated pair from an F32/F16/BF16 tensor of n_rot / 2 values, each finite and > 0.
std::vector<float> read_freq_factors(const gguf::TensorInfo& t, int32_t n_rot) {
  const uint64_t n_pairs = static_cast<uint64_t>(n_rot / 2);
  if (t.dims != std::vector<uint64_t>{n_pairs} || !gguf::type_has_codec(t.type)) {
    throw Error(t.name + " must be " + std::to_string(n_pairs) +
                " values (one per rotated pair) of F32, F16 or BF16");
  }
  std::vector<float> factors(n_pairs);
  gguf::decode_values(t.type, t.data, n_pairs, factors.data());
  for (const float f : factors) {
    if (!(f > 0.0f) || !std::isfinite(f)) throw Error(t.name + " holds a factor that is not finite and > 0");
  }
  return factors;
}

// rope.scaling.type none, linear, yarn or longrope (factor: rope.scaling.factor, or the older rope.scale_linear), the
// attention factor, and the frequency factors of rope_freqs.weight or LongRoPE's two sets.
void read_rope_scaling(const gguf::File& file, const std::string& p, Config& c) {
  const std::string scaling = file.try_string(p + "rope.scaling.type").value_or("none");
  std::optional<double> factor;
  if (scaling == "linear" || scaling == "yarn") {
    factor = file.try_float(p + "rope.scaling.factor");
    if (!factor) throw Error(p + "rope.scaling.type is " + scaling + " but " + p + "rope.scaling.factor is missing");
  } else if (scaling == "none" || scaling == "longrope") {
    factor = file.try_float(p + "rope.scale_linear");
  } else {
    throw Error("unsupported rope scaling type '" + scaling + "' (preface runs none, linear, yarn and longrope)");
  }
  if (factor) {
    if (!(*factor >= 1.0) || !std::isfinite(*factor)) throw Error("rope scaling factor must be a finite value >= 1");
    c.rope_freq_scale = 1.0f / static_cast<float>(*factor);
  }
  // rope.scaling.attn_factor multiplies cos and sin whatever the scaling type (llama.cpp multiplies its
  // yarn_attn_factor by it; Phi-4-mini's files carry one).
  c.rope_yarn.attn_factor = float_in(file, p + "rope.scaling.attn_factor", 1e-3, 1e3, 1.0f);
  c.rope_yarn.n_ctx_orig = try_count(file, p + "rope.scaling.original_context_length", kMaxCtx, c.ctx_len);
  if (scaling == "yarn") read_yarn(file, p, c);
  if (const gguf::TensorInfo* t = file.find_tensor("rope_freqs.weight")) {
    c.rope_freq_factors = read_freq_factors(*t, c.n_rot);
    return;  // llama.cpp: rope_freqs.weight wins over LongRoPE's factors
  }
  // LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini): one of two factor sets, chosen once per file as llama.cpp chooses
  // it for its context: the long factors when the context preface serves (context_length) exceeds
  // rope.scaling.original_context_length, else the short ones. Fixed per file, so K at position i still depends
  // only on tokens 0..i (Hugging Face switches by the sequence's length, which would rotate a prefix differently
  // once the sequence grows); the chosen factors are part of rope_description.
  const gguf::TensorInfo* long_factors = file.find_tensor("rope_factors_long.weight");
  const gguf::TensorInfo* short_factors = file.find_tensor("rope_factors_short.weight");
  if (long_factors == nullptr && short_factors == nullptr) {
    if (scaling == "longrope") {
      throw Error(p + "rope.scaling.type is longrope but the file has no rope_factors_long.weight or "
                      "rope_factors_short.weight");
    }
    return;
  }
  const bool use_long = c.ctx_len > c.rope_yarn.n_ctx_orig;
  const gguf::TensorInfo* chosen = use_long ? long_factors : short_factors;
  if (chosen == nullptr) {
    throw Error(std::string("longrope: context_length ") + std::to_string(c.ctx_len) +
                (use_long ? " exceeds" : " does not exceed") + " rope.scaling.original_context_length " +
                std::to_string(c.rope_yarn.n_ctx_orig) + ", which needs " +
                (use_long ? "rope_factors_long.weight" : "rope_factors_short.weight") + ", missing from the file");
  }
  c.rope_freq_factors = read_freq_factors(*chosen, c.n_rot);
}

}  // namespace

bool Config::any_local() const {
  for (const uint8_t local : layer_local) {
    if (local != 0) return true;
  }
  return false;
}

std::string rope_description(const Config& c) {
  std::ostringstream s;
  s << std::hexfloat << "base=" << c.rope_base << ";n_rot=" << c.n_rot << ";neox=" << c.rope_neox
    << ";scale=" << c.rope_freq_scale << ";factors=";
  for (const float f : c.rope_freq_factors) s << f << ",";
  if (c.rope_yarn.active()) {
    const kernels::RopeYarn& y = c.rope_yarn;
    s << ";yarn=" << y.ext_factor << "," << y.attn_factor << "," << y.beta_fast << "," << y.beta_slow << ","
      << y.n_ctx_orig;
  }
  if (c.local_rope_differs()) {
    s << ";local_base=" << c.rope_base_local << ";local_scale=" << c.rope_freq_scale_local
      << ";local_n_rot=" << (c.n_rot_local > 0 ? c.n_rot_local : c.n_rot)
      << ";factors_global_only=" << c.rope_factors_global_only;
  }
  return s.str();
}

Config read_common_config(const gguf::File& file, const std::string& arch_name) {
  Config c;
  c.arch_name = arch_name;
  c.name = file.try_string("general.name").value_or("");
  const std::string p = c.arch_name + ".";

  c.dim = get_count(file, p + "embedding_length", kMaxDim);
  c.n_layers = get_count(file, p + "block_count", kMaxLayers);
  c.n_heads = get_count(file, p + "attention.head_count", kMaxHeads);
  c.n_kv_heads = try_count_or_per_layer(file, p + "attention.head_count_kv", kMaxHeads, c.n_heads, c.n_layers,
                                        c.layer_kv_heads);
  c.ffn_dim = try_count_or_per_layer(file, p + "feed_forward_length", 4 * kMaxDim, 0, c.n_layers, c.layer_ffn);
  if (c.ffn_dim == 0) throw Error("metadata " + p + "feed_forward_length is missing");
  c.ctx_len = get_count(file, p + "context_length", kMaxCtx);
  const std::optional<int64_t> key_length = file.find(p + "attention.key_length")
                                                ? std::optional<int64_t>(get_count(file, p + "attention.key_length", kMaxDim))
                                                : std::nullopt;
  if (!key_length && c.dim % c.n_heads != 0) {
    throw Error("embedding_length " + std::to_string(c.dim) + " is not a multiple of head_count " +
                std::to_string(c.n_heads));
  }
  for (int32_t il = 0; il < c.n_layers; ++il) {
    if (c.n_heads % c.kv_heads_of(il) != 0) {
      throw Error("head_count " + std::to_string(c.n_heads) + " is not a multiple of head_count_kv " +
                  std::to_string(c.kv_heads_of(il)));
    }
  }
  // Heads may be wider or narrower than dim / n_heads (Qwen3: 128-wide heads on a 1024 embedding).
  c.head_dim = key_length ? static_cast<int32_t>(*key_length) : c.dim / c.n_heads;
  if (file.find(p + "attention.value_length") && file.get_int(p + "attention.value_length") != c.head_dim) {
    throw Error("unsupported: " + p + "attention.value_length differs from the key length " +
                std::to_string(c.head_dim));
  }
  if (static_cast<int64_t>(c.n_heads) * c.head_dim > kMaxDim) throw Error("head_count x key_length is too large");
  c.n_rot = try_count(file, p + "rope.dimension_count", kMaxDim, c.head_dim);
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    throw Error("rope.dimension_count " + std::to_string(c.n_rot) + " must be even and <= head_dim " +
                std::to_string(c.head_dim));
  }
  c.rope_base = static_cast<float>(file.try_float(p + "rope.freq_base").value_or(10000.0));
  if (!(c.rope_base > 1.0f) || !std::isfinite(c.rope_base)) {
    throw Error("rope.freq_base must be a finite value > 1");
  }
  read_rope_scaling(file, p, c);
  c.rms_eps = static_cast<float>(file.get_float(p + "attention.layer_norm_rms_epsilon"));
  if (!(c.rms_eps > 0.0f) || !std::isfinite(c.rms_eps)) {
    throw Error("attention.layer_norm_rms_epsilon must be a finite value > 0");
  }
  c.n_vocab = read_n_vocab(file);
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  c.rope_base_local = c.rope_base;
  c.rope_freq_scale_local = c.rope_freq_scale;
  return c;
}

}  // namespace preface::model
