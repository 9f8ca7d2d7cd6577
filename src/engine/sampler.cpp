// Sampling pipeline (the order of llama.cpp's default chain):
//   penalties -> [greedy: argmax] -> top-k -> top-p -> min-p -> temperature -> draw.
// top-p and min-p judge the probabilities at temperature 1; temperature then reshapes the survivors.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace preface::engine {
namespace {

// Uniform double in [0, 1) from the top 53 bits of one 64-bit draw.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Higher logit first; the lower id wins ties so the order is total and deterministic.
bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  if (params.top_p <= 0.0f) throw Error("top_p must be > 0");
  if (params.min_p > 1.0f) throw Error("min_p must be <= 1");
  if (params.repeat_penalty <= 0.0f) throw Error("repeat_penalty must be > 0");
  if (params.repeat_last_n < 0) throw Error("repeat_last_n must be >= 0");
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history,
                        const grammar::TokenMask* allowed) {
  if (n_vocab < 1) throw Error("sample: empty vocabulary");
  if (allowed != nullptr && allowed->n_allowed == 0) return -1;
  if (allowed != nullptr && params_.temperature <= 0.0f && !repeat_penalty_on() && !openai_penalties_on()) {
    // Greedy over the allowed tokens: the same comparison as below, lowest id on ties.
    int32_t best = -1;
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (allowed->test(i) && (best < 0 || logits[i] > logits[best])) best = i;
    }
    return best;
  }
  if (allowed == nullptr && params_.temperature <= 0.0f && !repeat_penalty_on() && !openai_penalties_on()) {
    // Greedy without penalties: the argmax straight from the logits, the lowest id on ties, as min_element with
    // `better` picks (a NaN never displaces the best so far, and a NaN at id 0 is never displaced, there too).
    // Copying and comparing (logit, id) pairs cost ~0.1 ms per token at a 32,000-token vocabulary.
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    return best;
  }
  candidates_.resize(static_cast<size_t>(n_vocab));
  for (size_t i = 0; i < candidates_.size(); ++i) candidates_[i] = {logits[i], static_cast<int32_t>(i)};
  apply_penalties(history);
  if (allowed != nullptr) {  // only the allowed candidates go on, in id order as before
    size_t k = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (allowed->test(static_cast<int32_t>(i))) candidates_[k++] = candidates_[i];
    }
    candidates_.resize(k);
  }
  const size_t n = candidates_.size();

  if (params_.temperature <= 0.0f) {
    return std::min_element(candidates_.begin(), candidates_.end(), better)->second;
  }

  size_t n_keep = n;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n_keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(n_keep),
                      candidates_.end(), better);
  } else if (params_.top_p < 1.0f || params_.min_p > 0.0f) {
    std::sort(candidates_.begin(), candidates_.end(), better);
  }
  const bool sorted = n_keep < n || params_.top_p < 1.0f || params_.min_p > 0.0f;
  float max_logit = candidates_[0].first;
  if (!sorted) {
    for (size_t i = 0; i < n_keep; ++i) max_logit = std::max(max_logit, candidates_[i].first);
  }

  if (params_.top_p < 1.0f) {  // smallest prefix whose probability mass reaches top_p
    double sum = 0.0;
    for (size_t i = 0; i < n_keep; ++i) sum += std::exp(static_cast<double>(candidates_[i].first - max_logit));
    double cum = 0.0;
    for (size_t i = 0; i < n_keep; ++i) {
      cum += std::exp(static_cast<double>(candidates_[i].first - max_logit)) / sum;
      if (cum >= params_.top_p) {
        n_keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {  // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p)
    const double threshold = static_cast<double>(max_logit) + std::log(static_cast<double>(params_.min_p));
    size_t i = 1;
    while (i < n_keep && static_cast<double>(candidates_[i].first) >= threshold) ++i;
    n_keep = i;
  }

  // Draw from softmax(logit / temperature) over the survivors, in their current order.
  const double inv_temp = 1.0 / static_cast<double>(params_.temperature);
  double total = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    total += std::exp((static_cast<double>(candidates_[i].first) - max_logit) * inv_temp);
  }
  const double r = uniform01(rng_) * total;
  double cum = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    cum += std::exp((static_cast<double>(candidates_[i].first) - max_logit) * inv_temp);
    if (r < cum) return candidates_[i].second;
  }
  return candidates_[n_keep - 1].second;  // r landed on the rounding slack at the very end
}

// llama.cpp repetition penalty over the last repeat_last_n tokens (a positive logit is divided by the penalty,
// a negative one multiplied), then OpenAI presence/frequency penalties over the whole history:
//   logit -= count * frequency_penalty + (count > 0) * presence_penalty.
void Sampler::apply_penalties(std::span<const int32_t> history) {
  const bool repeat = repeat_penalty_on();
  const bool openai = openai_penalties_on();
  if (!repeat && !openai) return;
  const int32_t n_vocab = static_cast<int32_t>(candidates_.size());
  counts_.assign(candidates_.size(), 0);
  if (repeat) {
    const size_t window = std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
    for (size_t i = history.size() - window; i < history.size(); ++i) {
      const int32_t id = history[i];
      if (id < 0 || id >= n_vocab || counts_[static_cast<size_t>(id)]++ > 0) continue;
      float& logit = candidates_[static_cast<size_t>(id)].first;
      logit = logit > 0.0f ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
    }
  }
  if (openai) {
    counts_.assign(candidates_.size(), 0);
    for (const int32_t id : history) {
      if (id >= 0 && id < n_vocab) ++counts_[static_cast<size_t>(id)];
    }
    for (size_t id = 0; id < counts_.size(); ++id) {
      if (counts_[id] == 0) continue;
      candidates_[id].first -= static_cast<float>(counts_[id]) * params_.frequency_penalty + params_.presence_penalty;
    }
  }
}

}  // namespace preface::engine
