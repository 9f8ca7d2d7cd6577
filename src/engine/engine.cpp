#include "engine/engine.h"

#include <algorithm>

#include "util/error.h"

namespace preface::engine {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Engine::~Engine() { stop(); }

kv::Digest Engine::cache_namespace(const std::string& salt) const {
  return kv::namespace_digest(fingerprint_, config_.kv_format.name(), config_.block_size, rope_desc_,
                              salt);
}

std::shared_ptr<RequestStream> Engine::submit(RequestParams params) {
  const auto& cfg = backend_->config();
  const auto n_prompt = static_cast<int64_t>(params.prompt.size());
  if (n_prompt == 0) throw Error("the prompt is empty");
  for (int32_t t : params.prompt) {
    if (t < 0 || t >= cfg.n_vocab) {
      throw Error("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(cfg.n_vocab) + ")");
    }
  }
  if (n_prompt >= cfg.ctx_len) {
    throw PromptTooLong("the prompt is " + std::to_string(n_prompt) + " tokens; the model's context is " +
                        std::to_string(cfg.ctx_len) + " tokens, including at least one generated token");
  }
  const int64_t pool_tokens = static_cast<int64_t>(cache_.n_blocks()) * config_.block_size;
  if (n_prompt + 1 > pool_tokens) {
    throw PromptTooLong("the prompt is " + std::to_string(n_prompt) + " tokens; the KV cache holds " +
                        std::to_string(pool_tokens) + " tokens");
  }
  if (params.max_new_tokens < 0) throw Error("max tokens must be >= 0");

  auto stream = std::make_shared<RequestStream>();
  uint64_t id;
  {
    std::lock_guard lock(inbox_.mu);
    id = inbox_.next_id++;
  }
  auto seq = std::make_unique<Sequence>(id, std::move(params), stream);
  seq->t_submit = Clock::now();
  seq->tokens = seq->params.prompt;
  seq->n_prompt = static_cast<int32_t>(n_prompt);
  seq->stats.n_prompt_tokens = seq->n_prompt;
  seq->max_total_tokens = static_cast<int32_t>(std::min<int64_t>(cfg.ctx_len, pool_tokens));
  seq->ns = cache_namespace(seq->params.cache_salt);
  if (config_.prefix_cache) seq->block_hashes(config_.block_size);  // hashed once, off the engine thread
  if (seq->params.max_new_tokens == 0) {
    seq->stats.finish = FinishReason::Length;
    stream->finish(seq->stats);
    std::lock_guard lock(inbox_.mu);
    ++inbox_.n_requests;
    return stream;
  }
  {
    std::lock_guard lock(inbox_.mu);
    ++inbox_.n_requests;
    inbox_.seqs.push_back(std::move(seq));
  }
  inbox_.cv.notify_all();
  return stream;
}

void Engine::drain_inbox() {
  std::vector<std::unique_ptr<Sequence>> incoming;
  {
    std::lock_guard lock(inbox_.mu);
    incoming.swap(inbox_.seqs);
  }
  for (auto& seq : incoming) {
    totals_.n_prompt_tokens += seq->n_prompt;
    scheduler_.add(std::move(seq));
  }
}

void Engine::cancel_requested() {
  for (Sequence* seq : scheduler_.all()) {
    if (seq->stream->cancel_requested()) finish(*seq, FinishReason::Cancelled);
  }
}

bool Engine::step() {
  std::lock_guard step_lock(step_mu_);
  const StepClock::Scope timed(step_clock_);
  drain_inbox();
  cancel_requested();
  verify_yield_to_live();
  pins_.expire(cache_, now());
  expire_namespaces();
  if (scheduler_.idle()) verify_start_if_idle();  // a shadow put back while live work ran
  if (scheduler_.idle()) {
    publish_counters();
    return false;
  }
  std::vector<ScheduledChunk> plan;
  try {
    plan = scheduler_.schedule(config_.max_batch_tokens);
  } catch (const std::exception& e) {  // the scheduler's state is suspect: fail everything it holds
    fail(nullptr, e);
    return true;
  }
  if (plan.empty()) {
    // Nothing could run although requests wait: the oldest one cannot fit beside the pinned blocks.
    if (scheduler_.n_running() == 0) {
      finish(*scheduler_.all().front(), FinishReason::Error, "the KV cache has no room for this request");
    }
    publish_counters();
    return true;
  }
  int32_t n_step_tokens = 0, n_step_prompt_tokens = 0;  // before on_computed advances n_computed
  for (const ScheduledChunk& chunk : plan) {
    n_step_tokens += chunk.n_tokens;
    n_step_prompt_tokens += std::clamp(chunk.seq->n_prompt - chunk.seq->n_computed, 0, chunk.n_tokens);
  }
  StepOutput out;
  const auto t_forward = Clock::now();
  try {
    out = runner_.run(plan);
  } catch (const std::exception& e) {  // nothing advanced: the plan's sequences end, the others go on
    fail(&plan, e);
    return true;
  }
  const double forward_s = std::chrono::duration<double>(Clock::now() - t_forward).count();
  if (n_step_prompt_tokens >= kPrefillRateMinTokens && forward_s > 0) {
    const double rate = n_step_tokens / forward_s;
    prefill_tokens_per_s_ =
        prefill_tokens_per_s_ == 0 ? rate : prefill_tokens_per_s_ + kPrefillRateAlpha * (rate - prefill_tokens_per_s_);
  }
  ++totals_.n_steps;
  update_pins(plan);
  postprocess(plan, out);
  verify_start_if_idle();
  publish_counters();
  return true;
}

void Engine::fail(const std::vector<ScheduledChunk>* plan, const std::exception& e) {
  ++totals_.n_failed_steps;
  const std::string error = std::string("the engine step failed: ") + e.what();
  std::vector<Sequence*> victims;
  if (plan != nullptr) {
    for (const ScheduledChunk& chunk : *plan) victims.push_back(chunk.seq);
  } else {
    victims = scheduler_.all();
  }
  for (Sequence* seq : victims) finish(*seq, FinishReason::Error, error);
  publish_counters();
}

std::chrono::steady_clock::time_point Engine::now() const {
  return config_.clock ? config_.clock() : std::chrono::steady_clock::now();
}

void Engine::update_pins(const std::vector<ScheduledChunk>& plan) {
  if (!config_.prefix_cache) return;
  const auto t = now();
  for (const ScheduledChunk& chunk : plan) {
    Sequence& seq = *chunk.seq;
    if (!seq.hits_touched) {  // a hit refreshes the pins of the blocks it used
      seq.hits_touched = true;
      const auto n_hit = std::min<size_t>(static_cast<size_t>(seq.n_hit_blocks), seq.prompt_hashes().size());
      for (size_t b = 0; b < n_hit; ++b) pins_.touch(seq.prompt_hashes()[b], t);
    }
    // Blocks become pinnable once registered; on_computed registers them after this step's forward, so this
    // pins what was registered up to the previous step (the last ones are pinned when the sequence finishes).
    pin_requested(seq, t);
  }
}

void Engine::pin_requested(Sequence& seq, std::chrono::steady_clock::time_point t) {
  int32_t n_refused = 0;
  for (const CachePin& pin : seq.params.cache_pins) {
    const int32_t n_blocks = std::min({pin.n_tokens / config_.block_size, seq.n_hashed_blocks,
                                       static_cast<int32_t>(seq.prompt_hashes().size())});
    for (int32_t b = 0; b < n_blocks; ++b) {
      const auto r = pins_.pin(cache_, seq.prompt_hashes()[static_cast<size_t>(b)], seq.params.pin_group, pin.ttl, t);
      n_refused += r == PinTable::Result::Refused ? 1 : 0;
    }
  }
  seq.stats.n_pin_refused_blocks = std::max(seq.stats.n_pin_refused_blocks, n_refused);
}

void Engine::postprocess(const std::vector<ScheduledChunk>& plan, StepOutput& out) {
  const int32_t n_vocab = backend_->config().n_vocab;
  for (const PromptLogits& p : out.prompt) {  // before on_computed moves n_computed; positions ascend
    Sequence& seq = *plan[p.chunk].seq;
    seq.stream->add_prompt_logits(p.logits, static_cast<size_t>(n_vocab));
    seq.n_prompt_logits = p.pos + 1;
  }
  std::vector<SampledToken>& sampled = out.sampled;
  std::vector<Sequence*> finished;
  std::vector<std::pair<Sequence*, std::string>> failed;
  size_t next = 0;  // sampled is in plan order
  for (size_t c = 0; c < plan.size(); ++c) {
    Sequence& seq = *plan[c].seq;
    SampledToken* s = next < sampled.size() && sampled[next].chunk == c ? &sampled[next++] : nullptr;
    try {
      scheduler_.on_computed(plan[c]);
    } catch (const std::exception& e) {
      ++totals_.n_failed_steps;
      failed.emplace_back(&seq, std::string("the engine step failed: ") + e.what());
      continue;
    }
    if (s == nullptr) continue;  // a prefill chunk short of the end
    if (s->token < 0) {  // the constraint failed (model_runner.h)
      failed.emplace_back(&seq, "constrained decoding failed: " + s->error);
      continue;
    }
    const int32_t token = s->token;
    const auto now = Clock::now();
    if (seq.stats.n_generated_tokens == 0) {
      seq.t_first_token = now;
      if (is_shadow(seq)) {
        verifier_.check(s->logits);
      } else if (verifier_.enabled()) {
        verify_note_first_token(seq, s->logits);
      }
    }
    seq.stats.n_generated_tokens++;
    totals_.n_generated_tokens += is_shadow(seq) ? 0 : 1;
    const bool is_stop =
        ((!seq.params.ignore_eos || seq.matcher) &&
         std::binary_search(config_.end_of_generation.begin(), config_.end_of_generation.end(), token)) ||
        std::find(seq.params.stop_token_ids.begin(), seq.params.stop_token_ids.end(), token) !=
            seq.params.stop_token_ids.end();
    if (is_stop) {
      seq.stats.finish = FinishReason::Stop;
      seq.stats.stop_token = token;
      finished.push_back(&seq);
      continue;
    }
    if (seq.matcher && !seq.matcher->accept(token)) {  // never for a token the mask allowed
      failed.emplace_back(&seq, "constrained decoding failed: token " + std::to_string(token) + " left the grammar");
      continue;
    }
    seq.tokens.push_back(token);
    TokenEvent ev;
    ev.token = token;
    ev.has_logprob = s->has_logprob;
    ev.logprob = std::move(s->logprob);
    if (seq.params.keep_logits) ev.logits.assign(s->logits, s->logits + n_vocab);
    if (seq.stats.n_generated_tokens == 1) {
      ev.n_cached_tokens = seq.stats.n_cached_tokens;
      ev.n_written_tokens = seq.stats.n_written_tokens;
    }
    seq.stream->push(std::move(ev));
    if (seq.matcher && seq.matcher->complete()) {  // nothing can follow: the grammar's sentence is finished
      seq.stats.finish = FinishReason::Stop;
      finished.push_back(&seq);
    } else if (seq.stats.n_generated_tokens >= seq.params.max_new_tokens ||
               seq.n_tokens() >= seq.max_total_tokens) {
      seq.stats.finish = FinishReason::Length;
      finished.push_back(&seq);
    }
  }
  for (Sequence* seq : finished) finish(*seq, seq->stats.finish);
  for (auto& [seq, error] : failed) finish(*seq, FinishReason::Error, error);
}

void Engine::finish(Sequence& seq, FinishReason reason, const std::string& error) {
  if (config_.prefix_cache && reason != FinishReason::Cancelled) pin_requested(seq, this->now());
  const auto now = Clock::now();
  RequestStats stats = seq.stats;
  stats.finish = reason;
  stats.error = error;
  stats.total_ms = ms_between(seq.t_submit, now);
  stats.request_id = seq.id;
  stats.saved_flops = 2.0 * static_cast<double>(n_params_) * stats.n_cached_tokens;
  stats.saved_seconds = prefill_tokens_per_s_ > 0 ? stats.n_cached_tokens / prefill_tokens_per_s_ : 0;
  if (seq.admitted_once) {
    stats.queue_ms = ms_between(seq.t_submit, seq.t_first_scheduled);
    if (stats.n_generated_tokens > 0) {
      stats.first_token_ms = ms_between(seq.t_submit, seq.t_first_token);
      stats.prefill_ms = ms_between(seq.t_first_scheduled, seq.t_first_token);
      stats.decode_ms = ms_between(seq.t_first_token, now);
    }
  } else {
    stats.queue_ms = stats.total_ms;
  }
  const bool shadow = is_shadow(seq);
  if (shadow) verify_on_finish(seq, reason);
  std::unique_ptr<Sequence> owned = scheduler_.remove(&seq);  // frees its blocks now
  totals_.n_requests_finished += shadow ? 0 : 1;
  owned->stream->finish(stats);
}

void Engine::run_until_idle() {
  while (step()) {
  }
}

void Engine::start() {
  std::lock_guard lock(inbox_.mu);
  if (loop_.joinable()) return;
  inbox_.stopping = false;
  loop_ = std::thread([this] {
    while (true) {
      {
        std::unique_lock lock(inbox_.mu);
        inbox_.cv.wait(lock, [&] { return inbox_.stopping || !inbox_.seqs.empty() || !scheduler_.idle(); });
        if (inbox_.stopping) break;
      }
      step();
    }
  });
}

void Engine::stop() {
  {
    std::lock_guard lock(inbox_.mu);
    inbox_.stopping = true;
  }
  inbox_.cv.notify_all();
  if (loop_.joinable()) loop_.join();
  std::lock_guard step_lock(step_mu_);
  drain_inbox();
  for (Sequence* seq : scheduler_.all()) finish(*seq, FinishReason::Cancelled);
  if (tiers_ && !tiers_flushed_) {  // an orderly stop keeps the whole cache on disk
    tiers_flushed_ = true;
    tiers_->flush_pool();
  }
  publish_counters();
}

void Engine::publish_counters() {
  EngineCounters c;
  c.n_requests_finished = totals_.n_requests_finished;
  c.n_prompt_tokens = totals_.n_prompt_tokens;
  c.n_generated_tokens = totals_.n_generated_tokens;
  c.prefix = cache_.stats();
  const kv::BlockPool& pool = cache_.blocks();
  c.n_blocks_total = cache_.n_blocks();
  c.n_blocks_in_use = pool.n_in_use();
  c.n_blocks_cached = pool.n_cached();
  c.n_blocks_free = pool.n_free();
  if (const kv::WindowPool* window = cache_.window_pool()) {
    c.n_window_blocks_total = window->blocks().n_blocks();
    c.n_window_blocks_in_use = window->blocks().n_in_use();
    c.n_window_blocks_cached = window->blocks().n_cached();
    c.n_window_blocks_free = window->blocks().n_free();
  }
  c.n_evictions = pool.n_evictions();
  c.n_expired = pool.n_expired();
  c.n_removal_records = static_cast<int64_t>(pool.removals().size());
  c.removal_record_bytes = static_cast<int64_t>(pool.removals().memory_bytes());
  c.n_preemptions = scheduler_.n_preemptions();
  c.n_waiting = scheduler_.n_waiting();
  c.n_running = scheduler_.n_running();
  c.n_steps = totals_.n_steps;
  c.n_failed_steps = totals_.n_failed_steps;
  c.n_pinned_blocks = pins_.n_pinned();
  c.n_state_snapshots = static_cast<int64_t>(cache_.snapshots().n_snapshots());
  c.state_snapshot_bytes = static_cast<int64_t>(cache_.snapshots().bytes());
  c.n_state_snapshots_evicted = cache_.snapshots().n_evicted();
  c.n_state_snapshots_taken = cache_.snapshots().n_taken();
  c.n_state_snapshot_hits = cache_.snapshots().n_hits();
  c.n_params = n_params_;
  c.n_verify_match = verifier_.n_match();
  c.n_verify_mismatch = verifier_.n_mismatch();
  c.n_verify_pending = verifier_.n_pending();
  c.n_verify_dropped = verifier_.n_dropped();
  c.prefill_tokens_per_s = prefill_tokens_per_s_;
  if (tiers_) c.n_tier_loaded_blocks = tiers_->n_loaded_blocks();
  if (tiers_) c.n_tier_loaded_snapshots = tiers_->n_loaded_snapshots();
  std::lock_guard lock(inbox_.mu);
  c.n_requests = inbox_.n_requests;
  c.n_waiting += static_cast<int32_t>(inbox_.seqs.size());
  published_ = c;
}

EngineCounters Engine::counters() const {
  EngineCounters c;
  {
    std::lock_guard lock(inbox_.mu);
    c = published_;
  }
  // The tiers' writers run between steps: their counters are read live (each tier locks its own).
  if (tiers_) c.tiers = tiers_->stats();
  return c;
}

void Engine::check_invariants() const {
  std::lock_guard step_lock(step_mu_);
  scheduler_.check_invariants();
}

}  // namespace preface::engine
