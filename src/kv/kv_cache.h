// The one door to the KV cache: the scheduler, the engine, pins and the tiers below RAM talk to the cache only
// through KvCache. It owns the block pool (ref counts, free queue, eviction policy) and the prefix index (hash
// chains, matching), and holds the K/V storage behind kv::BlockStorage (owned by the engine's backend), so that
// copy-on-write of a partial hit happens here. It emits block events (kv/block_events.h) to every subscribed sink.
//
// A request's life through the cache (the scheduler's calls):
//   peek(ns, tokens, hashes, cap)         how far the cached prefix reaches now (no refs, no counters)
//   acquire_prefix(ns, tokens, hashes, cap)  the same, with the hit blocks and the partial source ref'd
//   allocate(n) ... abandon(match)        fresh blocks for the rest; abandon drops the lookup's refs when the
//                                         rest does not fit
//   copy_partial(match, fresh block)      copy-on-write of the partial hit's rows; drops the source's ref
//   register_block(...)                   each block as it fills (so concurrent requests share it)
//   release(block table)                  at the end or on preemption: full blocks stay cached
// and, for a model with recurrent-state layers (model::MemoryKind::State), a state slot per running sequence:
//   acquire_state_slot() ... release_state_slot(slot)   with the sequence's first blocks and their release
//   snapshot_state(ns, hash, kind, slot) / restore_state(hash, slot)  the state at a block boundary, filed under that
//                                         block's hash; a hit on such a model resumes only where one exists
// and, for storage whose sliding-window layers have their own block ids (kv/window_pool.h), a window table per
// sequence from window_pool(): its blocks leave the sequence once no query can read them, and a hit is the longest
// prefix the main pool and the window pool agree on.
// `hashes` are the chain hashes of the prompt's full blocks (kv::block_hashes), computed once per sequence by
// the caller; a lookup never re-hashes a block it is given.
//
// Invariants (check_invariants): every block is exactly one of free / in use / cached; queued <=> ref 0 and
// unpinned; the eviction policy's candidates are exactly the cached idle blocks; the hash and children maps
// point exactly at the registered blocks; every state slot is exactly one of free / held. Ref counts equal the
// holders' references (the scheduler checks that against its block tables).
//
// Single-threaded: the engine thread, or under the engine's step lock. Events are delivered synchronously, in the
// order the cache does things, to each sink in subscription order; a sink must not call back into the cache
// (it may read the block's bytes through storage(): an Evicted event arrives before the block is reused).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kv/block_events.h"
#include "kv/block_pool.h"
#include "kv/block_storage.h"
#include "kv/eviction_policy.h"
#include "kv/hash.h"
#include "kv/prefix_index.h"
#include "kv/state_slots.h"
#include "kv/state_snapshots.h"
#include "kv/window_pool.h"

namespace preface::kv {

class KvCache {
 public:
  using TimePoint = BlockPool::TimePoint;

  // n_blocks blocks of block_size tokens over `storage` (which must outlive the cache and hold at least n_blocks
  // blocks, and n_state_slots state slots per state layer). policy: the eviction order (nullptr: LRU). Throws
  // preface::Error on non-positive sizes or a negative slot count.
  KvCache(int32_t n_blocks, int32_t block_size, BlockStorage& storage,
          std::unique_ptr<EvictionPolicy> policy = nullptr, int32_t n_state_slots = 0,
          uint64_t snapshot_budget_bytes = 0, int32_t n_window_blocks = 0, int32_t window = 0);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int32_t n_blocks() const { return pool_.n_blocks(); }
  int32_t block_size() const { return pool_.block_size(); }
  BlockStorage& storage() { return storage_; }
  const BlockStorage& storage() const { return storage_; }

  // Lookups (kv/prefix_index.h for the match's shape). cap: tokens[0, cap) may be served from the cache.
  PrefixMatch peek(const Digest& ns, std::span<const int32_t> tokens, std::span<const Digest> hashes,
                   int32_t cap) const;
  PrefixMatch acquire_prefix(const Digest& ns, std::span<const int32_t> tokens, std::span<const Digest> hashes,
                             int32_t cap);
  // Drops the refs acquire_prefix took (the hits and the partial source).
  void abandon(const PrefixMatch& match);
  // Copy-on-write: copies the match's n_partial_tokens rows of partial_src_block into dst_block (a fresh block the
  // caller holds), then drops the lookup's ref on the source, also when the copy throws. No-op without a partial.
  void copy_partial(const PrefixMatch& match, int32_t dst_block);

  // Blocks (kv/block_pool.h for the order): n fresh blocks or nullopt; refs; releases, back to front.
  std::optional<std::vector<int32_t>> allocate(int32_t n) { return pool_.allocate(n); }
  void acquire(std::span<const int32_t> block_ids) { pool_.touch(block_ids); }
  void release(std::span<const int32_t> block_ids) { pool_.release(block_ids); }
  int32_t n_allocatable() const { return pool_.n_allocatable(); }

  // State slots (kv/state_slots.h): the lowest free slot or nullopt; release throws std::logic_error for a slot
  // not held. A cache without state slots (the model has no state layers) never gives one.
  std::optional<int32_t> acquire_state_slot() { return state_slots_.acquire(); }
  void release_state_slot(int32_t slot) { state_slots_.release(slot); }
  const StateSlots& state_slots() const { return state_slots_; }

  // State snapshots (kv/state_snapshots.h): the slot's state (storage().read_state) filed under the hash of the
  // full block it ends, as a snapshot of `kind`; false when it does not fit the budget. restore_state writes the
  // snapshot under hash into slot; false when there is none. drop_snapshot forgets the one under hash, if any.
  bool snapshot_state(const Digest& ns, const Digest& hash, SnapshotKind kind, int32_t slot);
  bool restore_state(const Digest& hash, int32_t slot);
  bool has_snapshot(const Digest& hash) const { return snapshots_.contains(hash); }
  void drop_snapshot(const Digest& hash) { snapshots_.erase(hash); }
  // A snapshot read back from a tier below RAM (engine/kv_tiers.h): bytes must be storage().state_bytes() long.
  bool store_snapshot(const Digest& ns, const Digest& hash, SnapshotKind kind, std::vector<uint8_t> bytes) {
    return bytes.size() == storage_.state_bytes() && snapshots_.put(ns, hash, kind, std::move(bytes));
  }
  const StateSnapshots& snapshots() const { return snapshots_; }

  // Registers the in-use, just-filled block_id under hash (= chain_hash(parent_hash, tokens), trusted; parent_hash
  // is ns for block 0). True when block_id holds hash afterwards; false when another block already does (this
  // one stays unregistered and is recycled first on release).
  bool register_block(const Digest& ns, int32_t block_id, const Digest& parent_hash, const Digest& hash,
                      std::span<const int32_t> block_tokens);

  // The sliding-window layers' pool, or nullptr when they share the main pool's blocks (n_window_blocks == 0).
  // Purges and idle expiry below reach it too; pins and events are the main pool's alone.
  WindowPool* window_pool() { return window_ ? &*window_ : nullptr; }
  const WindowPool* window_pool() const { return window_ ? &*window_ : nullptr; }

  // Pins (engine/pins.h), purges, idle expiry: kv/block_pool.h.
  int32_t find(const Digest& hash) const { return pool_.find(hash); }
  void pin(int32_t block_id) { pool_.pin(block_id); }
  void unpin(int32_t block_id) { pool_.unpin(block_id); }
  int32_t purge_namespace(const Digest& root);  // the namespace's blocks and state snapshots
  void set_now(TimePoint t) {
    pool_.set_now(t);
    if (window_) window_->blocks().set_now(t);
  }
  TimePoint now() const { return pool_.now(); }
  int32_t expire_idle(TimePoint cutoff) {  // returns the main pool's count
    if (window_) window_->blocks().expire_idle(cutoff);
    return pool_.expire_idle(cutoff);
  }

  // Subscribes `sink` after those already subscribed (tiers, metrics, event publishers); it must outlive its
  // subscription. Subscribing twice delivers once.
  void add_event_sink(BlockEventSink* sink) { pool_.add_event_sink(sink); }
  void remove_event_sink(BlockEventSink* sink) { pool_.remove_event_sink(sink); }

  // Observation: a dry run of the lookup that says why it stops (kv/prefix_index.h), counters, per-block state.
  PrefixExplanation explain(const Digest& ns, std::span<const int32_t> tokens, int32_t cap,
                            std::span<const Digest> siblings = {}) const {
    return index_.explain(ns, tokens, cap, siblings);
  }
  const PrefixStats& stats() const { return index_.stats(); }
  const BlockPool& blocks() const { return pool_; }
  const EvictionPolicy& policy() const { return pool_.policy(); }

  // Throws std::logic_error naming the first violated invariant (see above).
  void check_invariants() const {
    pool_.check_invariants();
    if (window_) window_->blocks().check_invariants();
    state_slots_.check_invariants();
    snapshots_.check_invariants();
  }

 private:
  BlockPool pool_;
  PrefixIndex index_;  // over pool_
  BlockStorage& storage_;
  StateSlots state_slots_;
  StateSnapshots snapshots_;
  std::optional<WindowPool> window_;
};

}  // namespace preface::kv
