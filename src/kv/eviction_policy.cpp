#include "kv/eviction_policy.h"

namespace preface::kv {

void LruPolicy::reset(int32_t n_blocks) {
  prev_.assign(static_cast<size_t>(n_blocks), -1);
  next_.assign(static_cast<size_t>(n_blocks), -1);
  head_ = tail_ = -1;
  n_ = 0;
}

void LruPolicy::add(int32_t block_id, uint64_t /*tick*/) {
  // Ticks arrive in increasing order, so appending keeps the list sorted by tick.
  prev_[block_id] = tail_;
  next_[block_id] = -1;
  if (tail_ >= 0) next_[tail_] = block_id;
  tail_ = block_id;
  if (head_ < 0) head_ = block_id;
  ++n_;
}

void LruPolicy::remove(int32_t block_id) {
  const int32_t p = prev_[block_id], n = next_[block_id];
  if (p >= 0) next_[p] = n;
  else head_ = n;
  if (n >= 0) prev_[n] = p;
  else tail_ = p;
  prev_[block_id] = next_[block_id] = -1;
  --n_;
}

std::vector<int32_t> LruPolicy::candidates() const {
  std::vector<int32_t> ids;  // [n_] victim first
  ids.reserve(static_cast<size_t>(n_));
  for (int32_t id = head_; id >= 0 && ids.size() <= prev_.size(); id = next_[id]) ids.push_back(id);
  return ids;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(std::string_view name) {
  if (name == "lru") return std::make_unique<LruPolicy>();
  return nullptr;
}

}  // namespace preface::kv
