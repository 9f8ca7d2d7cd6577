// BlockPool::check_invariants (kv/block_pool.h's invariants), and the queue walk it uses.
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "kv/block_pool.h"

namespace preface::kv {
namespace {

[[noreturn]] void broken(const std::string& what) { throw std::logic_error("BlockPool invariant: " + what); }

}  // namespace

void BlockPool::check_queue(const Queue& q, List list) const {
  // A well-linked list from head to tail; free list: unregistered blocks; cached list: registered blocks with
  // non-decreasing last_use.
  const char* name = list == List::Free ? "free list" : "cached list";
  int32_t n_walked = 0;
  int32_t prev = -1;
  for (int32_t id = q.head_id; id >= 0; id = blocks_[id].next_id) {
    if (id >= n_blocks()) broken(std::string(name) + " link to block " + std::to_string(id) + " out of range");
    if (++n_walked > n_blocks()) broken(std::string(name) + " has a cycle");
    const Block& b = blocks_[id];
    const std::string block = "block " + std::to_string(id);
    if (b.prev_id != prev) broken(block + " prev link is " + std::to_string(b.prev_id));
    if (b.list != list) broken(block + " reachable from the " + name + " but not marked as on it");
    if (b.registered != (list == List::Cached)) broken(block + " registration does not match the " + name);
    if (list == List::Cached && prev >= 0 && blocks_[prev].last_use > b.last_use) {
      broken(block + " was last used before its predecessor on the cached list");
    }
    prev = id;
  }
  if (prev != q.tail_id) {
    broken(std::string(name) + " tail is " + std::to_string(q.tail_id) + ", walk ends at " + std::to_string(prev));
  }
  if (n_walked != q.n) {
    broken(std::string(name) + " walk found " + std::to_string(n_walked) + " blocks, count says " +
           std::to_string(q.n));
  }
}

void BlockPool::check_invariants() const {
  check_queue(free_q_, List::Free);
  check_queue(cached_q_, List::Cached);

  int32_t n_free = 0, n_cached = 0, n_in_use = 0, n_registered = 0, n_queued = 0;
  for (int32_t id = 0; id < n_blocks(); ++id) {
    const Block& b = blocks_[id];
    const std::string name = "block " + std::to_string(id);
    if (b.ref_count < 0 || b.pin_count < 0) broken(name + " has a negative ref or pin count");
    const bool queued = b.list != List::None;
    if (queued != (b.ref_count == 0 && b.pin_count == 0)) {
      broken(name + (queued ? " is queued but referenced or pinned" : " is idle but not queued"));
    }
    if (b.pin_count > 0 && !b.registered) broken(name + " is pinned but not registered");
    n_queued += queued ? 1 : 0;
    if (b.ref_count > 0) ++n_in_use;
    else if (b.registered) ++n_cached;
    else ++n_free;
    if (!b.registered) continue;
    ++n_registered;
    if (find(b.key.hash) != id) broken(name + " is registered but the hash map does not point at it");
    int32_t n_child_entries = 0;
    auto [first, last] = parent_to_children_.equal_range(b.key.parent_hash);
    for (auto it = first; it != last; ++it) n_child_entries += (it->second == id) ? 1 : 0;
    if (n_child_entries != 1) broken(name + " appears " + std::to_string(n_child_entries) + " times as a child");
  }
  if (n_queued != n_allocatable()) broken("queued flags count " + std::to_string(n_queued) + " blocks");
  // The policy's candidates are exactly the cached list's blocks.
  std::vector<int32_t> candidates = policy_->candidates();
  if (policy_->size() != cached_q_.n || static_cast<int32_t>(candidates.size()) != cached_q_.n) {
    broken("eviction policy holds " + std::to_string(policy_->size()) + " candidates, cached list " +
           std::to_string(cached_q_.n));
  }
  std::sort(candidates.begin(), candidates.end());
  for (const int32_t id : candidates) {
    if (id < 0 || id >= n_blocks() || blocks_[id].list != List::Cached) {
      broken("eviction policy names block " + std::to_string(id) + ", which is not on the cached list");
    }
  }
  if (std::adjacent_find(candidates.begin(), candidates.end()) != candidates.end()) {
    broken("eviction policy names a block twice");
  }
  if (n_free != n_free_ || n_cached != n_cached_ || n_in_use != n_in_use_) {
    broken("state counts free/cached/in-use " + std::to_string(n_free_) + "/" + std::to_string(n_cached_) + "/" +
           std::to_string(n_in_use_) + ", recount " + std::to_string(n_free) + "/" + std::to_string(n_cached) + "/" +
           std::to_string(n_in_use));
  }
  if (n_free + n_cached + n_in_use != n_blocks()) broken("free + cached + in use != n_blocks");
  // Every map entry is matched by a registered block above, so equal sizes mean no stale entries.
  if (static_cast<int32_t>(hash_to_block_.size()) != n_registered) {
    broken("hash map has " + std::to_string(hash_to_block_.size()) + " entries for " + std::to_string(n_registered) +
           " registered blocks");
  }
  if (static_cast<int32_t>(parent_to_children_.size()) != n_registered) {
    broken("children map has " + std::to_string(parent_to_children_.size()) + " entries for " +
           std::to_string(n_registered) + " registered blocks");
  }
}

}  // namespace preface::kv
