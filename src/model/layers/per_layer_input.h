// Gemma 4's per-layer embeddings (E2B/E4B). Each token gets, besides its embedding, a small vector per layer
// (Config::ple_dim values), computed once per forward from the token id and its scaled embedding x0:
//   ple[l] = (per_layer_token_embd[token][l] * sqrt(ple_dim)
//             + RMSNorm(per_layer_model_proj(x0)[l] / sqrt(dim)) * per_layer_proj_norm) / sqrt(2)
// (PerLayerInputs, a model-level stage), and after its FFN each block l adds a projection of it and scales the
// residual stream (PerLayerEmbedding, a layer kind run after the block's FFN):
//   x += RMSNorm(proj(GELU(inp_gate x) * ple[l])) * post_norm;   x *= layer_output_scale
// GELU in its tanh form (kernels::geglu). Every step is per token, so a token's values depend on it alone.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/reader.h"
#include "model/layers/layer.h"

namespace preface::model {

class PerLayerInputs {
 public:
  // Reads per_layer_token_embd [n_vocab x n_layers * ple_dim], per_layer_model_proj [n_layers * ple_dim x dim] and
  // per_layer_proj_norm [ple_dim]; throws preface::Error naming a tensor that is wrong.
  PerLayerInputs(const gguf::File& file, const Config& c);
  // act.ple[t] for every batch token from its id and act.x[t] (the scaled embeddings, before any layer).
  void compute(const Step& s) const;
  // The projection, to pack (the token table keeps GGUF layout for row lookups).
  void collect_matrices(std::vector<kernels::Matrix*>& out) { out.push_back(&proj_); }

 private:
  kernels::Matrix token_embd_, proj_;
  std::vector<float> norm_;  // [ple_dim]
};

class PerLayerEmbedding final : public Layer {
 public:
  // Reads blk.<il>.inp_gate [ple_dim x dim], proj [dim x ple_dim], post_norm [dim] (when c.ple_dim > 0) and
  // layer_output_scale [1] (when present).
  PerLayerEmbedding(const gguf::File& file, const Config& c, int32_t il);

  void forward(const Step& s, int32_t il) const override;
  void collect_matrices(std::vector<kernels::Matrix*>& out) override;

 private:
  kernels::Matrix inp_gate_, proj_;  // empty without per-layer inputs
  std::vector<float> post_norm_;     // [dim]
  float output_scale_ = 1.0f;
  bool has_output_scale_ = false;
};

}  // namespace preface::model
