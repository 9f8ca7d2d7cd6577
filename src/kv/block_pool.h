// Metadata of the paged KV cache: n_blocks preallocated blocks (ids 0 .. n_blocks-1), their ref counts, the
// free queue and the hash map of registered (full, reusable) blocks. No K/V bytes live here (the storage behind
// kv::BlockStorage owns them, indexed by the same block ids). The scheduler never uses this class directly: it
// talks to kv::KvCache (kv/kv_cache.h), which owns the pool, the prefix index and the copy-on-write.
//
// Block states (every block is in exactly one):
//   in use  ref_count > 0                       held by >= 1 sequence; never queued
//   cached  ref_count == 0, registered          reusable by a prefix hit until evicted
//   free    ref_count == 0, not registered      holds nothing reusable
// Free and cached blocks are allocatable, except pinned ones.
//
// Allocation order. The free list (unregistered idle blocks) is used first, head first; then cached blocks are
// evicted in the order the eviction policy names (kv/eviction_policy.h; LRU by default). The pool also keeps the
// cached idle blocks on a cached list in the order they became idle (last_use never decreases from head to tail),
// which --cache-ttl expiry walks; with LRU the policy's order equals that list. free_queue() is the free list
// followed by the policy's candidates.
//   allocate(n)  takes n blocks: free-list head first, then policy victims; a cached block loses its hash (an
//                eviction).
//   release(ids) walks ids back to front (the deepest block of a sequence first). A block reaching ref 0 becomes a
//                policy candidate if registered (with LRU: the tail, so a sequence's prefix outlives its tail), or
//                goes to the free-list head if not (nothing to keep, reuse it first). A registered one is stamped
//                last_use = now().
//   touch(ids)   refs blocks (a prefix hit); a ref-0 block stops being allocatable (O(1) with LRU).
// Pinning (prompt caching with cache_control): pin_count > 0 keeps a registered block out of the queues while its
// ref count is 0, so allocation never evicts it; unpin to 0 makes it a candidate again (stamped now()). Pin
// expiry is the caller's clock: it unpins when the pin expires.
// Idle expiry (--cache-ttl): the pool's clock is set by the caller (set_now, monotonic); expire_idle(cutoff) drops
// the hash of every cached, unreferenced, unpinned block whose last use (release or unpin; a hit refs the block and
// its release re-stamps it) is <= cutoff, walking the cached list from its head: O(expired).
//
// Registration keeps one block per hash: when a hash is already registered to another block, the new block stays
// unregistered (block tables are append-only, so its holder keeps using it; on release it is recycled first).
//
// Events (kv/block_events.h) go to every subscribed sink, in subscription order, synchronously, in the order the
// pool does things.
//
// Single-threaded; kv::KvCache owns the pool. Contract violations by the caller (ids out of range, releasing a
// free block, wrong block length) throw preface::Error and leave the pool unchanged; check_invariants() throws
// std::logic_error when internal state is inconsistent (a bug here).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_events.h"
#include "kv/eviction_policy.h"
#include "kv/hash.h"
#include "kv/removal_log.h"

namespace preface::kv {

// What a registered block is known by.
struct BlockKey {
  Digest hash;         // chain hash h_i of the block
  Digest parent_hash;  // h_{i-1}; equals root for the first block of a sequence
  Digest root;         // namespace digest h_0 of the chain (purge_namespace matches on it)
};

class BlockPool {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Throws preface::Error unless n_blocks >= 1 and block_size >= 1. policy: the eviction order (nullptr: LRU).
  BlockPool(int32_t n_blocks, int32_t block_size, std::unique_ptr<EvictionPolicy> policy = nullptr);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  BlockPool(BlockPool&&) = default;
  BlockPool& operator=(BlockPool&&) = default;

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }  // tokens per block

  // n fresh blocks (ref 1 each), taken from the free-queue head in order, evicting the hashes they held; nullopt
  // (and nothing changes) when fewer than n blocks are allocatable. Never allocates partially.
  std::optional<std::vector<int32_t>> allocate(int32_t n);
  // ref_count += 1 for each id (duplicates count twice); a ref-0 block leaves the free queue.
  void touch(std::span<const int32_t> block_ids);
  // ref_count -= 1 for each id, back to front; see the queue order above. Throws (changing nothing) on an id out of
  // range, a block with ref 0, or a duplicate id.
  void release(std::span<const int32_t> block_ids);

  // Registers an in-use block under key; block_tokens must hold block_size ids. Returns true when registered,
  // false when key.hash is already registered to another block (this one stays unregistered). The hash is
  // trusted: the prefix index computes it; tests pass arbitrary hashes to force collisions. Re-registering a block
  // under its own key returns true; under another key throws.
  bool register_block(int32_t block_id, const BlockKey& key, std::span<const int32_t> block_tokens);

  // The block registered under hash, or -1.
  int32_t find(const Digest& hash) const;
  // Registered blocks whose parent hash is parent_hash, ascending ids (candidates for a partial match).
  std::vector<int32_t> children_of(const Digest& parent_hash) const;

  // pin_count += 1; the block must be registered. A pinned ref-0 block is cached but not allocatable.
  void pin(int32_t block_id);
  // pin_count -= 1 (must be > 0); at 0 with ref 0 the block goes to the free-queue tail.
  void unpin(int32_t block_id);
  // Unregisters every block whose key.root is root and drops its pins; ref-0 ones go to the free-queue head
  // (in ascending id order, so the highest id ends up first). In-use ones keep serving their holders but can no
  // longer be hit. Returns the number of blocks unregistered.
  int32_t purge_namespace(const Digest& root);

  // The time stamped on blocks as they become idle; never moves backwards (an earlier t is ignored).
  void set_now(TimePoint t) { now_ = std::max(now_, t); }
  TimePoint now() const { return now_; }
  // Unregisters every cached (ref 0, unpinned) block whose last use is <= cutoff; they become free blocks at the
  // queue head. Returns how many (also counted in n_expired()).
  int32_t expire_idle(TimePoint cutoff);

  // Per-block metadata; all throw preface::Error on an id out of range.
  int32_t ref_count(int32_t block_id) const;
  int32_t pin_count(int32_t block_id) const;
  bool is_registered(int32_t block_id) const;
  const BlockKey& key(int32_t block_id) const;                  // meaningful only when registered
  std::span<const int32_t> block_tokens(int32_t block_id) const;  // [block_size]; meaningful only when registered
  // Prefix hits served by the block since it was registered (note_hits), and when it was registered (the pool's
  // clock); both meaningful only when registered. For observation (the dashboard's prefix tree), not policy.
  int64_t hits(int32_t block_id) const;
  TimePoint registered_at(int32_t block_id) const;
  // hits += 1 for each id (a prefix hit used these registered blocks).
  void note_hits(std::span<const int32_t> block_ids);

  int32_t n_free() const { return n_free_; }
  int32_t n_cached() const { return n_cached_; }
  int32_t n_in_use() const { return n_in_use_; }
  int32_t n_allocatable() const { return free_q_.n + cached_q_.n; }  // free + cached - pinned cached
  int64_t n_evictions() const { return n_evictions_; }  // hashes dropped by allocate()
  int64_t n_expired() const { return n_expired_; }      // hashes dropped by expire_idle()

  // Subscribes `sink` to registration and removal events (kv/block_events.h), after the sinks already subscribed;
  // it must outlive its subscription. Subscribing a sink twice delivers each event to it once. Sinks must not call
  // back into the pool.
  void add_event_sink(BlockEventSink* sink);
  void remove_event_sink(BlockEventSink* sink);

  const EvictionPolicy& policy() const { return *policy_; }

  // Hashes that left the index (evicted, expired, purged) and when: kv/removal_log.h.
  const RemovalLog& removals() const { return removals_; }

  // The allocation order: the free list, then the policy's candidates (next to be allocated first).
  std::vector<int32_t> free_queue() const;

  // Throws std::logic_error naming the first violated invariant: queue links and membership (ref 0, unpinned
  // <=> queued), the policy's candidates == the cached list's blocks, state counts (free + cached + in use ==
  // n_blocks), pins only on registered blocks, and the hash and children maps pointing exactly at the registered
  // blocks holding those hashes.
  void check_invariants() const;

 private:
  enum class List : uint8_t { None, Free, Cached };  // which queue list a block is on
  struct Block {
    int32_t ref_count = 0;
    int32_t pin_count = 0;
    int32_t prev_id = -1;  // neighbours on its list; -1 = none (also when not queued)
    int32_t next_id = -1;
    List list = List::None;   // Free iff queued and unregistered, Cached iff queued and registered
    bool registered = false;  // key and tokens valid; hash_to_block_[key.hash] == this block
    TimePoint last_use{};     // when it last became idle while registered (release or unpin)
    TimePoint registered_at{};  // now_ when registered
    int64_t hits = 0;           // prefix hits since registered
    BlockKey key;
  };
  struct Queue {
    int32_t head_id = -1;  // -1 when empty
    int32_t tail_id = -1;
    int32_t n = 0;
  };

  void check_id(int32_t block_id, const char* op) const;
  int32_t& state_counter(const Block& b);
  Queue& queue_of(List list) { return list == List::Free ? free_q_ : cached_q_; }
  void queue_push_front(int32_t block_id, List list);
  void queue_push_back(int32_t block_id, List list);
  void queue_remove(int32_t block_id);
  // Puts an idle (ref 0, unpinned) block on the list its registration calls for: cached at the tail, stamped
  // now_; free at the head.
  void enqueue_idle(int32_t block_id);
  void unregister(int32_t block_id, RemovalReason reason);
  void check_queue(const Queue& q, List list) const;
  void emit(BlockEventKind kind, int32_t block_id);

  int32_t block_size_;
  std::vector<Block> blocks_;     // [n_blocks]
  std::vector<int32_t> tokens_;   // [n_blocks][block_size] token ids of registered blocks
  Queue free_q_;                  // unregistered idle blocks
  Queue cached_q_;                // registered idle unpinned blocks, last_use non-decreasing head to tail
  TimePoint now_{};
  int32_t n_free_ = 0;
  int32_t n_cached_ = 0;
  int32_t n_in_use_ = 0;
  int64_t n_evictions_ = 0;
  int64_t n_expired_ = 0;
  RemovalLog removals_;
  std::unique_ptr<EvictionPolicy> policy_;  // candidates == the blocks on cached_q_
  uint64_t idle_tick_ = 0;                  // EvictionPolicy::add's tick
  std::vector<BlockEventSink*> sinks_;      // subscription order
  std::unordered_map<Digest, int32_t, DigestHash> hash_to_block_;          // registered hash -> block id
  std::unordered_multimap<Digest, int32_t, DigestHash> parent_to_children_;  // parent hash -> registered block ids
};

}  // namespace preface::kv
