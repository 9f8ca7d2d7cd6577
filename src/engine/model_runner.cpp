#include "engine/model_runner.h"

#include "util/error.h"

namespace preface::engine {

ModelRunner::ModelRunner(Backend& backend, int32_t max_running)
    : backend_(backend),
      logits_(static_cast<size_t>(max_running) * static_cast<size_t>(backend.config().n_vocab)) {}

std::vector<SampledToken> ModelRunner::run(const std::vector<ScheduledChunk>& plan) {
  const int32_t n_vocab = backend_.config().n_vocab;
  batch_.clear();
  batch_.block_tables.clear();
  size_t n_sampled = 0;
  for (size_t s = 0; s < plan.size(); ++s) {
    const Sequence& seq = *plan[s].seq;
    batch_.block_tables.push_back(&seq.block_table);
    for (int32_t i = 0; i < plan[s].n_tokens; ++i) {
      const int32_t pos = seq.n_computed + i;
      const bool last = pos == seq.n_tokens() - 1;
      n_sampled += last ? 1 : 0;
      batch_.add(seq.tokens[static_cast<size_t>(pos)], pos, static_cast<int32_t>(s), last);
    }
  }
  if (n_sampled * static_cast<size_t>(n_vocab) > logits_.size()) {
    throw Error("a step samples " + std::to_string(n_sampled) + " sequences; the logits buffer holds " +
                std::to_string(logits_.size() / static_cast<size_t>(n_vocab)));
  }
  backend_.forward(batch_, logits_.data());

  std::vector<SampledToken> out;
  out.reserve(n_sampled);
  size_t row = 0;
  for (size_t c = 0; c < plan.size(); ++c) {
    Sequence& seq = *plan[c].seq;
    if (seq.n_computed + plan[c].n_tokens != seq.n_tokens()) continue;  // a prefill chunk short of the end
    const float* logits = logits_.data() + row++ * static_cast<size_t>(n_vocab);
    SampledToken t;
    t.chunk = c;
    t.logits = logits;
    t.token = seq.sampler.sample(logits, n_vocab, seq.tokens);
    if (seq.params.n_logprobs >= 0) {
      t.has_logprob = true;
      t.logprob = token_logprob(logits, n_vocab, t.token, seq.params.n_logprobs);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace preface::engine
