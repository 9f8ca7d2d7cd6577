// Explicit prompt caching (Anthropic's cache_control): a request may ask that the full blocks of its prompt prefix
// [0, n_tokens) stay cached for a TTL. Pinned blocks are never evicted; each hit on a pinned block, or a new
// request pinning it again, pushes its expiry to max(current, now + ttl). Expired pins are dropped at each step.
// Pins are keyed by block hash, so they follow the cached content, not a request.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "kv/kv_cache.h"
#include "kv/hash.h"

namespace preface::engine {

class PinTable {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;

  // At most max_pinned blocks are pinned at once, so pins cannot starve running requests of memory; and at most
  // max_per_group (when > 0) by the requests of one group (the server's tenant), so one tenant cannot take the
  // whole budget from the others.
  explicit PinTable(int32_t max_pinned, int32_t max_per_group = 0)
      : max_pinned_(max_pinned), max_per_group_(max_per_group) {}

  enum class Result { Pinned, NotCached, Refused };  // Refused: a cap was reached
  // Pins the registered block holding `hash` for `group` until now + ttl, or extends an existing pin.
  Result pin(kv::KvCache& cache, const kv::Digest& hash, const std::string& group, Duration ttl, TimePoint now);
  // A hit on `hash`: extends its pin, if any, by its own TTL.
  void touch(const kv::Digest& hash, TimePoint now);
  // Unpins every pin whose expiry is <= now. Returns how many expired.
  int32_t expire(kv::KvCache& cache, TimePoint now);
  // Forgets pins on blocks the cache no longer has registered under their hash (after a purge).
  void forget_unregistered(const kv::KvCache& cache);

  int32_t n_pinned() const { return static_cast<int32_t>(pins_.size()); }
  bool is_pinned(const kv::Digest& hash) const { return pins_.count(hash) != 0; }

 private:
  struct Pin {
    int32_t block_id;
    Duration ttl;
    TimePoint expires_at;
    std::string group;
  };
  void drop(std::unordered_map<kv::Digest, Pin, kv::DigestHash>::iterator it);  // without unpinning

  int32_t max_pinned_;
  int32_t max_per_group_;
  std::unordered_map<kv::Digest, Pin, kv::DigestHash> pins_;
  std::unordered_map<std::string, int32_t> per_group_;  // group -> pins held
};

}  // namespace preface::engine
