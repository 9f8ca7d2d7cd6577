// gemma3 (Gemma 3 text models): gemma2's layer (model/gemma2.cpp) without attention soft-capping, with per-head
// RMSNorm of Q and K before RoPE (attn_q_norm, attn_k_norm, as qwen3), and with periodic local layers: with period
// n (attention.sliding_window_pattern, default 6) layer il is global iff il % n == n - 1 (0-4 local, 5 global, ...).
// Local layers use RoPE base rope.freq_base_swa (default 1e4) without scaling; global layers rope.freq_base with
// the file's rope scaling (Gemma 3 4B-27B: linear, factor 8). Logits are soft-capped only when
// final_logit_softcapping is present. Norm weights are applied as stored (the converter added the +1 offset).
#include <string>

#include "model/architectures.h"
#include "util/error.h"

namespace preface::model {

void read_gemma3(const gguf::File& file, const std::string& prefix, Config& c) {
  read_gemma_common(file, prefix, c, /*default_window=*/0, /*default_final_cap=*/0.0f);
  const std::string pattern_key = prefix + "attention.sliding_window_pattern";
  const int64_t period = file.try_int(pattern_key).value_or(6);
  if (period < 1 || period > c.n_layers + 1) {
    throw Error("metadata " + pattern_key + " = " + std::to_string(period) + " is out of range [1, block_count + 1]");
  }
  c.layer_local.assign(static_cast<size_t>(c.n_layers), 0);
  for (size_t il = 0; il < c.layer_local.size(); ++il) {
    c.layer_local[il] = static_cast<int64_t>(il) % period != period - 1 ? 1 : 0;
  }
  c.rope_base_local = positive_float(file, prefix + "rope.freq_base_swa").value_or(10000.0f);
  c.rope_freq_scale_local = 1.0f;
}

}  // namespace preface::model
