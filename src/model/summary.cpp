// model_summary(): the start-up line that says what was loaded.
#include <cstdio>
#include <map>
#include <string>

#include "model/model.h"

namespace preface::model {

std::string model_summary(const Model& m) {
  const Config& c = m.config();
  std::map<std::string, int> histogram;  // type name -> tensors; ordered so the line is stable
  uint64_t weight_bytes = 0;
  for (const gguf::TensorInfo& t : m.file().tensors()) {
    ++histogram[std::string(gguf::tensor_type_name(t.type))];
    weight_bytes += t.size_bytes;
  }
  std::string types;
  for (const auto& [name, count] : histogram) types += (types.empty() ? "" : ", ") + name + " " + std::to_string(count);
  // Sliding-window layers (gemma2, gemma3, Mistral): "; sliding window 16 on 13 of 26 layers".
  std::string window;
  if (c.any_local()) {
    int n_local = 0;
    for (int32_t il = 0; il < c.n_layers; ++il) n_local += c.is_local(il) ? 1 : 0;
    window = "; sliding window " + std::to_string(c.sliding_window) + " on " + std::to_string(n_local) + " of " +
             std::to_string(c.n_layers) + " layers";
  }
  // Mixture-of-experts FFNs: "; 16 experts of 32, 4 per token, shared expert 128".
  if (c.moe.n_experts > 0) {
    window += "; " + std::to_string(c.moe.n_experts) + " experts of " + std::to_string(c.moe.expert_ffn) + ", " +
              std::to_string(c.moe.n_used) + " per token";
    if (c.moe.shared_ffn > 0) window += ", shared expert " + std::to_string(c.moe.shared_ffn);
  }
  char line[640];
  std::snprintf(line, sizeof line,
                "%s: %d layers, dim %d, %d heads / %d KV heads of %d, ffn %d, vocab %d, context %d%s; "
                "%zu tensors (%s), %.1f MiB of weights",
                c.arch_name.c_str(), c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim, c.n_vocab,
                c.ctx_len, window.c_str(), m.file().tensors().size(), types.c_str(),
                static_cast<double>(weight_bytes) / 1048576.0);
  return line;
}

}  // namespace preface::model
