// Log-probabilities of a sampled token and its most likely alternatives, computed on the engine thread from the
// step's logits, so that a stream carries a few numbers per token instead of n_vocab floats.
#pragma once
#include <cstdint>
#include <vector>

namespace preface::engine {

struct TopLogprob {
  int32_t token = -1;
  float logprob = 0;                  // natural log of the probability under the unscaled model logits
};

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
  std::vector<TopLogprob> top;        // [n_top], most likely first (higher logit, then lower id)
};

// log p(token) = logits[token] - (max + log(sum exp(logits - max))) over logits[n_vocab] (kernels::logit_stats, so
// the same bits on every kernel path), and the n_top most likely tokens with theirs. A pure function of the
// logits: a cache hit or another batch never changes it.
TokenLogprob token_logprob(const float* logits, int32_t n_vocab, int32_t token, int32_t n_top);

}  // namespace preface::engine
