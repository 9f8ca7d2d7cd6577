// The engine's cache namespaces: which salts it served (for purging by tenant prefix), the admin purges, and the
// cache TTL (EngineConfig::cache_ttl). Purges take step_mu_, so they never interleave with a step.
#include <algorithm>

#include "engine/engine.h"

namespace preface::engine {

void Engine::note_namespace(const kv::Digest& ns, const std::string& salt) {
  const auto t = now();
  std::lock_guard lock(salts_mu_);
  auto [it, inserted] = salts_.try_emplace(ns, NamespaceUse{salt, t});
  if (inserted) return;
  if (config_.cache_ttl.count() > 0 && it->second.last_use + config_.cache_ttl <= t) {
    // Expired but not yet purged: keep it stale and force the next step's scan, which runs before this request
    // is admitted, so the request cannot hit what expired.
    last_expire_scan_ = {};
    return;
  }
  it->second.last_use = std::max(it->second.last_use, t);
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
      if (it->second.salt.compare(0, salt_prefix.size(), salt_prefix) == 0) {
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
  const bool ttl = config_.cache_ttl.count() > 0;
  std::vector<kv::Digest> expired;
  {
    std::lock_guard lock(salts_mu_);
    const auto t = now();
    const bool overfull = salts_.size() > static_cast<size_t>(pool_.n_blocks()) * 2 + 64;
    // The scan below is O(n_blocks): at most once per second of the clock unless the map outgrew the pool.
    if (!overfull && (!ttl || t < last_expire_scan_ + std::chrono::seconds(1))) return;
    last_expire_scan_ = t;
    // Roots holding a registered block, and roots holding a pinned one (never expired).
    std::unordered_map<kv::Digest, bool, kv::DigestHash> live;  // root -> has a pinned block
    for (int32_t id = 0; id < pool_.n_blocks(); ++id) {
      if (!pool_.is_registered(id)) continue;
      bool& pinned = live[pool_.key(id).root];
      pinned = pinned || pool_.pin_count(id) > 0;
    }
    for (auto it = salts_.begin(); it != salts_.end();) {
      const auto found = live.find(it->first);
      const bool idle = ttl && it->second.last_use + config_.cache_ttl <= t;
      if (found == live.end()) {
        // Nothing cached. A request still running re-notes its namespace when it finishes.
        it = (!ttl || idle) ? salts_.erase(it) : std::next(it);
      } else if (idle && !found->second) {
        expired.push_back(it->first);
        it = salts_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const kv::Digest& root : expired) purge_root_locked(root);
}

}  // namespace preface::engine
