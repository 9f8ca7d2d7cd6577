// Synthetic qwen35 files (Qwen3.5 dense hybrids) as llama.cpp reads them (src/models/qwen35.cpp there): every
// full_attention_interval-th block gated full attention (attn_q holds per head the query rows then the gate rows;
// Q/K norms; RoPE over the first rope_dims of each head), the others Gated DeltaNet (attn_qkv rows q, k, v; attn_gate;
// a causal conv of ssm_conv taps over the qkv channels; ssm_a = -exp(A_log) < 0, ssm_dt.bias, ssm_alpha, ssm_beta;
// ssm_norm over a V head; ssm_out); SwiGLU FFN after post_attention_norm; no multi-token-prediction block.
#include <cmath>
#include <string>
#include <vector>

#include "model/synth_tensors.h"
#include "util/error.h"

namespace preface::model {

void check_qwen35_spec(const SynthSpec& s) {
  auto fail = [](const std::string& what) { throw Error("synth: qwen35: " + what); };
  if (s.full_attention_interval < 1 || s.full_attention_interval > s.n_layers) {
    fail("the full-attention interval must be in [1, layers]");
  }
  if (s.ssm_k_heads < 1 || s.ssm_v_heads < 1 || s.ssm_v_heads % s.ssm_k_heads != 0 || s.ssm_v_heads > 1024) {
    fail("the V heads must be a positive multiple of the K heads (at most 1024)");
  }
  if (s.ssm_head_dim < 2 || s.ssm_head_dim > 1024 || s.ssm_conv < 1 || s.ssm_conv > 64) {
    fail("the DeltaNet head size must be in [2, 1024] and the conv kernel in [1, 64]");
  }
  const int32_t head_dim = synth_head_dim(s);
  const int32_t rope = s.rope_dims > 0 ? s.rope_dims : head_dim / 4;
  if (rope < 2 || rope > head_dim || rope % 2 != 0) fail("the rotated dims must be even and at most the head size");
}

void set_qwen35_metadata(gguf::Writer& w, const SynthSpec& s) {
  const int32_t head_dim = synth_head_dim(s);
  const int32_t rope = s.rope_dims > 0 ? s.rope_dims : head_dim / 4;
  const int32_t pairs = rope / 2;
  w.set_u32("qwen35.rope.dimension_count", static_cast<uint32_t>(rope));
  // Interleaved M-RoPE sections over the rotated pairs, as the converter writes them (plain RoPE for text).
  w.set_i32_array("qwen35.rope.dimension_sections", {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0});
  w.set_u32("qwen35.attention.key_length", static_cast<uint32_t>(head_dim));
  w.set_u32("qwen35.attention.value_length", static_cast<uint32_t>(head_dim));
  w.set_u32("qwen35.full_attention_interval", static_cast<uint32_t>(s.full_attention_interval));
  w.set_u32("qwen35.ssm.conv_kernel", static_cast<uint32_t>(s.ssm_conv));
  w.set_u32("qwen35.ssm.state_size", static_cast<uint32_t>(s.ssm_head_dim));
  w.set_u32("qwen35.ssm.group_count", static_cast<uint32_t>(s.ssm_k_heads));
  w.set_u32("qwen35.ssm.time_step_rank", static_cast<uint32_t>(s.ssm_v_heads));
  w.set_u32("qwen35.ssm.inner_size", static_cast<uint32_t>(s.ssm_v_heads * s.ssm_head_dim));
}

void write_qwen35_layers(const SynthTensors& t, int32_t ffn) {
  const SynthSpec& s = t.spec;
  const auto dim = static_cast<uint64_t>(s.dim);
  const auto head_dim = static_cast<uint64_t>(synth_head_dim(s));
  const auto n_heads = static_cast<uint64_t>(s.n_heads), n_kv = static_cast<uint64_t>(s.n_kv_heads);
  const auto key_dim = static_cast<uint64_t>(s.ssm_k_heads * s.ssm_head_dim);
  const auto value_dim = static_cast<uint64_t>(s.ssm_v_heads * s.ssm_head_dim);
  const auto n_v = static_cast<uint64_t>(s.ssm_v_heads);
  const uint64_t conv_dim = 2 * key_dim + value_dim;
  for (int32_t layer = 0; layer < s.n_layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    t.vec(p + "attn_norm.weight", dim, 1.0f, 0.05f);
    t.vec(p + "post_attention_norm.weight", dim, 1.0f, 0.05f);
    if ((layer + 1) % s.full_attention_interval == 0) {
      t.matrix(p + "attn_q.weight", dim, 2 * n_heads * head_dim);
      t.matrix(p + "attn_k.weight", dim, n_kv * head_dim);
      t.matrix(p + "attn_v.weight", dim, n_kv * head_dim);
      t.vec(p + "attn_q_norm.weight", head_dim, 1.0f, 0.05f);
      t.vec(p + "attn_k_norm.weight", head_dim, 1.0f, 0.05f);
      t.matrix(p + "attn_output.weight", n_heads * head_dim, dim);
    } else {
      t.matrix(p + "attn_qkv.weight", dim, conv_dim);
      t.matrix(p + "attn_gate.weight", dim, value_dim);
      // Conv taps ~ N(0, 1/kernel); decay A = -exp(A_log) with A_log ~ N(0, 0.5); dt bias ~ N(0, 0.5).
      const auto kernel = static_cast<uint64_t>(s.ssm_conv);
      t.w.add_tensor_f32(p + "ssm_conv1d.weight", gguf::TensorType::F32, {kernel, conv_dim},
                         normals(tensor_seed(s.seed, p + "ssm_conv1d.weight"), kernel * conv_dim, 0.0f,
                                 1.0f / std::sqrt(static_cast<float>(kernel))));
      t.vec(p + "ssm_dt.bias", n_v, 0.0f, 0.5f);
      std::vector<float> a = normals(tensor_seed(s.seed, p + "ssm_a"), n_v, 0.0f, 0.5f);
      for (float& x : a) x = -std::exp(x);
      t.w.add_tensor_f32(p + "ssm_a", gguf::TensorType::F32, {n_v}, a);
      t.matrix(p + "ssm_beta.weight", dim, n_v);
      t.matrix(p + "ssm_alpha.weight", dim, n_v);
      t.vec(p + "ssm_norm.weight", static_cast<uint64_t>(s.ssm_head_dim), 1.0f, 0.05f);
      t.matrix(p + "ssm_out.weight", value_dim, dim);
    }
    t.matrix(p + "ffn_gate.weight", dim, static_cast<uint64_t>(ffn));
    t.matrix(p + "ffn_up.weight", dim, static_cast<uint64_t>(ffn));
    t.matrix(p + "ffn_down.weight", static_cast<uint64_t>(ffn), dim);
  }
}

}  // namespace preface::model
