// The shared block: attention, then a gated FFN (a mixture of experts when the Config has experts), with the options
// the Config's architecture flags give; and what it remembers.
#include <memory>

#include "model/arch/registry.h"
#include "model/layers/attention_layer.h"
#include "model/layers/gated_ffn.h"
#include "model/layers/moe_ffn.h"

namespace preface::model {

Block standard_block(const gguf::File& file, const Config& c, int32_t il) {
  AttentionOptions a;
  a.fused_qkv = c.fused_projections;
  a.bias = c.qkv_bias;
  a.qk_norm = c.qk_norm;
  a.post_norm = c.post_norms;
  a.local = c.is_local(il);
  Block b;
  b.mixer = std::make_unique<AttentionLayer>(file, c, il, a);
  if (c.moe.n_experts > 0) {
    b.ffn = std::make_unique<MoeFfn>(file, c, il, MoeOptions{});
    return b;
  }
  FfnOptions f;
  f.fused_gate_up = c.fused_projections;
  f.activation = c.ffn_gelu ? FfnActivation::GeGLU : FfnActivation::SwiGLU;
  f.post_norm = c.post_norms;
  b.ffn = std::make_unique<GatedFfn>(file, c, il, f);
  return b;
}

MemorySpec standard_memory(const Config& c, int32_t il) { return AttentionLayer::memory(c, il); }

}  // namespace preface::model
