#include "model/layers/moe_ffn.h"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/ops.h"
#include "model/layers/weights.h"

namespace preface::model {

MoeFfn::MoeFfn(const gguf::File& file, const Config& c, int32_t il, const MoeOptions& o) : activation_(o.activation) {
  const Config::Moe& moe = c.moe;
  const int64_t dim = c.dim, n_experts = moe.n_experts, ffn = moe.expert_ffn;
  const std::string p = "blk." + std::to_string(il) + ".";
  norm_ = load_vector(file, p + o.norm + ".weight", dim);
  router_ = load_matrix(file, p + "ffn_gate_inp.weight", n_experts, dim);
  gate_ = load_experts(file, p + "ffn_gate_exps.weight", n_experts, ffn, dim);
  up_ = load_experts(file, p + "ffn_up_exps.weight", n_experts, ffn, dim);
  down_ = load_experts(file, p + "ffn_down_exps.weight", n_experts, dim, ffn);
  if (o.biases) {
    const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    router_bias_ = load_vector(file, p + "ffn_gate_inp.bias", n_experts);
    gate_bias_ = load_values(file, p + "ffn_gate_exps.bias", {u(ffn), u(n_experts)});
    up_bias_ = load_values(file, p + "ffn_up_exps.bias", {u(ffn), u(n_experts)});
    down_bias_ = load_values(file, p + "ffn_down_exps.bias", {u(dim), u(n_experts)});
  }
  if (moe.shared_ffn > 0) {
    shared_gate_ = load_matrix(file, p + "ffn_gate_shexp.weight", moe.shared_ffn, dim);
    shared_up_ = load_matrix(file, p + "ffn_up_shexp.weight", moe.shared_ffn, dim);
    shared_down_ = load_matrix(file, p + "ffn_down_shexp.weight", dim, moe.shared_ffn);
    if (file.find_tensor(p + "ffn_gate_inp_shexp.weight") != nullptr) {
      shared_scale_ = load_vector(file, p + "ffn_gate_inp_shexp.weight", dim);
    }
  }
}

void MoeFfn::collect_matrices(std::vector<kernels::Matrix*>& out) {
  out.push_back(&router_);
  for (std::vector<kernels::Matrix>* experts : {&gate_, &up_, &down_}) {
    for (kernels::Matrix& w : *experts) out.push_back(&w);
  }
  if (shared_gate_.data != nullptr) {
    for (kernels::Matrix* w : {&shared_gate_, &shared_up_, &shared_down_}) out.push_back(w);
  }
}

void MoeFfn::route(const Config::Moe& moe, float* logits, int32_t* experts, float* weights) {
  const int32_t n = moe.n_experts, k = moe.n_used;
  if (moe.gating == Config::ExpertGating::SoftmaxThenTopK) kernels::softmax(logits, static_cast<size_t>(n));
  if (moe.gating == Config::ExpertGating::Sigmoid) {
    for (int32_t e = 0; e < n; ++e) logits[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  }
  // The k best scores, best first; a strict comparison keeps the lower expert on a tie.
  for (int32_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < n; ++e) {
      bool taken = false;
      for (int32_t i = 0; i < j && !taken; ++i) taken = experts[i] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    experts[j] = best;
    weights[j] = logits[best];
  }
  if (moe.gating == Config::ExpertGating::TopKThenSoftmax) kernels::softmax(weights, static_cast<size_t>(k));
  if (moe.norm_weights) {
    float sum = 0.0f;
    for (int32_t j = 0; j < k; ++j) sum += weights[j];
    sum = std::fmax(sum, 6.103515625e-5f);  // the smallest normal f16, as llama.cpp clamps it
    for (int32_t j = 0; j < k; ++j) weights[j] /= sum;
  }
  if (moe.weights_scale != 1.0f) {
    for (int32_t j = 0; j < k; ++j) weights[j] *= moe.weights_scale;
  }
}

void MoeFfn::run_expert(const Step& s, const kernels::Matrix& gate, const kernels::Matrix& up,
                        const kernels::Matrix& down, const Biases& b, const float* x, int64_t n, float* out) const {
  Activations& a = s.act;
  const size_t width = static_cast<size_t>(gate.n_rows), dim = static_cast<size_t>(down.n_rows);
  kernels::matmul_multi(s.pool, {&gate, &up}, x, n, {a.moe_gate.data(), a.moe_up.data()}, a.quant_scratch);
  for_tokens(s.pool, n, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1 && b.gate != nullptr; ++t) {
      for (size_t i = 0; i < width; ++i) {
        a.moe_gate[t * width + i] += b.gate[i];
        a.moe_up[t * width + i] += b.up[i];
      }
    }
    float* g = a.moe_gate.data() + t0 * width;
    const float* u = a.moe_up.data() + t0 * width;
    if (activation_ == MoeActivation::SwiGLUOai) {
      kernels::swiglu_oai(g, u, (t1 - t0) * width, 1.702f, 7.0f);
    } else {
      kernels::swiglu(g, u, (t1 - t0) * width);
    }
  });
  kernels::matmul(s.pool, down, a.moe_gate.data(), n, out, a.quant_scratch);
  if (b.down == nullptr) return;
  for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
    for (size_t i = 0; i < dim; ++i) out[t * dim + i] += b.down[i];
  }
}

void MoeFfn::forward(const Step& s, int32_t) const {
  const Config& c = s.config;
  Activations& a = s.act;
  const int64_t nt = static_cast<int64_t>(s.batch.size());
  const size_t dim = static_cast<size_t>(c.dim), n_experts = static_cast<size_t>(c.moe.n_experts);
  const size_t k = static_cast<size_t>(c.moe.n_used);
  norm_input(s, norm_);
  kernels::matmul(s.pool, router_, a.xb.data(), nt, a.moe_logits.data(), a.quant_scratch);
  for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      for (size_t e = 0; e < router_bias_.size(); ++e) a.moe_logits[t * n_experts + e] += router_bias_[e];
      route(c.moe, a.moe_logits.data() + t * n_experts, a.moe_expert.data() + t * k, a.moe_weight.data() + t * k);
    }
  });

  // The (token, slot) pairs grouped by expert, in batch order within an expert (a counting sort).
  const size_t n_pairs = static_cast<size_t>(nt) * k;
  std::vector<size_t> first(n_experts + 1, 0);
  for (size_t i = 0; i < n_pairs; ++i) ++first[static_cast<size_t>(a.moe_expert[i]) + 1];
  for (size_t e = 0; e < n_experts; ++e) first[e + 1] += first[e];
  std::vector<size_t> pairs(n_pairs);
  {
    std::vector<size_t> next(first.begin(), first.end() - 1);
    for (size_t i = 0; i < n_pairs; ++i) pairs[next[static_cast<size_t>(a.moe_expert[i])]++] = i;
  }
  for (size_t e = 0; e < n_experts; ++e) {
    const size_t n_rows = first[e + 1] - first[e];
    if (n_rows == 0) continue;
    const size_t* rows = pairs.data() + first[e];
    for (size_t r = 0; r < n_rows; ++r) {
      std::memcpy(a.moe_x.data() + r * dim, a.xb.data() + (rows[r] / k) * dim, dim * sizeof(float));
    }
    Biases b;
    if (!gate_bias_.empty()) {
      const size_t width = static_cast<size_t>(c.moe.expert_ffn);
      b = {gate_bias_.data() + e * width, up_bias_.data() + e * width, down_bias_.data() + e * dim};
    }
    run_expert(s, gate_[e], up_[e], down_[e], b, a.moe_x.data(), static_cast<int64_t>(n_rows), a.moe_x.data());
    for (size_t r = 0; r < n_rows; ++r) {
      const float w = a.moe_weight[rows[r]];
      const float* src = a.moe_x.data() + r * dim;
      float* dst = a.moe_out.data() + rows[r] * dim;
      for (size_t i = 0; i < dim; ++i) dst[i] = src[i] * w;
    }
  }

  const bool shared = shared_gate_.data != nullptr;
  if (shared) run_expert(s, shared_gate_, shared_up_, shared_down_, Biases{}, a.xb.data(), nt, a.moe_x.data());
  for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* out = a.ffn_out.data() + t * dim;
      std::memcpy(out, a.moe_out.data() + t * k * dim, dim * sizeof(float));
      for (size_t j = 1; j < k; ++j) {
        const float* e = a.moe_out.data() + (t * k + j) * dim;
        for (size_t i = 0; i < dim; ++i) out[i] += e[i];
      }
      if (!shared) continue;
      float scale = 1.0f;
      if (!shared_scale_.empty()) {
        const float* x = a.xb.data() + t * dim;
        float dot = 0.0f;
        for (size_t i = 0; i < dim; ++i) dot += shared_scale_[i] * x[i];
        scale = 1.0f / (1.0f + std::exp(-dot));
      }
      const float* sh = a.moe_x.data() + t * dim;
      for (size_t i = 0; i < dim; ++i) out[i] += sh[i] * scale;
    }
  });
  add_output(s, a.ffn_out.data(), {});
}

}  // namespace preface::model
