// A bounded record of chain hashes that left the prefix index, and why, so that a later miss on one of them can be
// explained ("evicted 40 s ago with the pool 98% in use") instead of looking like a prompt never seen.
//
// Bound: at most `capacity` hashes (oldest forgotten first, FIFO); memory_bytes() reports what it holds. A hash
// that is registered again is forgotten (its record no longer explains anything); registered later and removed
// again, it is recorded anew. Single-threaded, owned by the BlockPool (which does every removal).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>

#include "kv/hash.h"

namespace preface::kv {

enum class RemovalReason : uint8_t {
  Evicted,  // its block was reused by allocate() (LRU, under memory pressure)
  Expired,  // idle longer than the cache TTL (expire_idle)
  Purged,   // its namespace was purged (DELETE /v1/cache)
};
const char* removal_reason_name(RemovalReason r);  // "evicted" | "expired" | "purged"

struct Removal {
  RemovalReason reason = RemovalReason::Evicted;
  std::chrono::steady_clock::time_point when{};  // the pool's clock (BlockPool::now) at the removal
  int32_t n_in_use = 0;                          // blocks in use then (the pressure behind an eviction)
};

class RemovalLog {
 public:
  static constexpr size_t kDefaultCapacity = 65536;

  explicit RemovalLog(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  void record(const Digest& hash, const Removal& removal);
  void forget(const Digest& hash);
  std::optional<Removal> find(const Digest& hash) const;

  size_t size() const { return by_hash_.size(); }
  size_t capacity() const { return capacity_; }
  // Approximate heap bytes held (map nodes and the FIFO), for metrics.
  size_t memory_bytes() const;

 private:
  struct Entry {
    Removal removal;
    uint64_t seq = 0;  // matches the FIFO entry that owns it (a forgotten-then-recorded hash has a newer one)
  };
  size_t capacity_;
  uint64_t next_seq_ = 0;
  std::unordered_map<Digest, Entry, DigestHash> by_hash_;
  std::deque<std::pair<Digest, uint64_t>> fifo_;  // oldest first; stale pairs (seq mismatch) are skipped
};

}  // namespace preface::kv
