#include "model/arch/registry.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "util/error.h"

namespace preface::model {

// The rows, one per file of model/arch/.
extern const Architecture kLlama;                 // llama.cpp
extern const Architecture kQwen2, kQwen3, kQwen3Moe;  // qwen.cpp
extern const Architecture kQwen35, kQwen35Moe;       // qwen35.cpp
extern const Architecture kPhi3;                  // phi3.cpp
extern const Architecture kGemma2, kGemma3;       // gemma.cpp
extern const Architecture kGemma4;                 // gemma4.cpp
extern const Architecture kGptOss;                 // gpt_oss.cpp

namespace {

const Architecture* const kArchitectures[] = {&kLlama,  &kQwen2,  &kQwen3,  &kQwen3Moe, &kQwen35, &kQwen35Moe,
                                             &kPhi3,   &kGemma2, &kGemma3, &kGemma4,   &kGptOss};

}  // namespace

std::optional<float> positive_float(const gguf::File& file, const std::string& key) {
  const std::optional<double> v = file.try_float(key);
  if (!v) return std::nullopt;
  if (!(*v > 0.0) || !std::isfinite(*v)) throw Error("metadata " + key + " must be a finite value > 0");
  return static_cast<float>(*v);
}

int32_t read_int_in(const gguf::File& file, const std::string& key, int64_t lo, int64_t hi,
                    std::optional<int64_t> fallback) {
  const std::optional<int64_t> v = file.try_int(key);
  if (!v) {
    if (!fallback) throw Error("metadata " + key + " is missing");
    return static_cast<int32_t>(*fallback);
  }
  if (*v < lo || *v > hi) throw Error("metadata " + key + " = " + std::to_string(*v) + " is out of range");
  return static_cast<int32_t>(*v);
}

int32_t read_window(const gguf::File& file, const std::string& prefix, int64_t fallback) {
  const std::string key = prefix + "attention.sliding_window";
  const int64_t w = file.try_int(key).value_or(fallback);
  if (w < 0 || w > (int64_t{1} << 30)) throw Error("metadata " + key + " = " + std::to_string(w) + " is out of range");
  return static_cast<int32_t>(w);
}

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture* a : kArchitectures) {
    if (name == a->name) return a;
  }
  return nullptr;
}

MemoryLayout memory_layout(const Config& c) {
  const Architecture* arch = find_architecture(c.arch_name);
  if (arch == nullptr) throw Error("unsupported architecture '" + c.arch_name + "'");
  std::vector<MemorySpec> layers;
  layers.reserve(static_cast<size_t>(std::max(c.n_layers, 0)));
  for (int32_t il = 0; il < c.n_layers; ++il) layers.push_back(arch->memory(c, il));
  return MemoryLayout(std::move(layers));
}

std::string architecture_names() {
  std::string out;
  for (const Architecture* a : kArchitectures) out += (out.empty() ? "" : ", ") + std::string(a->name);
  return out;
}

}  // namespace preface::model
