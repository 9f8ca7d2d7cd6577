#include "engine/model_runner.h"

#include "util/error.h"


namespace preface::engine {

ModelRunner::ModelRunner(Backend& backend, int32_t max_running)
    : backend_(backend),
      logits_(static_cast<size_t>(max_running) * static_cast<size_t>(backend.config().n_vocab)) {}

StepOutput ModelRunner::run(const std::vector<ScheduledChunk>& plan) {
  const auto n_vocab = static_cast<size_t>(backend_.config().n_vocab);
  batch_.clear();
  batch_.block_tables.clear();
  batch_.state_slots.clear();
  batch_.window_tables.clear();
  batch_.open_keys.clear();
  const size_t n_open = backend_.open_key_floats();
  size_t n_rows = 0;
  for (size_t s = 0; s < plan.size(); ++s) {
    Sequence& seq = *plan[s].seq;
    if (n_open > 0) {  // per-channel keys: the rows of the sequence's unsealed group (allocated on its first step)
      if (seq.open_keys.size() != n_open) seq.open_keys.assign(n_open, 0.0f);
      batch_.open_keys.push_back(seq.open_keys.data());
    }
    batch_.block_tables.push_back(&seq.block_table);
    batch_.state_slots.push_back(seq.state_slot);
    if (backend_.n_window_blocks() > 0) batch_.window_tables.push_back(&seq.window_table);
    for (int32_t i = 0; i < plan[s].n_tokens; ++i) {
      const int32_t pos = seq.n_computed + i;
      const bool last = pos == seq.n_tokens() - 1;
      const bool prompt_row = seq.params.prompt_logits && pos < seq.n_prompt - 1 && pos >= seq.n_prompt_logits;
      n_rows += last || prompt_row ? 1 : 0;
      batch_.add(seq.tokens[static_cast<size_t>(pos)], pos, static_cast<int32_t>(s), last || prompt_row);
    }
  }
  if (n_rows * n_vocab > logits_.size()) logits_.resize(n_rows * n_vocab);
  backend_.forward(batch_, logits_.data());

  StepOutput out;
  size_t row = 0;
  for (size_t c = 0; c < plan.size(); ++c) {
    Sequence& seq = *plan[c].seq;
    for (int32_t i = 0; i < plan[c].n_tokens; ++i) {
      const int32_t pos = seq.n_computed + i;
      const bool last = pos == seq.n_tokens() - 1;
      const bool prompt_row = seq.params.prompt_logits && pos < seq.n_prompt - 1 && pos >= seq.n_prompt_logits;
      if (!last && !prompt_row) continue;
      const float* logits = logits_.data() + row++ * n_vocab;
      if (prompt_row) {
        out.prompt.push_back({c, pos, logits});
        continue;
      }
      SampledToken t;
      t.chunk = c;
      t.logits = logits;
      if (seq.matcher) {
        try {
          const auto allowed = seq.matcher->allowed();
          t.token = seq.sampler.sample(logits, static_cast<int32_t>(n_vocab), seq.tokens, allowed.get());
          if (t.token < 0) t.error = "the grammar allows no token of the vocabulary here";
        } catch (const Error& e) {
          t.token = -1;
          t.error = e.what();
        }
        if (t.token < 0) {
          out.sampled.push_back(std::move(t));
          continue;
        }
      } else {
        t.token = seq.sampler.sample(logits, static_cast<int32_t>(n_vocab), seq.tokens);
      }
      if (seq.params.n_logprobs >= 0) {
        t.has_logprob = true;
        t.logprob = token_logprob(logits, static_cast<int32_t>(n_vocab), t.token, seq.params.n_logprobs);
      }
      out.sampled.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace preface::engine
