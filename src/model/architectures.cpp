#include "model/architectures.h"

namespace preface::model {
namespace {

constexpr Architecture kArchitectures[] = {
    // name  neox   bias   qk_norm fused
    {"llama", false, false, false, false},  // Llama 1-3.x, Mistral, TinyLlama, SmolLM (a llama file may carry biases)
    {"qwen2", true, true, false, false},
    {"qwen3", true, false, true, false},
    // phi3.attention.sliding_window is not applied, as llama.cpp has not since mid-2025 (docs in README).
    {"phi3", true, false, false, true},
};

}  // namespace

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
