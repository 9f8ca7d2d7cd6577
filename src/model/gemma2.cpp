// gemma2 (Gemma 2 2B/9B/27B): the shared layer with embeddings scaled by sqrt(dim), RMSNorm before and after
// attention and FFN, GeGLU, attention scores soft-capped at attn_logit_softcapping (cap * tanh(s / cap), before the
// mask), logits soft-capped at final_logit_softcapping, and sliding-window attention on the even layers (0, 2, 4,
// ...; the odd ones are global), one RoPE (NEOX) for all. Norm weights are applied as stored: llama.cpp's converter
// has already added Gemma's +1 offset to them. The defaults where a key is absent are llama.cpp's for Gemma 2
// (window 4096, caps 50 and 30).
#include <optional>
#include <string>

#include "model/architectures.h"

namespace preface::model {

void read_gemma2(const gguf::File& file, const std::string& prefix, Config& c) {
  read_gemma_common(file, prefix, c, /*default_window=*/4096, /*default_final_cap=*/30.0f);
  c.attn_softcap = positive_float(file, prefix + "attn_logit_softcapping").value_or(50.0f);
  c.layer_local.assign(static_cast<size_t>(c.n_layers), 0);
  for (size_t il = 0; il < c.layer_local.size(); il += 2) c.layer_local[il] = 1;
}

}  // namespace preface::model
