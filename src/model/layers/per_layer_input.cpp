#include "model/layers/per_layer_input.h"

#include <cmath>
#include <string>

#include "kernels/ops.h"
#include "model/layers/weights.h"

namespace preface::model {

PerLayerInputs::PerLayerInputs(const gguf::File& file, const Config& c) {
  const int64_t width = int64_t{c.n_layers} * c.ple_dim;
  token_embd_ = load_matrix(file, "per_layer_token_embd.weight", c.n_vocab, width);
  proj_ = load_matrix(file, "per_layer_model_proj.weight", width, c.dim);
  norm_ = load_vector(file, "per_layer_proj_norm.weight", c.ple_dim);
}

void PerLayerInputs::compute(const Step& s) const {
  const Config& c = s.config;
  Activations& a = s.act;
  const int64_t nt = static_cast<int64_t>(s.batch.size());
  const size_t pd = static_cast<size_t>(c.ple_dim), width = static_cast<size_t>(c.n_layers) * pd;
  kernels::matmul(s.pool, proj_, a.x.data(), nt, a.ple.data(), a.quant_scratch);
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  const float token_scale = std::sqrt(static_cast<float>(pd)), sum_scale = 1.0f / std::sqrt(2.0f);
  for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
    std::vector<float> row(width);
    for (size_t t = t0; t < t1; ++t) {
      float* p = a.ple.data() + t * width;
      kernels::get_row(token_embd_, s.batch.tokens[t], row.data());
      for (size_t i = 0; i < width; ++i) p[i] *= proj_scale;
      for (size_t l = 0; l < static_cast<size_t>(c.n_layers); ++l) {
        kernels::rmsnorm(p + l * pd, norm_.data(), p + l * pd, pd, c.rms_eps);
      }
      for (size_t i = 0; i < width; ++i) p[i] = (p[i] + row[i] * token_scale) * sum_scale;
    }
  });
}

PerLayerEmbedding::PerLayerEmbedding(const gguf::File& file, const Config& c, int32_t il) {
  const std::string p = "blk." + std::to_string(il) + ".";
  if (c.ple_dim > 0) {
    inp_gate_ = load_matrix(file, p + "inp_gate.weight", c.ple_dim, c.dim);
    proj_ = load_matrix(file, p + "proj.weight", c.dim, c.ple_dim);
    post_norm_ = load_vector(file, p + "post_norm.weight", c.dim);
  }
  if (file.find_tensor(p + "layer_output_scale.weight") != nullptr) {
    output_scale_ = load_vector(file, p + "layer_output_scale.weight", 1)[0];
    has_output_scale_ = true;
  }
}

void PerLayerEmbedding::collect_matrices(std::vector<kernels::Matrix*>& out) {
  if (inp_gate_.data == nullptr) return;
  out.push_back(&inp_gate_);
  out.push_back(&proj_);
}

void PerLayerEmbedding::forward(const Step& s, int32_t il) const {
  const Config& c = s.config;
  Activations& a = s.act;
  const int64_t nt = static_cast<int64_t>(s.batch.size());
  const size_t dim = static_cast<size_t>(c.dim), pd = static_cast<size_t>(c.ple_dim);
  const size_t width = static_cast<size_t>(c.n_layers) * pd;
  if (inp_gate_.data != nullptr) {
    kernels::matmul(s.pool, inp_gate_, a.x.data(), nt, a.ple_gate.data(), a.quant_scratch);
    for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        kernels::geglu(a.ple_gate.data() + t * pd, a.ple.data() + t * width + static_cast<size_t>(il) * pd, pd);
      }
    });
    kernels::matmul(s.pool, proj_, a.ple_gate.data(), nt, a.ffn_out.data(), a.quant_scratch);
    add_output(s, a.ffn_out.data(), post_norm_);
  }
  if (!has_output_scale_) return;
  for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
    for (size_t i = t0 * dim; i < t1 * dim; ++i) a.x[i] *= output_scale_;
  });
}

}  // namespace preface::model
