// qwen35 (Qwen3.5 / 3.6 dense hybrids): Gated DeltaNet layers (model/layers/delta_net.h) and, every few layers,
// gated full attention: per-head query and gate rows in attn_q, Q/K RMSNorm, RoPE (NEOX) over the first
// rope.dimension_count dims of each head (rope.dimension_sections' M-RoPE is plain RoPE for text positions), the
// output times sigmoid(gate). Every block's FFN is SwiGLU after post_attention_norm (qwen35's name for the pre-FFN
// norm). Which layers are recurrent: attention.recurrent_layers, else every layer but each full_attention_interval-th
// (default 4). The last nextn_predict_layers blocks are the multi-token-prediction head, which llama.cpp loads and
// never runs; preface neither reads nor runs them (their tensors are left in the file).
//
// qwen35moe (Qwen3.5 / 3.6 MoE hybrids): the same trunk with a mixture-of-experts FFN in every block
// (model/layers/moe_ffn.h): softmax over every router logit, the expert_used_count best kept and renormalized to
// sum 1, plus a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x); feed_forward_length is unused.
#include <memory>
#include <string>

#include "model/arch/registry.h"
#include "model/layers/attention_layer.h"
#include "model/layers/delta_net.h"
#include "model/layers/gated_ffn.h"
#include "model/layers/moe_ffn.h"
#include "util/error.h"

namespace preface::model {
namespace {

void read_qwen35(const gguf::File& file, const std::string& prefix, Config& c) {
  const int64_t nextn = file.try_int(prefix + "nextn_predict_layers").value_or(0);
  if (nextn < 0 || nextn >= c.n_layers) {
    throw Error("metadata " + prefix + "nextn_predict_layers = " + std::to_string(nextn) + " is out of range");
  }
  c.n_layers -= static_cast<int32_t>(nextn);
  c.ssm.conv_kernel = read_int_in(file, prefix + "ssm.conv_kernel", 1, 64);
  c.ssm.head_dim = read_int_in(file, prefix + "ssm.state_size", 1, 1024);
  c.ssm.n_k_heads = read_int_in(file, prefix + "ssm.group_count", 1, 1024);
  c.ssm.n_v_heads = read_int_in(file, prefix + "ssm.time_step_rank", 1, 1024);
  if (c.ssm.n_v_heads % c.ssm.n_k_heads != 0) {
    throw Error("metadata " + prefix + "ssm.time_step_rank is not a multiple of ssm.group_count");
  }
  if (read_int_in(file, prefix + "ssm.inner_size", 1, 1 << 20) != c.ssm.v_dim()) {
    throw Error("metadata " + prefix + "ssm.inner_size is not ssm.time_step_rank x ssm.state_size");
  }
  c.layer_recurrent.assign(static_cast<size_t>(c.n_layers), 0);
  if (const gguf::Value* flags = file.find(prefix + "attention.recurrent_layers")) {
    if (!flags->is_array() || flags->nums.size() < c.layer_recurrent.size()) {
      throw Error("metadata " + prefix + "attention.recurrent_layers is not an array of a flag per block");
    }
    for (size_t il = 0; il < c.layer_recurrent.size(); ++il) c.layer_recurrent[il] = flags->nums[il] != 0 ? 1 : 0;
  } else {
    const int32_t interval = static_cast<int32_t>(file.try_int(prefix + "full_attention_interval").value_or(4));
    if (interval < 1) throw Error("metadata " + prefix + "full_attention_interval must be >= 1");
    for (size_t il = 0; il < c.layer_recurrent.size(); ++il) {
      c.layer_recurrent[il] = (static_cast<int32_t>(il) + 1) % interval != 0 ? 1 : 0;
    }
  }
  c.attn_output_gate = true;
}

Block qwen35_block(const gguf::File& file, const Config& c, int32_t il) {
  Block b;
  if (c.is_recurrent(il)) {
    b.mixer = std::make_unique<DeltaNetLayer>(file, c, il);
  } else {
    AttentionOptions a;
    a.qk_norm = true;
    a.output_gate = true;
    b.mixer = std::make_unique<AttentionLayer>(file, c, il, a);
  }
  if (c.moe.n_experts > 0) {
    MoeOptions m;
    m.norm = "post_attention_norm";
    b.ffn = std::make_unique<MoeFfn>(file, c, il, m);
  } else {
    FfnOptions f;
    f.norm = "post_attention_norm";
    b.ffn = std::make_unique<GatedFfn>(file, c, il, f);
  }
  return b;
}

void read_qwen35moe(const gguf::File& file, const std::string& prefix, Config& c) {
  read_qwen35(file, prefix, c);
  Config::Moe defaults;
  defaults.gating = Config::ExpertGating::SoftmaxThenTopK;
  defaults.norm_weights = true;
  read_experts(file, prefix, c, defaults);
  if (c.moe.shared_ffn < 1) throw Error("metadata " + prefix + "expert_shared_feed_forward_length is missing");
}

MemorySpec qwen35_memory(const Config& c, int32_t il) {
  return c.is_recurrent(il) ? DeltaNetLayer::memory(c) : AttentionLayer::memory(c, il);
}

}  // namespace

extern const Architecture kQwen35 = {"qwen35", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true,
                                     /*fused_projections=*/false, read_qwen35, qwen35_block, qwen35_memory};
extern const Architecture kQwen35Moe = {"qwen35moe", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true,
                                        /*fused_projections=*/false, read_qwen35moe, qwen35_block, qwen35_memory};

}  // namespace preface::model
