// The engine's cache namespaces: which salts it served (for purging by tenant prefix), the admin purges, and the
// per-block cache TTL (EngineConfig::cache_ttl). Purges take step_mu_, so they never interleave with a step.
#include <algorithm>
#include <unordered_set>

#include "engine/engine.h"

namespace preface::engine {

// Called at submit and again at finish: the bound in expire_namespaces may drop a namespace whose only request is
// still running (it has no registered block yet).
void Engine::note_namespace(const kv::Digest& ns, const std::string& salt) {
  std::lock_guard lock(salts_mu_);
  salts_.try_emplace(ns, salt);
}

int32_t Engine::purge_root_locked(const kv::Digest& root) {
  const int32_t n = pool_.purge_namespace(root);
  pins_.forget_unregistered(pool_);
  return n;
}

int32_t Engine::purge_namespace(const std::string& salt) {
  const kv::Digest root = cache_namespace(salt);
  std::lock_guard step_lock(step_mu_);
  {
    std::lock_guard lock(salts_mu_);
    salts_.erase(root);
  }
  const int32_t n = purge_root_locked(root);
  publish_counters();
  return n;
}

int32_t Engine::purge_salt_prefix(const std::string& salt_prefix) {
  std::lock_guard step_lock(step_mu_);
  std::vector<kv::Digest> roots;
  {
    std::lock_guard lock(salts_mu_);
    for (auto it = salts_.begin(); it != salts_.end();) {
      if (it->second.compare(0, salt_prefix.size(), salt_prefix) == 0) {
        roots.push_back(it->first);
        it = salts_.erase(it);
      } else {
        ++it;
      }
    }
  }
  int32_t n = 0;
  for (const kv::Digest& root : roots) n += purge_root_locked(root);
  publish_counters();
  return n;
}

void Engine::expire_namespaces() {
  // Per-block TTL: the pool stamps a cached block when it becomes idle (release, unpin) with this clock; a hit refs
  // the block, so it cannot expire while used and is re-stamped on release. This runs at the start of each step,
  // before scheduling, so no request is admitted onto a block idle for longer than the TTL. Pinned blocks are not
  // idle (PinTable::expire above unpins expired pins first, which starts their idle time). O(expired).
  const auto t = now();
  pool_.set_now(t);
  if (config_.cache_ttl.count() > 0) pool_.expire_idle(pool_.now() - config_.cache_ttl);

  // Bound salts_ (one entry per distinct salt seen): once it outgrows the pool, drop the namespaces with no
  // registered block left. O(n_blocks + salts), at most once per second of the clock.
  std::lock_guard lock(salts_mu_);
  if (salts_.size() <= static_cast<size_t>(pool_.n_blocks()) * 2 + 64) return;
  if (t < last_expire_scan_ + std::chrono::seconds(1)) return;
  last_expire_scan_ = t;
  std::unordered_set<kv::Digest, kv::DigestHash> live;  // roots holding a registered block
  for (int32_t id = 0; id < pool_.n_blocks(); ++id) {
    if (pool_.is_registered(id)) live.insert(pool_.key(id).root);
  }
  std::erase_if(salts_, [&](const auto& entry) { return !live.contains(entry.first); });
}

}  // namespace preface::engine
