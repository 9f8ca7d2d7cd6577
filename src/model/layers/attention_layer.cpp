#include "model/layers/attention_layer.h"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/hadamard.h"
#include "kernels/ops.h"
#include "model/layers/paged_attention.h"
#include "model/layers/weights.h"
#include "util/error.h"

namespace preface::model {
namespace {

void add_bias(float* row, const std::vector<float>& bias) {
  for (size_t i = 0; i < bias.size(); ++i) row[i] += bias[i];
}

}  // namespace

MemorySpec AttentionLayer::memory(const Config& c, int32_t il) {
  if (c.kv_source(il) != il) return MemorySpec::none(c.kv_source(il));
  return MemorySpec::paged(c.kv_heads_of(il), c.head_dim_of(il), c.head_dim_of(il), c.layer_window(il));
}

AttentionLayer::AttentionLayer(const gguf::File& file, const Config& c, int32_t il, const AttentionOptions& o)
    : local_(o.local),
      output_gate_(o.output_gate),
      kv_source_(c.kv_source(il)),
      head_dim_(c.head_dim_of(il)),
      n_kv_heads_(c.kv_heads_of(il)),
      n_rot_(c.n_rot_of(il)) {
  if (o.output_gate && !c.attn_output_gate) throw Error("attention output gate without Config::attn_output_gate");
  const int64_t dim = c.dim, q_dim = int64_t{c.n_heads} * head_dim_, kv = int64_t{n_kv_heads_} * head_dim_;
  const bool stores = kv_source_ == il;
  const std::string p = "blk." + std::to_string(il) + ".";
  norm_ = load_vector(file, p + "attn_norm.weight", dim);
  if (o.fused_qkv) {
    const kernels::Matrix qkv = load_matrix(file, p + "attn_qkv.weight", q_dim + 2 * kv, dim);
    wq_ = row_view(qkv, 0, q_dim);
    wk_ = row_view(qkv, q_dim, kv);
    wv_ = row_view(qkv, q_dim + kv, kv);
  } else {
    wq_ = load_matrix(file, p + "attn_q.weight", o.output_gate ? 2 * q_dim : q_dim, dim);
    if (stores) {
      wk_ = load_matrix(file, p + "attn_k.weight", kv, dim);
      if (!o.v_from_k || file.find_tensor(p + "attn_v.weight") != nullptr) {
        wv_ = load_matrix(file, p + "attn_v.weight", kv, dim);
      }
    }
  }
  wo_ = load_matrix(file, p + "attn_output.weight", dim, q_dim);
  if (o.bias || file.find_tensor(p + "attn_q.bias") != nullptr) {
    bq_ = load_vector(file, p + "attn_q.bias", q_dim);
    bk_ = load_vector(file, p + "attn_k.bias", kv);
    bv_ = load_vector(file, p + "attn_v.bias", kv);
  }
  if (file.find_tensor(p + "attn_output.bias") != nullptr) bo_ = load_vector(file, p + "attn_output.bias", dim);
  if (o.sinks) sinks_ = load_vector(file, p + "attn_sinks.weight", c.n_heads);
  if (o.qk_norm) {
    q_norm_ = load_vector(file, p + "attn_q_norm.weight", head_dim_);
    if (stores) k_norm_ = load_vector(file, p + "attn_k_norm.weight", head_dim_);
  }
  if (c.v_norm) v_norm_.assign(static_cast<size_t>(head_dim_), 1.0f);
  if (o.post_norm) post_norm_ = load_vector(file, p + "post_attention_norm.weight", dim);
}

void AttentionLayer::collect_matrices(std::vector<kernels::Matrix*>& out) {
  for (kernels::Matrix* w : {&wq_, &wk_, &wv_, &wo_}) {
    if (w->data != nullptr) out.push_back(w);
  }
}

void AttentionLayer::forward(const Step& s, int32_t il) const {
  const Config& c = s.config;
  Activations& a = s.act;
  const int64_t nt = static_cast<int64_t>(s.batch.size());
  const size_t head_dim = static_cast<size_t>(head_dim_), n_kv_heads = static_cast<size_t>(n_kv_heads_);
  const size_t kv_dim = n_kv_heads * head_dim, q_dim = static_cast<size_t>(c.n_heads) * head_dim;
  const size_t n_rot = static_cast<size_t>(n_rot_);
  const bool stores = kv_source_ == il;
  const std::vector<float>& rope = local_ && !s.rope.local.empty() ? s.rope.local : s.rope.global;
  const size_t rope_stride = local_ && !s.rope.local.empty() ? s.rope.n_rot_local : s.rope.n_rot;

  norm_input(s, norm_);
  float* q_out = output_gate_ ? a.q_gate.data() : a.q.data();
  if (!stores) {
    kernels::matmul(s.pool, wq_, a.xb.data(), nt, q_out, a.quant_scratch);
  } else if (wv_.data == nullptr) {
    kernels::matmul_multi(s.pool, {&wq_, &wk_}, a.xb.data(), nt, {q_out, a.k.data()}, a.quant_scratch);
  } else {
    kernels::matmul_multi(s.pool, {&wq_, &wk_, &wv_}, a.xb.data(), nt, {q_out, a.k.data(), a.v.data()},
                          a.quant_scratch);
  }
  for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* q = a.q.data() + t * q_dim;  // [n_heads][head_dim]
      if (output_gate_) {  // [n_heads][query, gate][head_dim] -> q and attn_gate
        const float* qg = a.q_gate.data() + 2 * t * q_dim;
        for (size_t h = 0; h < static_cast<size_t>(c.n_heads); ++h) {
          std::memcpy(q + h * head_dim, qg + 2 * h * head_dim, head_dim * sizeof(float));
          std::memcpy(a.attn_gate.data() + t * q_dim + h * head_dim, qg + (2 * h + 1) * head_dim,
                      head_dim * sizeof(float));
        }
      }
      add_bias(q, bq_);
      for (size_t h = 0; h < static_cast<size_t>(c.n_heads) && !q_norm_.empty(); ++h) {
        float* qh = q + h * head_dim;  // each head normalized on its own, in place, before RoPE
        kernels::rmsnorm(qh, q_norm_.data(), qh, head_dim, c.rms_eps);
      }
      if (n_rot > 0) kernels::rope_apply(q, c.n_heads, head_dim, n_rot, rope.data() + t * rope_stride, c.rope_neox);
      // Rotated K rows (kernels/hadamard.h) meet queries rotated by the same blocks: the same dot products.
      if (s.kv.format.rotate_k) kernels::hadamard_rotate(q, q_dim, kernels::hadamard_k_block(head_dim));
      if (!stores) continue;
      float* k = a.k.data() + t * kv_dim;  // [n_kv_heads][head_dim]
      float* v = a.v.data() + t * kv_dim;
      if (wv_.data == nullptr) std::memcpy(v, k, kv_dim * sizeof(float));  // V = K's projection
      add_bias(k, bk_);
      add_bias(v, bv_);
      for (size_t h = 0; h < n_kv_heads; ++h) {
        if (!k_norm_.empty()) kernels::rmsnorm(k + h * head_dim, k_norm_.data(), k + h * head_dim, head_dim, c.rms_eps);
        if (!v_norm_.empty()) kernels::rmsnorm(v + h * head_dim, v_norm_.data(), v + h * head_dim, head_dim, c.rms_eps);
      }
      if (n_rot > 0) kernels::rope_apply(k, n_kv_heads, head_dim, n_rot, rope.data() + t * rope_stride, c.rope_neox);
      if (s.kv.format.rotate_k) kernels::hadamard_rotate(k, kv_dim, kernels::hadamard_k_block(head_dim));
      if (s.kv.format.rotate_v) kernels::hadamard_rotate(v, kv_dim, kernels::kHadamardVBlock);
    }
    if (stores) detail::store_kv(s.batch, s.kv, il, a.k.data(), a.v.data(), t0, t1);
  });
  // Per-channel keys: the groups the batch completes are sealed before attention reads them, and the rows of the
  // group each sequence ends inside kept after (model/layers/channel_keys.h).
  const bool channel_keys = stores && kernels::kv_type_is_per_channel(s.kv.format.k);
  std::vector<detail::SeqSpan> spans;
  if (channel_keys) {
    spans = detail::channel_key_spans(s.batch);
    detail::seal_keys(s.pool, s.batch, spans, s.kv, il, a.k.data());
  }
  detail::attention(s.pool, c, s.batch, s.kv, il, a.q.data(), sinks_.empty() ? nullptr : sinks_.data(),
                    a.attn_out.data(), a.attn_scratch, channel_keys ? a.k.data() : nullptr,
                    channel_keys ? &spans : nullptr);
  if (channel_keys) detail::keep_open_keys(s.batch, spans, s.kv, il, a.k.data());
  if (s.kv.format.rotate_v) {  // a weighted sum of rotated V rows: rotated back by the same (self-inverse) blocks
    for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
      kernels::hadamard_rotate(a.attn_out.data() + t0 * q_dim, (t1 - t0) * q_dim, kernels::kHadamardVBlock);
    });
  }
  if (output_gate_) {
    for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
      for (size_t i = t0 * q_dim; i < t1 * q_dim; ++i) a.attn_out[i] *= 1.0f / (1.0f + std::exp(-a.attn_gate[i]));
    });
  }
  kernels::matmul(s.pool, wo_, a.attn_out.data(), nt, a.xb.data(), a.quant_scratch);
  if (!bo_.empty()) {
    const size_t dim = static_cast<size_t>(c.dim);
    for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) add_bias(a.xb.data() + t * dim, bo_);
    });
  }
  add_output(s, a.xb.data(), post_norm_);
}

}  // namespace preface::model
