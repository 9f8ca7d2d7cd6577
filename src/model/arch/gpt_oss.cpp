// gpt-oss (gpt-oss-20b, gpt-oss-120b): attention with Q/K/V/O biases and a learned sink logit per head
// (attn_sinks: it joins each head's softmax denominator and weighs no position), a sliding window
// (attention.sliding_window) on the even layers and full causal attention on the odd ones (llama.cpp's period 2;
// the files carry no pattern key), NEOX RoPE with the file's YaRN scaling (model/base/config.h), and in every block a
// mixture-of-experts FFN after post_attention_norm (gpt-oss's name for the pre-FFN norm): the router's logits plus
// its bias, the expert_used_count largest kept and softmaxed among themselves, experts with biases and the clamped
// SwiGLU (kernels::swiglu_oai, alpha 1.702, limit 7), no shared expert.
#include <memory>
#include <string>

#include "model/arch/registry.h"
#include "model/layers/attention_layer.h"
#include "model/layers/moe_ffn.h"
#include "util/error.h"

namespace preface::model {
namespace {

void read_gpt_oss(const gguf::File& file, const std::string& prefix, Config& c) {
  c.sliding_window = read_window(file, prefix, 0);
  if (c.sliding_window < 1) throw Error("metadata " + prefix + "attention.sliding_window is missing or < 1");
  c.layer_local.assign(static_cast<size_t>(c.n_layers), 0);
  for (size_t il = 0; il < c.layer_local.size(); il += 2) c.layer_local[il] = 1;
  Config::Moe defaults;
  defaults.gating = Config::ExpertGating::TopKThenSoftmax;
  read_experts(file, prefix, c, defaults);
}

Block gpt_oss_block(const gguf::File& file, const Config& c, int32_t il) {
  AttentionOptions a;
  a.bias = true;
  a.sinks = true;
  a.local = c.is_local(il);
  MoeOptions m;
  m.norm = "post_attention_norm";
  m.biases = true;
  m.activation = MoeActivation::SwiGLUOai;
  Block b;
  b.mixer = std::make_unique<AttentionLayer>(file, c, il, a);
  b.ffn = std::make_unique<MoeFfn>(file, c, il, m);
  return b;
}

}  // namespace

extern const Architecture kGptOss = {"gpt-oss", /*rope_neox=*/true, /*qkv_bias=*/true, /*qk_norm=*/false,
                                     /*fused_projections=*/false, read_gpt_oss, gpt_oss_block, standard_memory};

}  // namespace preface::model
