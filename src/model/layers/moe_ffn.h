// The mixture-of-experts feed-forward network as a layer kind: RMSNorm, a router (ffn_gate_inp, [n_experts x dim])
// scoring every expert, the moe.n_used best experts of each token (Config::ExpertGating says how scores become
// selections and weights), each a gated FFN of its own (MoeOptions: activation, biases; ffn_{gate,up,down}_exps:
// 3-D tensors, one slice per expert), optionally a shared expert every token runs (ffn_{gate,up,down}_shexp, scaled by
// sigmoid(ffn_gate_inp_shexp . x) where the file has that vector), and the residual add.
//
// On CPU an expert's weights are read once per step: the batch's tokens are grouped by expert (in batch order) and
// each expert runs over its rows as one matmul, and experts no token selected are not read at all. Exactness: the
// matmuls give each row the same bits whatever the other rows (kernels/matmul.h), and a token's output is the sum
// of its experts' outputs times their weights in its selection order, w0 e0 + w1 e1 + ..., then the shared expert's
// (as llama.cpp adds them); so it depends on the token alone, never on which tokens share its batch or its experts.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/reader.h"
#include "model/layers/layer.h"

namespace preface::model {

enum class MoeActivation {
  SwiGLU,     // SiLU(gate) * up
  SwiGLUOai,  // gpt-oss: kernels::swiglu_oai with alpha 1.702 and limit 7
};

struct MoeOptions {
  const char* norm = "ffn_norm";  // the input norm's tensor (qwen35moe, gpt-oss: post_attention_norm)
  // Biases (gpt-oss): ffn_gate_inp.bias added to the router logits, ffn_{gate,up}_exps.bias to each expert's gate
  // and up rows before the activation, ffn_down_exps.bias to its output before its weight multiplies it.
  bool biases = false;
  MoeActivation activation = MoeActivation::SwiGLU;
};

class MoeFfn final : public Layer {
 public:
  // Reads the norm, the router and the experts of block il (sizes from c.moe); throws preface::Error naming a
  // tensor that is wrong.
  MoeFfn(const gguf::File& file, const Config& c, int32_t il, const MoeOptions& o);

  void forward(const Step& s, int32_t il) const override;
  void collect_matrices(std::vector<kernels::Matrix*>& out) override;

  // Token t's experts and weights from its router logits (moe.n_experts, overwritten), in selection order (best
  // first; equal scores: the lower expert first). experts, weights: [moe.n_used].
  static void route(const Config::Moe& moe, float* logits, int32_t* experts, float* weights);

 private:
  struct Biases {  // nullptr: none
    const float* gate = nullptr;  // [width]
    const float* up = nullptr;    // [width]
    const float* down = nullptr;  // [dim]
  };
  // Runs n rows through one gated FFN: out[i] = down(act(gate x[i] + b_gate, up x[i] + b_up)) + b_down.
  void run_expert(const Step& s, const kernels::Matrix& gate, const kernels::Matrix& up, const kernels::Matrix& down,
                  const Biases& b, const float* x, int64_t n, float* out) const;

  MoeActivation activation_;
  std::vector<float> norm_;                          // [dim]
  std::vector<float> router_bias_;                   // [n_experts]; empty: none
  std::vector<float> gate_bias_, up_bias_, down_bias_;  // [n_experts][expert_ffn] x2, [n_experts][dim]; or empty
  kernels::Matrix router_;                           // [n_experts x dim]
  std::vector<kernels::Matrix> gate_, up_, down_;    // per expert: [expert_ffn x dim] x2, [dim x expert_ffn]
  kernels::Matrix shared_gate_, shared_up_, shared_down_;  // shared_ffn > 0: [shared_ffn x dim] x2, [dim x ...]
  std::vector<float> shared_scale_;                  // [dim] ffn_gate_inp_shexp; empty: the shared expert unscaled
};

}  // namespace preface::model
