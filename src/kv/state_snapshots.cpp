#include "kv/state_snapshots.h"

#include <stdexcept>
#include <utility>

namespace preface::kv {

void StateSnapshots::erase(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes.size();
  map_.erase(it->hash);
  lru_.erase(it);
}

bool StateSnapshots::put(const Digest& ns, const Digest& hash, std::vector<uint8_t> bytes) {
  if (const auto it = map_.find(hash); it != map_.end()) erase(it->second);
  if (bytes.size() > budget_) return false;
  while (bytes_ + bytes.size() > budget_) {
    erase(std::prev(lru_.end()));
    ++n_evicted_;
  }
  bytes_ += bytes.size();
  lru_.push_front(Entry{hash, ns, std::move(bytes)});
  map_[hash] = lru_.begin();
  return true;
}

const std::vector<uint8_t>* StateSnapshots::get(const Digest& hash) {
  const auto it = map_.find(hash);
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->bytes;
}

int32_t StateSnapshots::purge_namespace(const Digest& ns) {
  int32_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    const auto next = std::next(it);
    if (it->ns == ns) {
      erase(it);
      ++n;
    }
    it = next;
  }
  return n;
}

void StateSnapshots::check_invariants() const {
  uint64_t total = 0;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const auto m = map_.find(it->hash);
    if (m == map_.end() || m->second != it) throw std::logic_error("state snapshots: LRU entry not in the map");
    total += it->bytes.size();
  }
  if (lru_.size() != map_.size()) throw std::logic_error("state snapshots: map and LRU list differ in size");
  if (total != bytes_) throw std::logic_error("state snapshots: byte count differs from the snapshots'");
  if (bytes_ > budget_) throw std::logic_error("state snapshots: over budget");
}

}  // namespace preface::kv
