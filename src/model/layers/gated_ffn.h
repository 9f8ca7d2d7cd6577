// The gated feed-forward network as a layer kind: RMSNorm, gate and up projections (separate or one fused
// ffn_up of gate rows then up rows), act(gate) * up, the down projection, an optional post-norm, and the
// residual add.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/reader.h"
#include "model/layers/layer.h"

namespace preface::model {

enum class FfnActivation { SwiGLU, GeGLU };  // SiLU(gate) * up; GELU (tanh form)(gate) * up (gemma)

struct FfnOptions {
  bool fused_gate_up = false;  // ffn_up holds the gate rows, then the up rows (phi3)
  FfnActivation activation = FfnActivation::SwiGLU;
  bool post_norm = false;      // post_ffw_norm: the output normed before the residual add (gemma)
  const char* norm = "ffn_norm";  // the input norm's tensor (qwen35: post_attention_norm)
};

class GatedFfn final : public Layer {
 public:
  // Reads blk.<il>.ffn_norm and the projections; throws preface::Error naming a tensor that is wrong.
  GatedFfn(const gguf::File& file, const Config& c, int32_t il, const FfnOptions& o);

  void forward(const Step& s, int32_t il) const override;
  void collect_matrices(std::vector<kernels::Matrix*>& out) override;

 private:
  FfnActivation activation_;
  std::vector<float> norm_;                // [dim]
  kernels::Matrix w_gate_, w_up_, w_down_;  // [ffn x dim], [ffn x dim], [dim x ffn]
  std::vector<float> post_norm_;           // [dim]; empty: none
};

}  // namespace preface::model
