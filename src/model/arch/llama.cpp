// llama: Llama 1-3.x, Mistral, TinyLlama, SmolLM. The shared block (a llama file may carry Q/K/V biases; they are
// applied when present); Mistral's llama.attention.sliding_window puts every layer in the window.
#include "model/arch/registry.h"

namespace preface::model {
namespace {

void read_llama(const gguf::File& file, const std::string& prefix, Config& c) {
  c.sliding_window = read_window(file, prefix, 0);
  if (c.sliding_window > 0) c.layer_local.assign(static_cast<size_t>(c.n_layers), 1);
}

}  // namespace

extern const Architecture kLlama = {"llama", /*rope_neox=*/false, /*qkv_bias=*/false, /*qk_norm=*/false,
                                    /*fused_projections=*/false, read_llama, standard_block,
                                    standard_memory};

}  // namespace preface::model
