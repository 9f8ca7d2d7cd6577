// read_experts (model/arch/registry.h): the mixture-of-experts keys llama.cpp's converter writes for every MoE
// architecture.
#include <string>

#include "model/arch/registry.h"
#include "util/error.h"

namespace preface::model {

void read_experts(const gguf::File& file, const std::string& prefix, Config& c, const Config::Moe& defaults) {
  constexpr int64_t kMaxExperts = 1024, kMaxWidth = 1 << 20;
  Config::Moe& m = c.moe;
  m = defaults;
  m.n_experts = read_int_in(file, prefix + "expert_count", 1, kMaxExperts);
  m.n_used = read_int_in(file, prefix + "expert_used_count", 1, m.n_experts);
  m.expert_ffn = read_int_in(file, prefix + "expert_feed_forward_length", 1, kMaxWidth);
  m.shared_ffn = read_int_in(file, prefix + "expert_shared_feed_forward_length", 1, kMaxWidth, 0);  // 0: none
  // llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE: 1 softmax, 2 sigmoid, 3 softmax over the selected logits.
  if (const std::optional<int64_t> g = file.try_int(prefix + "expert_gating_func")) {
    if (*g == 1) {
      m.gating = Config::ExpertGating::SoftmaxThenTopK;
    } else if (*g == 2) {
      m.gating = Config::ExpertGating::Sigmoid;
    } else if (*g == 3) {
      m.gating = Config::ExpertGating::TopKThenSoftmax;
    } else {
      throw Error("metadata " + prefix + "expert_gating_func = " + std::to_string(*g) + " is not 1, 2 or 3");
    }
  }
  if (const std::optional<bool> norm = file.try_bool(prefix + "expert_weights_norm")) m.norm_weights = *norm;
  if (const std::optional<float> scale = positive_float(file, prefix + "expert_weights_scale")) {
    m.weights_scale = *scale;
  }
}

}  // namespace preface::model
