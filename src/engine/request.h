// What a caller submits to the engine and what it gets back. The engine sees token ids only; text, chat templates
// and stop strings belong to the layers above.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/logprobs.h"
#include "grammar/matcher.h"
#include "engine/sampler.h"
#include "util/error.h"

namespace preface::engine {

enum class FinishReason { None, Length, Stop, Cancelled, Error };

// Engine::submit's refusal of a prompt longer than the model's context or the KV pool.
struct PromptTooLong : Error {
  using Error::Error;
};

// Keep the full blocks of the prompt prefix [0, n_tokens) cached (never evicted) for ttl after the last use
// (Anthropic's cache_control breakpoints; ttl 300 s for "5m", 3600 s for "1h").
struct CachePin {
  int32_t n_tokens = 0;
  std::chrono::seconds ttl{300};
};

struct RequestParams {
  std::vector<int32_t> prompt;        // token ids, non-empty
  SamplingParams sampling;
  int32_t max_new_tokens = 16;        // >= 0
  bool ignore_eos = false;            // when false, end-of-generation tokens finish with Stop
  std::vector<int32_t> stop_token_ids;
  std::string cache_salt;             // tenant/salt: part of the cache namespace (empty = shared)
  int32_t n_logprobs = -1;            // >= 0: each TokenEvent carries the token's log-probability and this many
                                      // most likely alternatives (computed on the engine thread)
  bool keep_logits = false;           // record the logits of every sampled position (tests, `eval`)
  // Record the logits of every prompt position but the last (the last is the first sampled one: keep_logits) in
  // RequestStream::prompt_logits(). Such a prompt is always computed, never read from the cache (`eval`).
  bool prompt_logits = false;
  // Compute the whole prompt: no prefix-cache lookup (its full blocks are still offered for registration). For
  // shadow verification and clients that want a cold answer (HTTP "cache": false).
  bool cache_bypass = false;
  std::vector<CachePin> cache_pins;   // explicit caching breakpoints (Anthropic cache_control)
  std::string pin_group;              // pins of one group share EngineConfig::max_pinned_blocks_per_group (tenant)
  // Constrained decoding (grammar/matcher.h): only tokens the grammar allows are sampled, the mask applied after
  // the penalties and before greedy or random selection; an end-of-generation token is allowed only where the
  // grammar accepts, and ends the request (Stop) even with ignore_eos; the request also ends (Stop) once the
  // grammar is complete. Log-probabilities stay those of the model's unmasked distribution (vLLM's default).
  // Masks are computed on the engine thread and cached in the shared Constraint.
  std::shared_ptr<grammar::Constraint> constraint;
  bool constraint_strip_space = false;  // the output starts a text whose first leading space the tokenizer drops
};

// Timings in milliseconds since submission.
struct RequestStats {
  int32_t n_prompt_tokens = 0;
  int32_t n_cached_tokens = 0;        // prompt tokens whose K/V came from the cache (never the last one)
  int32_t n_written_tokens = 0;       // tokens whose K/V this request computed into newly registered full blocks
  int32_t n_tier_tokens = 0;          // of n_cached_tokens: loaded from a cache tier below RAM (disk, Redis)
  int32_t n_generated_tokens = 0;
  int32_t n_preemptions = 0;
  int32_t n_pin_refused_blocks = 0;   // cached blocks a cache pin asked for that a pin budget refused
  FinishReason finish = FinishReason::None;
  int32_t stop_token = -1;            // the end-of-generation (or stop_token_ids) token that ended it: sampled,
                                      // never streamed, its K/V never computed; -1 when none did
  std::string error;                  // set when finish == Error
  double queue_ms = 0, first_token_ms = 0, total_ms = 0;
  double prefill_ms = 0;              // from first scheduling to the first token
  // The prefill this request skipped thanks to its n_cached_tokens: 2 x n_params x n_cached_tokens FLOPs, and
  // n_cached_tokens at the engine's measured prefill rate (EngineCounters::prefill_tokens_per_s; 0 while unmeasured).
  double saved_flops = 0, saved_seconds = 0;
  uint64_t request_id = 0;            // the engine's id of the request (named by verification log lines)
  double decode_ms = 0;               // from the first token to the end
};

// One generated token. logprob: set (has_logprob) when RequestParams::n_logprobs >= 0. logits: [n_vocab] when
// RequestParams::keep_logits, else empty.
struct TokenEvent {
  int32_t token = -1;
  bool has_logprob = false;
  TokenLogprob logprob;
  std::vector<float> logits;
  // On a request's first token only (else -1): its prompt tokens read from the cache and written to it by then
  // (RequestStats::n_cached_tokens and n_written_tokens so far), for responses that report them up front.
  int32_t n_cached_tokens = -1, n_written_tokens = -1;
};

// The stream a caller reads from; written by the engine thread. Thread-safe.
class RequestStream {
 public:
  // Blocks until a token is available (returns it) or the request finished (returns nullopt; see stats()).
  std::optional<TokenEvent> next();
  // Asks the engine to stop the request; its blocks are freed at the engine's next step.
  void cancel();
  bool cancel_requested() const;
  bool finished() const;
  RequestStats stats() const;         // final once finished() is true
  // RequestParams::prompt_logits: [n_prompt - 1][n_vocab], complete once finished() is true.
  std::vector<float> prompt_logits() const;

  // Engine side.
  void push(TokenEvent ev);
  void add_prompt_logits(const float* row, size_t n_vocab);
  void finish(const RequestStats& stats);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  std::vector<float> prompt_logits_;
  RequestStats stats_;
  bool finished_ = false;
  bool cancel_ = false;
};

}  // namespace preface::engine
