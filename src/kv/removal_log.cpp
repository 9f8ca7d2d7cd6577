#include "kv/removal_log.h"

namespace preface::kv {

const char* removal_reason_name(RemovalReason r) {
  switch (r) {
    case RemovalReason::Evicted: return "evicted";
    case RemovalReason::Expired: return "expired";
    case RemovalReason::Purged: return "purged";
  }
  return "evicted";
}

void RemovalLog::record(const Digest& hash, const Removal& removal) {
  if (capacity_ == 0) return;
  const uint64_t seq = next_seq_++;
  by_hash_[hash] = Entry{removal, seq};
  fifo_.emplace_back(hash, seq);
  // Drop the oldest live records beyond capacity; stale FIFO pairs (forgotten or re-recorded hashes) go with them,
  // so the FIFO holds at most capacity live pairs plus the stale ones in front of them.
  while (by_hash_.size() > capacity_ || (!fifo_.empty() && fifo_.size() > 2 * capacity_)) {
    const auto [old, old_seq] = fifo_.front();
    fifo_.pop_front();
    const auto it = by_hash_.find(old);
    if (it != by_hash_.end() && it->second.seq == old_seq) by_hash_.erase(it);
  }
}

void RemovalLog::forget(const Digest& hash) { by_hash_.erase(hash); }

std::optional<Removal> RemovalLog::find(const Digest& hash) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second.removal;
}

size_t RemovalLog::memory_bytes() const {
  // An unordered_map node holds the pair and a next pointer (plus the cached hash in libstdc++); buckets are one
  // pointer each.
  const size_t node = sizeof(std::pair<const Digest, Entry>) + 2 * sizeof(void*);
  return by_hash_.size() * node + by_hash_.bucket_count() * sizeof(void*) +
         fifo_.size() * sizeof(std::pair<Digest, uint64_t>);
}

}  // namespace preface::kv
