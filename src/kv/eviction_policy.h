// Which cached block allocation evicts next: a named policy behind a small interface, so LRU (today's order), LFU
// or priority eviction is one class.
//
// The block pool tells the policy which blocks are candidates: a block becomes one when it is cached and idle
// (registered, ref count 0, unpinned: add) and stops being one when it is hit, pinned, unregistered by expiry or
// purge, or evicted (remove). victim() names the candidate to evict next; the pool evicts cached blocks only after
// its free (unregistered) blocks are used up, and only through victim(). note_hit() reports prefix hits (for
// frequency-based policies). The pool keeps its own idle-time order for --cache-ttl expiry, independent of the
// policy.
//
// Contract: the candidate set the policy holds equals the pool's cached idle blocks at all times (the pool's
// check_invariants verifies it through candidates()). Calls are made on the pool's thread only.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace preface::kv {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual std::string_view name() const = 0;
  // Called once, before any other call, with the pool's size (block ids are 0 .. n_blocks - 1).
  virtual void reset(int32_t n_blocks) = 0;
  // block_id became a candidate (it is not one now). `tick` increases with every call to add (the pool's order
  // of idleness), so LRU is "smallest tick first".
  virtual void add(int32_t block_id, uint64_t tick) = 0;
  // block_id stops being a candidate (it is one now).
  virtual void remove(int32_t block_id) = 0;
  // A prefix hit used block_id (it is in use now, so not a candidate).
  virtual void note_hit(int32_t block_id) { (void)block_id; }
  // The candidate to evict next; -1 when there is none.
  virtual int32_t victim() const = 0;
  virtual int32_t size() const = 0;
  // Every candidate in eviction order (victim first). For tests and invariant checks: O(size).
  virtual std::vector<int32_t> candidates() const = 0;
};

// Least recently used: candidates in the order they became idle; the one idle longest is evicted first. An
// intrusive doubly linked list: every operation O(1).
class LruPolicy final : public EvictionPolicy {
 public:
  std::string_view name() const override { return "lru"; }
  void reset(int32_t n_blocks) override;
  void add(int32_t block_id, uint64_t tick) override;
  void remove(int32_t block_id) override;
  int32_t victim() const override { return head_; }
  int32_t size() const override { return n_; }
  std::vector<int32_t> candidates() const override;

 private:
  std::vector<int32_t> prev_, next_;  // [n_blocks] list links; -1 = none
  int32_t head_ = -1, tail_ = -1, n_ = 0;
};

// "lru" -> LruPolicy; nullptr for an unknown name.
std::unique_ptr<EvictionPolicy> make_eviction_policy(std::string_view name);

}  // namespace preface::kv
