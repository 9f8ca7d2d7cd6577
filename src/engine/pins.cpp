#include "engine/pins.h"

#include <algorithm>
#include <vector>

namespace preface::engine {

void PinTable::pin(kv::BlockPool& pool, const kv::Digest& hash, Duration ttl, TimePoint now) {
  if (auto it = pins_.find(hash); it != pins_.end()) {
    it->second.ttl = std::max(it->second.ttl, ttl);
    it->second.expires_at = std::max(it->second.expires_at, now + ttl);
    return;
  }
  const int32_t block_id = pool.find(hash);
  if (block_id < 0 || n_pinned() >= max_pinned_) return;
  pool.pin(block_id);
  pins_.emplace(hash, Pin{block_id, ttl, now + ttl});
}

void PinTable::touch(const kv::Digest& hash, TimePoint now) {
  if (auto it = pins_.find(hash); it != pins_.end()) {
    it->second.expires_at = std::max(it->second.expires_at, now + it->second.ttl);
  }
}

int32_t PinTable::expire(kv::BlockPool& pool, TimePoint now) {
  std::vector<kv::Digest> expired;
  for (const auto& [hash, pin] : pins_) {
    if (pin.expires_at <= now) expired.push_back(hash);
  }
  for (const auto& hash : expired) {
    pool.unpin(pins_.at(hash).block_id);
    pins_.erase(hash);
  }
  return static_cast<int32_t>(expired.size());
}

void PinTable::forget_unregistered(const kv::BlockPool& pool) {
  for (auto it = pins_.begin(); it != pins_.end();) {
    if (pool.find(it->first) != it->second.block_id) {
      it = pins_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace preface::engine
