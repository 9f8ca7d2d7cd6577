// Token sampling from logits: greedy, temperature, top-k, top-p, min-p, repetition/presence/frequency
// penalties, seeded so that the same seed and inputs give the same tokens.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "grammar/matcher.h"

namespace preface::engine {

struct SamplingParams {
  float temperature = 0.0f;     // <= 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 0;            // <= 0: off
  float top_p = 1.0f;           // >= 1: off
  float min_p = 0.0f;           // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off; llama.cpp semantics over the last repeat_last_n tokens
  int32_t repeat_last_n = 64;
  float presence_penalty = 0.0f;   // OpenAI semantics
  float frequency_penalty = 0.0f;  // OpenAI semantics
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // Picks the next token from logits[n_vocab]. `history` is the sequence so far (prompt + generated), used by the
  // penalties. Does not modify logits. allowed: when set, only its tokens can be picked (applied after the
  // penalties, before greedy/top-k/top-p/min-p/temperature); -1 when it allows none.
  int32_t sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history,
                 const grammar::TokenMask* allowed = nullptr);
  const SamplingParams& params() const { return params_; }

 private:
  void apply_penalties(std::span<const int32_t> history);  // adjusts candidates_[id].first in place
  bool repeat_penalty_on() const { return params_.repeat_penalty != 1.0f && params_.repeat_last_n > 0; }
  bool openai_penalties_on() const { return params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f; }

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // [n_vocab] scratch
  std::vector<int32_t> counts_;                        // [n_vocab] occurrences in history, scratch
};

}  // namespace preface::engine
