// Shadow verification (EngineConfig::verify_fraction): a sampled share of cache hits is recomputed cold when the
// engine has nothing live to do, and the first generated position's logits are compared bit for bit. The
// exactness contract (engine.h) says they are equal; a mismatch means a cached block no longer holds what its
// tokens compute to (a memory fault, a kernel or copy bug). The bookkeeping is engine/shadow_verifier.h; here, when
// a shadow runs: only while nothing live waits or runs.
#include <span>

#include "engine/engine.h"

namespace preface::engine {

void Engine::verify_note_first_token(const Sequence& seq, const float* logits) {
  const auto n_vocab = static_cast<size_t>(backend_->config().n_vocab);
  verifier_.note_hit(seq.id, std::span<const int32_t>(seq.tokens).first(static_cast<size_t>(seq.n_prompt)),
                     seq.params.cache_salt, seq.stats.n_cached_tokens, std::span<const float>(logits, n_vocab));
}

void Engine::verify_yield_to_live() {
  if (!verifier_.active()) return;
  for (Sequence* seq : scheduler_.all()) {
    if (is_shadow(*seq)) continue;
    // Live work: the shadow goes back to the front of the queue and starts over when the engine is idle again.
    for (Sequence* s : scheduler_.all()) {
      if (is_shadow(*s)) {
        finish(*s, FinishReason::Cancelled);
        break;
      }
    }
    return;
  }
}

void Engine::verify_start_if_idle() {
  if (verifier_.active() || !verifier_.has_pending() || !scheduler_.idle()) return;
  uint64_t shadow_id = 0;
  {
    std::lock_guard lock(inbox_.mu);
    if (!inbox_.seqs.empty()) return;  // live work is about to arrive
    shadow_id = inbox_.next_id++;
  }
  const ShadowVerifier::Verification& v = verifier_.start(shadow_id);
  RequestParams p;
  p.prompt = v.prompt;
  p.cache_salt = v.salt;  // its blocks, if registered, belong to the request's namespace
  p.max_new_tokens = 1;
  p.ignore_eos = true;
  p.cache_bypass = true;
  auto seq = std::make_unique<Sequence>(shadow_id, std::move(p), std::make_shared<RequestStream>());
  seq->t_submit = Clock::now();
  seq->tokens = seq->params.prompt;
  seq->n_prompt = static_cast<int32_t>(seq->tokens.size());
  seq->stats.n_prompt_tokens = seq->n_prompt;
  seq->max_total_tokens = std::min(backend_->config().ctx_len, cache_.n_blocks() * config_.block_size);
  seq->ns = cache_namespace(seq->params.cache_salt);
  if (config_.prefix_cache) seq->block_hashes(config_.block_size);
  scheduler_.add(std::move(seq));
}

void Engine::verify_on_finish(const Sequence&, FinishReason reason) {
  bool stopping = false;
  {
    std::lock_guard lock(inbox_.mu);
    stopping = inbox_.stopping;
  }
  verifier_.on_finish(reason == FinishReason::Cancelled && !stopping);
}

}  // namespace preface::engine
