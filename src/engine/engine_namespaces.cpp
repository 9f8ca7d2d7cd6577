// The engine's cache namespaces: the admin purges and the per-block cache TTL (EngineConfig::cache_ttl). Purges
// take step_mu_, so they never interleave with a step. Which namespaces belong to which tenant is the server's
// business (server/api/tenant_namespaces.h); the engine knows namespaces only by their root digest.
#include <algorithm>
#include <unordered_set>

#include "engine/engine.h"

namespace preface::engine {

int32_t Engine::purge_namespace(const std::string& salt) {
  const kv::Digest root = cache_namespace(salt);
  return purge_namespaces(std::span<const kv::Digest>(&root, 1));
}

int32_t Engine::purge_namespaces(std::span<const kv::Digest> roots) {
  std::lock_guard step_lock(step_mu_);
  int32_t n = 0;
  for (const kv::Digest& root : roots) {
    n += cache_.purge_namespace(root);
    if (tiers_) tiers_->purge_namespace(root);
  }
  pins_.forget_unregistered(cache_);
  publish_counters();
  return n;
}

std::vector<kv::Digest> Engine::live_namespaces() const {
  std::lock_guard step_lock(step_mu_);
  std::unordered_set<kv::Digest, kv::DigestHash> live;
  const kv::BlockPool& pool = cache_.blocks();
  for (int32_t id = 0; id < pool.n_blocks(); ++id) {
    if (pool.is_registered(id)) live.insert(pool.key(id).root);
  }
  return {live.begin(), live.end()};
}

std::vector<CachedBlockInfo> Engine::cached_blocks() const {
  std::lock_guard step_lock(step_mu_);
  const auto t = now();
  std::vector<CachedBlockInfo> out;
  const kv::BlockPool& pool = cache_.blocks();
  out.reserve(static_cast<size_t>(pool.n_cached() + pool.n_in_use()));
  for (int32_t id = 0; id < pool.n_blocks(); ++id) {
    if (!pool.is_registered(id)) continue;
    const auto tokens = pool.block_tokens(id);
    out.push_back({id, pool.key(id), std::vector<int32_t>(tokens.begin(), tokens.end()), pool.hits(id),
                   pool.ref_count(id), pool.pin_count(id),
                   std::max(0.0, std::chrono::duration<double>(t - pool.registered_at(id)).count())});
  }
  return out;
}

CacheExplanation Engine::explain_cache(std::span<const int32_t> prompt, const std::string& salt,
                                       std::span<const kv::Digest> siblings) const {
  CacheExplanation e;
  e.prefix_cache = config_.prefix_cache;
  e.n_prompt_tokens = static_cast<int32_t>(prompt.size());
  e.block_size = cache_.block_size();
  e.n_blocks = cache_.n_blocks();
  if (!config_.prefix_cache || prompt.empty()) return e;
  const kv::Digest ns = cache_namespace(salt);
  std::lock_guard step_lock(step_mu_);
  e.prefix = cache_.explain(ns, prompt, e.n_prompt_tokens - 1, siblings);
  if (tiers_ && e.prefix.miss_block >= 0) {
    const auto hashes = kv::block_hashes(ns, prompt.first(static_cast<size_t>(e.prefix.miss_block + 1) * e.block_size),
                                         e.block_size);
    e.tier = tiers_->holder(hashes.back());
  }
  if (const kv::WindowPool* window = cache_.window_pool()) {
    const int32_t n_full = e.prefix.n_full_hit_tokens / e.block_size;
    const auto hashes =
        kv::block_hashes(ns, prompt.first(static_cast<size_t>(n_full) * e.block_size), e.block_size);
    e.window_cached_tokens = window->longest_hit(ns, prompt, hashes, n_full) * e.block_size;
  }
  if (cache_.state_slots().n_slots() > 0) {
    auto k = static_cast<size_t>(e.prefix.n_full_hit_tokens / e.block_size);
    const auto hashes = kv::block_hashes(ns, prompt.first(k * static_cast<size_t>(e.block_size)), e.block_size);
    while (k > 0 && !cache_.has_snapshot(hashes[k - 1])) --k;
    e.state_cached_tokens = static_cast<int32_t>(k) * e.block_size;
  }
  if (e.prefix.removal) {
    e.removed_seconds_ago = std::chrono::duration<double>(now() - e.prefix.removal->when).count();
  }
  return e;
}

void Engine::expire_namespaces() {
  // Per-block TTL: the pool stamps a cached block when it becomes idle (release, unpin) with this clock; a hit refs
  // the block, so it cannot expire while used and is re-stamped on release. This runs at the start of each step,
  // before scheduling, so no request is admitted onto a block idle for longer than the TTL. Pinned blocks are not
  // idle (PinTable::expire above unpins expired pins first, which starts their idle time). O(expired).
  cache_.set_now(now());
  if (config_.cache_ttl.count() > 0) cache_.expire_idle(cache_.now() - config_.cache_ttl);
}

}  // namespace preface::engine
