#include "model/layers/step.h"

#include <algorithm>

#include "gguf/reader.h"
#include "kernels/ops.h"

namespace preface::model {

void Activations::allocate(const Config& c, int32_t max_batch_tokens) {
  const size_t n = static_cast<size_t>(max_batch_tokens);
  const size_t dim = static_cast<size_t>(c.dim), q_dim = static_cast<size_t>(c.q_dim());
  const size_t kv = static_cast<size_t>(c.kv_row_values()), ffn = static_cast<size_t>(c.ffn_dim);
  x.assign(n * dim, 0.0f);
  xb.assign(n * dim, 0.0f);
  q.assign(n * q_dim, 0.0f);
  k.assign(n * kv, 0.0f);
  v.assign(n * kv, 0.0f);
  attn_out.assign(n * q_dim, 0.0f);
  gate.assign(n * ffn, 0.0f);
  up.assign(n * ffn, 0.0f);
  ffn_out.assign(n * dim, 0.0f);
  q_gate.assign(c.attn_output_gate ? 2 * n * q_dim : 0, 0.0f);
  attn_gate.assign(c.attn_output_gate ? n * q_dim : 0, 0.0f);
  const bool recurrent = !c.layer_recurrent.empty();
  ssm_qkv.assign(recurrent ? n * static_cast<size_t>(c.ssm.conv_dim()) : 0, 0.0f);
  ssm_z.assign(recurrent ? n * static_cast<size_t>(c.ssm.v_dim()) : 0, 0.0f);
  ssm_beta.assign(recurrent ? n * static_cast<size_t>(c.ssm.n_v_heads) : 0, 0.0f);
  ssm_alpha.assign(recurrent ? n * static_cast<size_t>(c.ssm.n_v_heads) : 0, 0.0f);
  ssm_out.assign(recurrent ? n * static_cast<size_t>(c.ssm.v_dim()) : 0, 0.0f);
  const size_t n_experts = static_cast<size_t>(c.moe.n_experts), n_used = static_cast<size_t>(c.moe.n_used);
  const size_t moe_ffn = n_experts > 0 ? static_cast<size_t>(c.moe.max_ffn()) : 0;
  moe_logits.assign(n * n_experts, 0.0f);
  moe_expert.assign(n * n_used, 0);
  moe_weight.assign(n * n_used, 0.0f);
  moe_x.assign(n_experts > 0 ? n * dim : 0, 0.0f);
  moe_gate.assign(n * moe_ffn, 0.0f);
  moe_up.assign(n * moe_ffn, 0.0f);
  moe_out.assign(n * n_used * dim, 0.0f);
  const size_t ple_width = static_cast<size_t>(c.ple_dim);
  ple.assign(n * ple_width * static_cast<size_t>(c.n_layers), 0.0f);
  ple_gate.assign(n * ple_width, 0.0f);
  // Q8_0 copies of a batch of activation rows for quantized matmuls (matmul grows it if ever needed).
  const size_t widest = std::max({dim, q_dim, ffn, moe_ffn, ple_width});
  quant_scratch.reserve(n * gguf::row_bytes(gguf::TensorType::Q8_0, ((widest + 31) / 32) * 32));
}

void norm_input(const Step& s, const std::vector<float>& weight) {
  const size_t dim = static_cast<size_t>(s.config.dim);
  for_tokens(s.pool, static_cast<int64_t>(s.batch.size()), [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      kernels::rmsnorm(s.act.x.data() + t * dim, weight.data(), s.act.xb.data() + t * dim, dim, s.config.rms_eps);
    }
  });
}

void add_output(const Step& s, float* out, const std::vector<float>& post_norm) {
  const size_t dim = static_cast<size_t>(s.config.dim);
  for_tokens(s.pool, static_cast<int64_t>(s.batch.size()), [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* o = out + t * dim;
      if (!post_norm.empty()) kernels::rmsnorm(o, post_norm.data(), o, dim, s.config.rms_eps);
      float* x = s.act.x.data() + t * dim;
      for (size_t i = 0; i < dim; ++i) x[i] += o[i];
    }
  });
}

}  // namespace preface::model
