// The engine: one model, one paged KV pool shared by every request, automatic prefix caching and continuous
// batching. Callers submit token ids and read a RequestStream; a loop (background thread, or step() driven by the
// caller) packs decode tokens of running sequences and prefill chunks of waiting ones into one batch per step.
//
// Each step reads schedule -> run -> postprocess: the Scheduler plans the chunks and their blocks, the
// ModelRunner runs them on the Backend and samples, and the engine applies stop rules, streams tokens and counts.
// The engine owns the lifecycle around that: the inbox, the thread, cancellation, pins and TTLs. A step that
// throws (a backend failure, a broken invariant) finishes the requests it touched with FinishReason::Error and
// the engine keeps serving the others.
//
// Exactness: a token's logits depend only on its sequence's tokens and the weights (see model/model.h), and cache
// hits copy K/V bytes verbatim, so outputs are bit-identical whether a prefix was cached, how prompts were
// chunked, which requests shared a batch, and how many threads ran.
#pragma once
#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend.h"
#include "engine/kv_tiers.h"
#include "engine/model_runner.h"
#include "engine/pins.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/shadow_verifier.h"
#include "engine/step_clock.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace preface::engine {

struct EngineConfig {
  // What the pool stores: K and V types and rotation (kernels/kv_type.h; the CLI resolves --kv-rotate auto with
  // the model's head sizes, kernels::resolve_kv_format). Part of the cache namespace.
  kernels::KvFormat kv_format;
  int32_t block_size = 16;              // tokens per KV block
  uint64_t kv_cache_bytes = 0;          // KV pool budget; 0 = default_kv_cache_bytes()
  int32_t max_batch_tokens = 512;       // tokens per step (<= the model's max_batch_tokens)
  int32_t max_running = 64;             // sequences running at once
  int32_t n_threads = 0;                // 0 = hardware threads
  bool prefix_cache = true;             // false: no lookups, no registration (every request computes its prompt)
  // Models with sliding-window and global layers: the windowed layers' rows go in a pool of their own and leave
  // a sequence once no query can read them (kv/window_pool.h). Off with the tiers below RAM (their records hold
  // every paged layer of a block) and for models without both kinds of layers.
  bool window_reclaim = true;
  std::function<std::chrono::steady_clock::time_point()> clock;  // for TTLs; empty = steady_clock::now
  // > 0: a cached block unreferenced and unpinned for this long (since its last release or unpin; a hit refreshes
  // it) loses its hash at the next step (kv::KvCache::expire_idle). 0 = cached blocks live until evicted.
  std::chrono::steady_clock::duration cache_ttl{0};
  // Token ids that end a generation (FinishReason::Stop) unless the request sets ignore_eos: the tokenizer's
  // end-of-generation ids (Tokenizer::end_of_generation_ids).
  std::vector<int32_t> end_of_generation;
  // > 0: the requests of one RequestParams::pin_group pin at most this many blocks at once (beside the cap of
  // half the pool for all pins together). 0: no per-group cap.
  int32_t max_pinned_blocks_per_group = 0;
  // Shadow verification (--verify-fraction): this fraction of the requests that hit the cache (chosen by a
  // counter: hit k is checked when floor(k F) > floor((k - 1) F), so F = 0.01 checks every 100th) has its prompt
  // recomputed cold, and the logits of the first generated position are compared bit for bit with the hit's.
  // Budget: a shadow is started only at the end of a step that leaves no live request waiting or running, and is
  // cancelled (and queued again) at the start of the first step that finds a live one, so a live request never
  // shares a step with shadow work; it waits at most for the one shadow step already running when it arrived
  // (<= max_batch_tokens tokens). At most max_pending_verifications wait (each holds the prompt and n_vocab
  // logits); more are dropped and counted.
  double verify_fraction = 0;
  int32_t max_pending_verifications = 8;
  // Cache tiers below RAM (--cache-dir, --cache-redis); used only with prefix_cache. Models with recurrent layers
  // store their state snapshots there too (engine/kv_tiers.h).
  TierConfig tiers;
  // Models with recurrent layers: bytes of state snapshots kept in RAM (kv/state_snapshots.h); 0: 256 MiB.
  uint64_t state_snapshot_bytes = 0;
  // Models with recurrent layers: a snapshot every this many prompt tokens (rounded down to a block; 0: none), so
  // a prompt edited or cut after one recomputes at most this many tokens (engine/scheduler.h).
  int32_t state_snapshot_interval = 2048;
};

// A sensible KV budget: 25% of MemAvailable, at most 8 GiB, at least 64 MiB.
uint64_t default_kv_cache_bytes();
// The KV budget when none is configured: the memory for config.max_running sequences of the model's whole context
// (never more than default_kv_cache_bytes()). With the windowed layers in their own pool (window_reclaim), a
// sequence's windowed layers count only the blocks that pool gives it (engine::kv_pools_for_budget).
uint64_t default_kv_cache_bytes(const model::Model& model, const EngineConfig& config);

// Snapshot of the engine's counters (for metrics and logs).
struct EngineCounters {
  int64_t n_requests = 0, n_requests_finished = 0;
  int64_t n_prompt_tokens = 0, n_generated_tokens = 0;
  kv::PrefixStats prefix;
  int32_t n_blocks_total = 0, n_blocks_in_use = 0, n_blocks_cached = 0, n_blocks_free = 0;
  // The sliding-window layers' own pool (kv/window_pool.h), all 0 without one.
  int32_t n_window_blocks_total = 0, n_window_blocks_in_use = 0, n_window_blocks_cached = 0;
  int32_t n_window_blocks_free = 0;
  int64_t n_evictions = 0, n_preemptions = 0;
  int64_t n_expired = 0;  // cached blocks dropped by --cache-ttl
  int64_t n_removal_records = 0, removal_record_bytes = 0;  // the cache explainer's kv::RemovalLog
  int32_t n_waiting = 0, n_running = 0;
  int32_t n_pinned_blocks = 0;
  // Recurrent-state snapshots (models with recurrent layers): held, their bytes, evicted for the budget.
  int64_t n_state_snapshots = 0, state_snapshot_bytes = 0, n_state_snapshots_evicted = 0;
  // Per kv::SnapshotKind: snapshots filed, and restored for a prefix hit.
  std::array<int64_t, kv::kSnapshotKinds> n_state_snapshots_taken{}, n_state_snapshot_hits{};
  int64_t n_steps = 0;
  int64_t n_failed_steps = 0;  // steps that threw; their requests finished with FinishReason::Error
  int64_t n_verify_match = 0, n_verify_mismatch = 0;  // shadow verifications done (EngineConfig::verify_fraction)
  int64_t n_verify_pending = 0, n_verify_dropped = 0; // waiting for an idle engine; dropped (queue full, failed)
  uint64_t n_params = 0;       // the model's parameters (model::shape_param_count of its shape), for FLOP estimates
  // Measured prefill rate, tokens per second: an exponential moving average (weight kPrefillRateAlpha) over steps
  // that computed at least kPrefillRateMinTokens prompt tokens, of (all tokens of the step) / (the step's forward
  // time). 0 until such a step ran. What RequestStats::saved_seconds divides by.
  double prefill_tokens_per_s = 0;
  std::vector<kv::TierStats> tiers;  // one per configured tier below RAM (engine/kv_tiers.h), disk first
  int64_t n_tier_loaded_blocks = 0;  // blocks loaded from those tiers into the pool
  int64_t n_tier_loaded_snapshots = 0;  // recurrent-state snapshots loaded from them (models with recurrent layers)
};

inline constexpr double kPrefillRateAlpha = 0.2;
inline constexpr int32_t kPrefillRateMinTokens = 16;

// One registered KV block as seen by Engine::cached_blocks (a copy; the dashboard's prefix tree).
struct CachedBlockInfo {
  int32_t id = -1;
  kv::BlockKey key;               // hash, parent hash, namespace root
  std::vector<int32_t> tokens;    // [block_size]
  int64_t hits = 0;               // prefix hits since it was registered
  int32_t ref_count = 0;          // sequences holding it now
  int32_t pin_count = 0;
  double age_s = 0;               // since registration, by the engine clock
};

// `config` with the end-of-generation ids of `tokenizer` (anything with end_of_generation_ids(); a template so
// that the engine does not depend on the tokenizer module).
template <typename TokenizerT>
EngineConfig with_eog(EngineConfig config, const TokenizerT& tokenizer) {
  config.end_of_generation = tokenizer.end_of_generation_ids();
  return config;
}

// What the layers above need to know of the model and pool, as values (the server copies them at attach time).
struct EngineDescription {
  int32_t ctx_len = 0;
  int32_t n_vocab = 0;
  int32_t block_size = 0;
  int32_t n_kv_blocks = 0;
  size_t kv_bytes = 0;                  // the KV storage allocated (recurrent state slots included)
  kernels::KvFormat kv_format;
  bool prefix_cache = true;
  uint64_t snapshot_budget_bytes = 0;   // recurrent-state snapshots (models with recurrent layers), else 0
  int32_t n_window_blocks = 0;          // the sliding-window layers' own pool (kv/window_pool.h); 0: none
  int32_t window = 0;                   // its widest window, in positions
};

// Why a prompt would hit the cache as far as it would, now (Engine::explain_cache).
struct CacheExplanation {
  bool prefix_cache = true;          // false: the engine runs without a prefix cache (nothing is ever reused)
  int32_t n_prompt_tokens = 0;
  int32_t block_size = 0;
  int32_t n_blocks = 0;              // the pool's size, beside prefix.removal->n_in_use
  kv::PrefixExplanation prefix;      // the cap is n_prompt_tokens - 1, as admission's
  double removed_seconds_ago = -1;   // with a removal: the engine clock's age of it
  // With a missing block: the tier below RAM that holds it ("disk"; Redis is not asked, a round trip), so the
  // request would load it instead of computing it. Empty when none does.
  std::string tier;
  // With the sliding-window layers' own pool (kv/window_pool.h): the tokens a request would resume from, the
  // longest of prefix.n_full_hit_tokens' block boundaries whose window blocks are still cached (no partial
  // block); -1 without such a pool.
  int32_t window_cached_tokens = -1;
  // Models with recurrent layers: the tokens a request would resume from, the longest of prefix.n_full_hit_tokens'
  // block boundaries where a state snapshot exists (no partial block); -1 for other models.
  int32_t state_cached_tokens = -1;
};

class Engine {
 public:
  // Runs on a CpuBackend over `model` (which must outlive the engine), with a KV pool sized by
  // config.kv_cache_bytes, allocated now. Throws preface::Error on a bad config (e.g. a budget too small for one
  // block, max_batch_tokens above the model's).
  Engine(model::Model& model, const EngineConfig& config);
  // Runs on `backend`, whose KV storage sets the pool (config.kv_format, block_size and kv_cache_bytes are
  // ignored; the backend's count).
  Engine(std::unique_ptr<Backend> backend, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. Throws PromptTooLong for a prompt that does not fit the model's context
  // (with at least one token to generate) or the whole KV pool (the message gives both numbers), preface::Error
  // for an empty prompt or a token id out of range. The only prompt-length check of the project: the layers above
  // map PromptTooLong to their API's error.
  std::shared_ptr<RequestStream> submit(RequestParams params);

  // Caller-driven mode (tests, CLI): one scheduling step; false when there was nothing to do.
  bool step();
  void run_until_idle();
  // Background mode: a thread runs steps while there is work. stop() cancels what is left and joins.
  void start();
  void stop();

  // Subscribes `sink` to the KV cache's block events (kv/block_events.h) after the cache tiers, e.g. a KV event
  // publisher. Call before start() or the first step; `sink` must outlive the engine. Events arrive on the engine
  // thread, inside a step or a purge.
  void add_event_sink(kv::BlockEventSink* sink) { cache_.add_event_sink(sink); }
  // Subscribes `sink` to the disk tier's stores and removals (kv/tier.h; none without a disk tier). Call before
  // start(); `sink` must outlive the engine. Events arrive on the tier's thread.
  void set_tier_event_sink(kv::TierEventSink* sink) {
    if (tiers_) tiers_->set_event_sink(sink);
  }

  EngineCounters counters() const;
  // Seconds the step running now has taken so far; 0 between steps. Lock-free (an atomic), so a liveness probe can
  // read it while the engine thread is stuck inside a step: the one thing that shows a wedged engine.
  double step_running_seconds() const { return step_clock_.running_seconds(); }
  // Throws std::logic_error when the pool's or scheduler's invariants fail. Takes the step lock, so it is safe
  // beside the background loop (e.g. from a /metrics scrape); never call it from inside a step.
  void check_invariants() const;

  const EngineConfig& config() const { return config_; }
  EngineDescription describe() const;
  const std::string& model_fingerprint() const { return fingerprint_; }
  kv::Digest cache_namespace(const std::string& salt) const;

  // Unregisters every cached block of the namespace of `salt` (blocks in use keep serving their holders but can no
  // longer be hit). Safe beside the background loop: runs under the step lock. Returns the blocks purged.
  int32_t purge_namespace(const std::string& salt);
  // The same for each namespace root digest (cache_namespace) in `roots`.
  int32_t purge_namespaces(std::span<const kv::Digest> roots);
  // A dry run of admission's cache lookup for `prompt` in the namespace of `salt`: how many tokens would be reused
  // and why no more (kv::KvCache::explain). `siblings`: other namespace roots of the same caller, named when
  // they hold the missing block. Under the step lock; changes nothing. The answer describes the cache now; a
  // request submitted right after may find more (a concurrent request registered blocks) or less (eviction).
  CacheExplanation explain_cache(std::span<const int32_t> prompt, const std::string& salt,
                                 std::span<const kv::Digest> siblings = {}) const;
  // Every registered block (at most the pool's size), copied under the step lock: O(blocks x block_size). Callers
  // that poll rate-limit it (the dashboard takes one copy a second at most, whatever the number of viewers).
  std::vector<CachedBlockInfo> cached_blocks() const;
  // The namespaces holding a registered block now. O(blocks), under the step lock.
  std::vector<kv::Digest> live_namespaces() const;

 private:
  void drain_inbox();
  void cancel_requested();
  // postprocess: advances the plan's sequences, appends sampled tokens, applies stop rules, streams.
  void postprocess(const std::vector<ScheduledChunk>& plan, StepOutput& out);
  // The exception boundary: finishes `seqs` (or, when null, every sequence) with FinishReason::Error.
  void fail(const std::vector<ScheduledChunk>* plan, const std::exception& e);
  void finish(Sequence& seq, FinishReason reason, const std::string& error = {});
  void publish_counters();
  void update_pins(const std::vector<ScheduledChunk>& plan);
  void pin_requested(Sequence& seq, std::chrono::steady_clock::time_point t);
  std::chrono::steady_clock::time_point now() const;
  void expire_namespaces();  // step_mu_ held: the cache TTL
  // Shadow verification (engine_verify.cpp; the bookkeeping is verifier_), step_mu_ held.
  bool is_shadow(const Sequence& seq) const { return verifier_.is_shadow(seq.id); }
  void verify_note_first_token(const Sequence& seq, const float* logits);  // a live request's first token
  void verify_yield_to_live();   // start of a step: cancel a running shadow when live work exists
  void verify_start_if_idle();   // end of a step: start the next shadow when nothing live is left
  void verify_on_finish(const Sequence& shadow, FinishReason reason);

  std::unique_ptr<Backend> backend_;
  EngineConfig config_;
  std::string fingerprint_;
  std::string rope_desc_;
  kv::KvCache cache_;                   // the one door to the KV cache (over backend_'s storage)
  std::unique_ptr<KvTiers> tiers_;      // null without tiers; subscribed to cache_'s events
  bool tiers_flushed_ = false;
  Scheduler scheduler_;
  ModelRunner runner_;
  PinTable pins_;                       // at most half the pool pinned
  ShadowVerifier verifier_;
  struct Totals {  // what EngineCounters reports of the engine's own work (shadows excluded)
    int64_t n_requests_finished = 0, n_prompt_tokens = 0, n_generated_tokens = 0, n_steps = 0, n_failed_steps = 0;
  } totals_;
  uint64_t n_params_ = 0;
  double prefill_tokens_per_s_ = 0;     // EngineCounters::prefill_tokens_per_s

  // Shared with submitters (under inbox_.mu).
  struct Inbox {
    mutable std::mutex mu;
    std::condition_variable cv;
    std::vector<std::unique_ptr<Sequence>> seqs;  // submitted, not yet handed to the scheduler
    uint64_t next_id = 1;
    int64_t n_requests = 0;
    bool stopping = false;
  } inbox_;
  EngineCounters published_;            // refreshed after every step
  StepClock step_clock_;                // step_running_seconds
  std::thread loop_;

  // Held by step(), stop()'s tail and the purges, so a purge never runs inside a step.
  mutable std::mutex step_mu_;
};

}  // namespace preface::engine
