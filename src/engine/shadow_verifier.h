// Shadow verification's bookkeeping (EngineConfig::verify_fraction): which cache hits are sampled, the queue of
// sampled hits waiting for an idle engine, the one being recomputed cold (the shadow), and the bit-for-bit
// comparison of its first generated position's logits with the hit's. The Engine decides when a shadow runs and
// feeds it the logits (engine_verify.cpp); this class holds no sequence and never touches the cache.
//
// Sampling: hit k (counting from 1) is sampled when floor(k F) > floor((k - 1) F), so F = 0.01 checks every 100th.
// Single-threaded: the engine thread, under its step lock.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace preface::engine {

class ShadowVerifier {
 public:
  struct Verification {
    uint64_t request_id = 0;
    std::vector<int32_t> prompt;
    std::string salt;
    int32_t n_cached = 0;
    std::vector<float> hit_logits;  // [n_vocab] of the hit's first generated position
  };

  // fraction F in [0, 1] (more is 1); at most max_pending sampled hits wait, more are dropped and counted.
  ShadowVerifier(double fraction, int32_t max_pending) : fraction_(fraction), max_pending_(max_pending) {}

  bool enabled() const { return fraction_ > 0; }
  // A live request's first generated position after a hit (n_cached > 0): sampled, and queued or dropped.
  void note_hit(uint64_t request_id, std::span<const int32_t> prompt, const std::string& salt, int32_t n_cached,
                std::span<const float> logits);
  bool has_pending() const { return !pending_.empty(); }
  bool active() const { return active_.has_value(); }
  bool is_shadow(uint64_t seq_id) const { return active_ && seq_id == shadow_id_; }
  // The next queued verification becomes the shadow, run as sequence shadow_id. has_pending() && !active().
  const Verification& start(uint64_t shadow_id);
  // The shadow's first generated position: compared with the hit's (a mismatch is counted and logged to stderr
  // with the request id and the first differing logit).
  void check(const float* logits);
  // The shadow finished. Before its comparison: back to the front of the queue when it yielded to live work
  // (requeue), else dropped and counted.
  void on_finish(bool requeue);

  int64_t n_match() const { return n_match_; }
  int64_t n_mismatch() const { return n_mismatch_; }
  int64_t n_dropped() const { return n_dropped_; }
  int64_t n_pending() const { return static_cast<int64_t>(pending_.size()) + (active_ ? 1 : 0); }

 private:
  double fraction_;
  int32_t max_pending_;
  std::deque<Verification> pending_;
  std::optional<Verification> active_;  // the running shadow's
  uint64_t shadow_id_ = 0;              // its sequence id
  bool done_ = false;                   // its first token was compared
  uint64_t n_hits_seen_ = 0;
  int64_t n_match_ = 0, n_mismatch_ = 0, n_dropped_ = 0;
};

}  // namespace preface::engine
