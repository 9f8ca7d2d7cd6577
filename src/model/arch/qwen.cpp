// qwen2 (Qwen 2 / 2.5): the shared block with NEOX RoPE and Q/K/V biases. qwen3 (Qwen 3 dense): NEOX RoPE, no
// biases, Q and K RMS-normalized per head before RoPE. qwen3moe (Qwen3-30B-A3B, 235B-A22B, Coder): qwen3's
// attention with a mixture-of-experts FFN (model/layers/moe_ffn.h): softmax over every router logit, the
// expert_used_count best kept and renormalized to sum 1, no shared expert.
#include "model/arch/registry.h"

namespace preface::model {
namespace {

void read_qwen3moe(const gguf::File& file, const std::string& prefix, Config& c) {
  Config::Moe defaults;
  defaults.gating = Config::ExpertGating::SoftmaxThenTopK;
  defaults.norm_weights = true;
  read_experts(file, prefix, c, defaults);
}

}  // namespace

extern const Architecture kQwen2 = {"qwen2", /*rope_neox=*/true, /*qkv_bias=*/true, /*qk_norm=*/false,
                                    /*fused_projections=*/false, nullptr, standard_block,
                                    standard_memory};
extern const Architecture kQwen3 = {"qwen3", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true,
                                    /*fused_projections=*/false, nullptr, standard_block,
                                    standard_memory};
extern const Architecture kQwen3Moe = {"qwen3moe", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true,
                                       /*fused_projections=*/false, read_qwen3moe, standard_block,
                                       standard_memory};

}  // namespace preface::model
