#include "engine/pins.h"

#include <algorithm>
#include <vector>

namespace preface::engine {

PinTable::Result PinTable::pin(kv::KvCache& cache, const kv::Digest& hash, const std::string& group, Duration ttl,
                               TimePoint now) {
  if (auto it = pins_.find(hash); it != pins_.end()) {
    it->second.ttl = std::max(it->second.ttl, ttl);
    it->second.expires_at = std::max(it->second.expires_at, now + ttl);
    return Result::Pinned;
  }
  const int32_t block_id = cache.find(hash);
  if (block_id < 0) return Result::NotCached;
  if (n_pinned() >= max_pinned_) return Result::Refused;
  int32_t& held = per_group_[group];
  if (max_per_group_ > 0 && held >= max_per_group_) return Result::Refused;
  cache.pin(block_id);
  ++held;
  pins_.emplace(hash, Pin{block_id, ttl, now + ttl, group});
  return Result::Pinned;
}

void PinTable::drop(std::unordered_map<kv::Digest, Pin, kv::DigestHash>::iterator it) {
  if (auto g = per_group_.find(it->second.group); g != per_group_.end() && --g->second <= 0) per_group_.erase(g);
  pins_.erase(it);
}

void PinTable::touch(const kv::Digest& hash, TimePoint now) {
  if (auto it = pins_.find(hash); it != pins_.end()) {
    it->second.expires_at = std::max(it->second.expires_at, now + it->second.ttl);
  }
}

int32_t PinTable::expire(kv::KvCache& cache, TimePoint now) {
  std::vector<kv::Digest> expired;
  for (const auto& [hash, pin] : pins_) {
    if (pin.expires_at <= now) expired.push_back(hash);
  }
  for (const auto& hash : expired) {
    const auto it = pins_.find(hash);
    cache.unpin(it->second.block_id);
    drop(it);
  }
  return static_cast<int32_t>(expired.size());
}

void PinTable::forget_unregistered(const kv::KvCache& cache) {
  for (auto it = pins_.begin(); it != pins_.end();) {
    if (cache.find(it->first) != it->second.block_id) {
      const auto gone = it++;
      drop(gone);
    } else {
      ++it;
    }
  }
}

}  // namespace preface::engine
