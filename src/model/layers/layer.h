// A layer kind: one sublayer of a decoder block (a token mixer such as attention, or a feed-forward network) with
// its weights and its forward pass over a batch. forward() reads the residual stream Step::act.x of every batch
// token and adds its output to it; nothing else it writes outlives the call, except what it stores in the paged
// KV (attention). Its output for a token depends only on that token's x and, through the KV, on the tokens
// before it in its sequence, never on the rest of the batch or the thread count.
//
// The kinds today: mixers AttentionLayer (layers/attention_layer.h) and DeltaNetLayer (layers/delta_net.h, a
// recurrent state per sequence); FFNs GatedFfn (layers/gated_ffn.h) and MoeFfn (layers/moe_ffn.h).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/matmul.h"
#include "model/layers/step.h"

namespace preface::model {

class Layer {
 public:
  virtual ~Layer() = default;
  // il: the block's index (selects its KV layer and its rotation).
  virtual void forward(const Step& s, int32_t il) const = 0;
  // The weight matrices, so that the model can pack them once at load (kernels::prepare_matrix).
  virtual void collect_matrices(std::vector<kernels::Matrix*>& out) = 0;
};

// A decoder block: x += mixer(x), then x += ffn(x), then what `post` does (gemma4's per-layer embedding and output
// scale), when present.
struct Block {
  std::unique_ptr<Layer> mixer;
  std::unique_ptr<Layer> ffn;
  std::unique_ptr<Layer> post;
};

}  // namespace preface::model
