#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace preface::engine {

TokenLogprob token_logprob(const float* logits, int32_t n_vocab, int32_t token, int32_t n_top) {
  const kernels::LogitStats st = kernels::logit_stats(logits, static_cast<size_t>(n_vocab));
  const float log_z = st.max + std::log(st.sum_exp);
  TokenLogprob out;
  out.token = token;
  out.logprob = logits[token] - log_z;
  n_top = std::clamp(n_top, 0, n_vocab);
  if (n_top == 0) return out;
  // One pass keeping the n_top best in `best`, sorted; most logits fail the first comparison with the worst kept.
  // NaN logits never enter (every comparison with them is false).
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(n_top) + 1);
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (static_cast<int32_t>(best.size()) == n_top && !(logits[i] > logits[best.back()])) continue;
    if (std::isnan(logits[i])) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (static_cast<int32_t>(best.size()) > n_top) best.pop_back();
  }
  out.top.reserve(best.size());
  for (int32_t id : best) out.top.push_back({id, logits[id] - log_z});
  return out;
}

}  // namespace preface::engine
