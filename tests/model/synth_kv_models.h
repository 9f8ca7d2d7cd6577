// Models for the q8_0 KV tests: q8_0 needs head_dim % 32 == 0, which among the shared models only
// synth-gpt2-d128-q8_0-tied has (head_dim 32), so synthetic models of other shapes are written on demand
// (model::write_synth_model, seeded: the same bytes every time) with stories260K's vocabulary.
#pragma once
#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/types.h"
#include "model/synth.h"
#include "support/shared_data.h"

namespace preface::test {

// Names: a shared model file ("synth-gpt2-d128-q8_0-tied.gguf") or one of the synthetic shapes below.
inline std::vector<std::string> q8_0_kv_model_names() {
  return {"synth-gpt2-d128-q8_0-tied.gguf", "llama-h64-gqa-q8_0", "qwen2-h32-f16", "llama-h128-bf16"};
}

// The path of the named model, writing a synthetic one to a fresh temp dir; "" when the shared data is missing.
inline std::string q8_0_kv_model_path(const std::string& name) {
  if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") {
    const auto path = shared_file("models/" + name);
    return path.empty() ? "" : path.string();
  }
  const auto vocab = shared_file("models/stories260K.gguf");
  if (vocab.empty()) return "";
  model::SynthSpec spec;
  spec.vocab_from = vocab.string();
  spec.n_layers = 2;
  spec.seed = 17;
  if (name == "llama-h64-gqa-q8_0") {  // head_dim 64, two query heads per KV head
    spec.dim = 128, spec.n_heads = 2, spec.n_kv_heads = 1, spec.type = gguf::TensorType::Q8_0;
  } else if (name == "qwen2-h32-f16") {  // head_dim 32, Q/K/V biases
    spec.arch = "qwen2", spec.dim = 128, spec.n_heads = 4, spec.n_kv_heads = 2, spec.type = gguf::TensorType::F16;
  } else if (name == "llama-row24-f16") {  // one KV head of 24 values: rows that are no whole Q8_0 block
    spec.dim = 96, spec.n_heads = 4, spec.n_kv_heads = 1, spec.type = gguf::TensorType::F16;
  } else if (name == "llama-h128-bf16") {  // head_dim 128: four Q8_0 blocks per head
    spec.dim = 256, spec.n_heads = 2, spec.n_kv_heads = 2, spec.type = gguf::TensorType::BF16;
  } else {
    throw std::invalid_argument("unknown q8_0 KV test model " + name);
  }
  const std::string path = (temp_dir("kv-model-" + name) / (name + ".gguf")).string();
  model::write_synth_model(spec, path);
  return path;
}

// A gtest parameter name for a model name.
inline std::string q8_0_kv_model_test_name(const std::string& name) {
  std::string out = name.size() > 5 && name.substr(name.size() - 5) == ".gguf" ? name.substr(0, name.size() - 5)
                                                                                 : name;
  for (char& ch : out) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return out;
}

}  // namespace preface::test
