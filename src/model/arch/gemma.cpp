// gemma2 (Gemma 2 2B/9B/27B): the shared block with embeddings scaled by sqrt(dim), RMSNorm before and after
// attention and FFN, GeGLU, attention scores soft-capped at attn_logit_softcapping (cap * tanh(s / cap), before the
// mask), logits soft-capped at final_logit_softcapping, and sliding-window attention on the even layers (0, 2, 4,
// ...; the odd ones are global), one RoPE (NEOX) for all. Norm weights are applied as stored: llama.cpp's converter
// has already added Gemma's +1 offset to them. The defaults where a key is absent are llama.cpp's for Gemma 2
// (window 4096, caps 50 and 30).
//
// gemma3 (Gemma 3 text models): gemma2's block (above) without attention soft-capping, with per-head
// RMSNorm of Q and K before RoPE (attn_q_norm, attn_k_norm, as qwen3), and with periodic local layers: with period
// n (attention.sliding_window_pattern, default 6) layer il is global iff il % n == n - 1 (0-4 local, 5 global, ...).
// Local layers use RoPE base rope.freq_base_swa (default 1e4) without scaling; global layers rope.freq_base with
// the file's rope scaling (Gemma 3 4B-27B: linear, factor 8). Logits are soft-capped only when
// final_logit_softcapping is present. Norm weights are applied as stored (the converter added the +1 offset).
#include <cmath>
#include <optional>
#include <string>

#include "model/arch/registry.h"
#include "util/error.h"

namespace preface::model {
namespace {

// Gemma's shared hyper-parameters: embeddings scaled by sqrt(dim), post-norms, GeGLU, the sliding window
// (attention.sliding_window, else default_window), the query scale (attention.query_pre_attn_scalar when present)
// and the final soft-cap (final_logit_softcapping when present, else default_final_cap; 0: none).
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

void read_gemma2(const gguf::File& file, const std::string& prefix, Config& c) {
  read_gemma_common(file, prefix, c, /*default_window=*/4096, /*default_final_cap=*/30.0f);
  c.attn_softcap = positive_float(file, prefix + "attn_logit_softcapping").value_or(50.0f);
  c.layer_local.assign(static_cast<size_t>(c.n_layers), 0);
  for (size_t il = 0; il < c.layer_local.size(); il += 2) c.layer_local[il] = 1;
}

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

}  // namespace

extern const Architecture kGemma2 = {"gemma2", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/false,
                                     /*fused_projections=*/false, read_gemma2, standard_block,
                                    standard_memory};
extern const Architecture kGemma3 = {"gemma3", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true,
                                     /*fused_projections=*/false, read_gemma3, standard_block,
                                    standard_memory};

}  // namespace preface::model
