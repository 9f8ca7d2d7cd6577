#include "model/architectures.h"

#include <cmath>
#include <optional>

#include "util/error.h"

namespace preface::model {
namespace {

constexpr Architecture kArchitectures[] = {
    // name  neox   bias   qk_norm fused  reader
    // Llama 1-3.x, Mistral, TinyLlama, SmolLM (a llama file may carry biases)
    {"llama", false, false, false, false, read_llama_window},
    {"qwen2", true, true, false, false, nullptr},
    {"qwen3", true, false, true, false, nullptr},
    // phi3.attention.sliding_window is not applied, as llama.cpp has not since mid-2025 (docs in README).
    {"phi3", true, false, false, true, nullptr},
    {"gemma2", true, false, false, false, read_gemma2},
    {"gemma3", true, false, true, false, read_gemma3},
};

// The window of attention.sliding_window, else fallback (0: none).
int32_t read_window(const gguf::File& file, const std::string& prefix, int64_t fallback) {
  const std::string key = prefix + "attention.sliding_window";
  const int64_t w = file.try_int(key).value_or(fallback);
  if (w < 0 || w > (int64_t{1} << 30)) throw Error("metadata " + key + " = " + std::to_string(w) + " is out of range");
  return static_cast<int32_t>(w);
}

}  // namespace

std::optional<float> positive_float(const gguf::File& file, const std::string& key) {
  const std::optional<double> v = file.try_float(key);
  if (!v) return std::nullopt;
  if (!(*v > 0.0) || !std::isfinite(*v)) throw Error("metadata " + key + " must be a finite value > 0");
  return static_cast<float>(*v);
}

void read_llama_window(const gguf::File& file, const std::string& prefix, Config& c) {
  c.sliding_window = read_window(file, prefix, 0);
  if (c.sliding_window > 0) c.layer_local.assign(static_cast<size_t>(c.n_layers), 1);
}

void read_gemma_common(const gguf::File& file, const std::string& prefix, Config& c, int64_t default_window,
                       float default_final_cap) {
  // ggml_scale by sqrtf(n_embd), as llama.cpp.
  c.embd_scale = std::sqrt(static_cast<float>(c.dim));
  c.post_norms = true;
  c.ffn_gelu = true;
  c.sliding_window = read_window(file, prefix, default_window);
  if (c.sliding_window < 1) throw Error("metadata " + prefix + "attention.sliding_window is missing or < 1");
  if (const std::optional<float> s = positive_float(file, prefix + "attention.query_pre_attn_scalar")) {
    c.query_scale = 1.0f / std::sqrt(*s);
  }
  c.final_softcap = positive_float(file, prefix + "final_logit_softcapping").value_or(default_final_cap);
}

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

std::string architecture_names() {
  std::string out;
  for (const Architecture& a : kArchitectures) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

}  // namespace preface::model
