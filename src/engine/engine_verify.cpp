// Shadow verification (EngineConfig::verify_fraction): a sampled share of cache hits is recomputed cold when the
// engine has nothing live to do, and the first generated position's logits are compared bit for bit. The
// exactness contract (engine.h) says they are equal; a mismatch means a cached block no longer holds what its
// tokens compute to (a memory fault, a kernel or copy bug), and is counted and logged with the request id and the
// first differing logit.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/engine.h"

namespace preface::engine {

void Engine::verify_note_first_token(const Sequence& seq, const float* logits) {
  if (seq.stats.n_cached_tokens <= 0) return;
  const double f = std::min(config_.verify_fraction, 1.0);
  const uint64_t k = ++n_verify_hits_seen_;
  if (std::floor(static_cast<double>(k) * f) <= std::floor(static_cast<double>(k - 1) * f)) return;
  if (static_cast<int32_t>(verify_pending_.size()) >= config_.max_pending_verifications) {
    ++n_verify_dropped_;
    return;
  }
  const auto n_vocab = static_cast<size_t>(backend_->config().n_vocab);
  Verification v;
  v.request_id = seq.id;
  v.prompt.assign(seq.tokens.begin(), seq.tokens.begin() + seq.n_prompt);
  v.salt = seq.params.cache_salt;
  v.n_cached = seq.stats.n_cached_tokens;
  v.hit_logits.assign(logits, logits + n_vocab);
  verify_pending_.push_back(std::move(v));
}

void Engine::verify_check(const Sequence& shadow, const float* logits) {
  (void)shadow;
  verify_done_ = true;
  const Verification& v = *verify_active_;
  const size_t n = v.hit_logits.size();
  if (std::memcmp(v.hit_logits.data(), logits, n * sizeof(float)) == 0) {
    ++n_verify_match_;
    return;
  }
  ++n_verify_mismatch_;
  size_t first = n, n_diff = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&v.hit_logits[i], &logits[i], sizeof(float)) != 0) {
      if (first == n) first = i;
      ++n_diff;
    }
  }
  std::fprintf(stderr,
               "preface: cache verification MISMATCH: request %llu (%d of %zu prompt tokens from the cache): "
               "logit[%zu] hit=%.9g cold=%.9g (%zu of %zu logits differ)\n",
               static_cast<unsigned long long>(v.request_id), v.n_cached, v.prompt.size(), first,
               static_cast<double>(v.hit_logits[first]), static_cast<double>(logits[first]), n_diff, n);
}

void Engine::verify_yield_to_live() {
  if (!verify_active_) return;
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
  if (verify_active_ || verify_pending_.empty() || !scheduler_.idle()) return;
  {
    std::lock_guard lock(inbox_mu_);
    if (!inbox_.empty()) return;  // live work is about to arrive
    verify_seq_id_ = next_id_++;
  }
  verify_active_ = std::move(verify_pending_.front());
  verify_pending_.pop_front();
  verify_done_ = false;
  RequestParams p;
  p.prompt = verify_active_->prompt;
  p.cache_salt = verify_active_->salt;  // its blocks, if registered, belong to the request's namespace
  p.max_new_tokens = 1;
  p.ignore_eos = true;
  p.cache_bypass = true;
  auto seq = std::make_unique<Sequence>(verify_seq_id_, std::move(p), std::make_shared<RequestStream>());
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
    std::lock_guard lock(inbox_mu_);
    stopping = stopping_;
  }
  if (!verify_done_) {
    if (reason == FinishReason::Cancelled && !stopping) {
      verify_pending_.push_front(std::move(*verify_active_));  // yielded to live work: again later
    } else {
      ++n_verify_dropped_;  // failed, or the engine is stopping
    }
  }
  verify_active_.reset();
}

}  // namespace preface::engine
