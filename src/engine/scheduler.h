// Decides what runs each step: which sequences, how many tokens each, and which blocks they hold. Owns the
// sequences; reaches the KV cache only through kv::KvCache (lookups with the sequences' precomputed block hashes,
// allocation, copy-on-write of partial hits, registration, release).
//
// Each step, under a token budget:
//   1. running sequences with one token left (decode), oldest first;
//   2. running sequences still prefilling, a chunk each, oldest first;
//   3. waiting sequences in arrival order: look up the cached prefix, take the hit blocks, copy a partial hit into
//      a fresh block, allocate blocks for the first chunk. A sequence whose next uncached block is being computed
//      right now by a running sequence waits for it (so a shared prefix is computed once).
// When the pool cannot supply blocks (after evicting cached ones, which allocation does LRU-first), the youngest
// running sequence not yet scheduled this step is preempted: its blocks are released (full ones stay cached) and
// it goes back to the front of the waiting queue, to resume from whatever prefix is still cached.
//
// Storage whose sliding-window layers have their own pool (kv/window_pool.h): each sequence also holds a window
// table, grown with its block table and cut back after each computed chunk to the blocks its next query can read
// (full blocks are registered in both pools first, so what leaves stays cached). A hit is cut back to the longest
// prefix the window pool can serve (no partial block); running short of window blocks preempts like the main pool.
//
// Models with recurrent layers (the cache has state slots): each running sequence holds a state slot. A hit can only
// resume where a state snapshot exists (kv/state_snapshots.h), so the match is cut back to the longest prefix of
// full blocks whose last one has a snapshot (no partial block) and the snapshot is restored into the slot; without
// one the state starts from zeros at position 0. Snapshots are placed where a later request will resume, each a
// block boundary whose block is registered, filed under that block's hash (kv::SnapshotKind):
//   - breakpoint: each cache pin's prefix (Anthropic cache_control, OpenAI prompt_cache_breakpoint/retention),
//     rounded down to a block;
//   - prompt: the last boundary before the prompt's last token (the same prompt again, or one extending it);
//   - interval: every snapshot_interval tokens of the prompt (a prompt edited past one recomputes less than that);
//   - junction: where a prompt's cached full blocks end with no snapshot (admission had to resume earlier), so the
//     next prompt that shares those blocks and diverges there resumes at the divergence;
//   - reply: each boundary at or past the prompt's end (decode passes one every block), replacing the one this
//     sequence filed before, so a finished request leaves the last boundary of prompt + reply: the next turn of a
//     chat, which re-sends the reply, resumes there.
// A prefill chunk that would cross a prompt point is cut to end there. Each snapshot costs a copy of the state
// (model::MemoryLayout::state_bytes_per_sequence) within the snapshot budget. With tiers below RAM, a snapshot is
// offered to them when filed (a reply snapshot when its sequence ends), and an admission whose cached blocks end
// without one in RAM asks them for the longest they hold (engine/kv_tiers.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/kv_tiers.h"
#include "engine/sequence.h"
#include "kv/kv_cache.h"

namespace preface::engine {

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t n_tokens = 0;  // computes seq->tokens[n_computed, n_computed + n_tokens)
};

class Scheduler {
 public:
  // `cache` must outlive the scheduler.
  // snapshot_interval: tokens between interval snapshots on recurrent models (rounded down to a block, at least
  // one); 0: none.
  Scheduler(kv::KvCache& cache, bool prefix_cache, int32_t max_running, int32_t snapshot_interval = 0);

  // Cache tiers below RAM (nullptr: none): a prompt's first admission loads the blocks past its RAM hits from them.
  void set_tiers(KvTiers* tiers) { tiers_ = tiers; }
  // Hits end at a multiple of `tokens` positions (per-channel keys: kernels::kKvChannelGroup, since a partial
  // block's copied rows must be whole sealed groups); 1 (the default): anywhere.
  void set_hit_granularity(int32_t tokens) { hit_granularity_ = std::max(tokens, 1); }

  void add(std::unique_ptr<Sequence> seq);  // to the back of the waiting queue
  // Plans one step of at most `budget` tokens. The returned sequences hold blocks covering their chunks.
  std::vector<ScheduledChunk> schedule(int32_t budget);
  // After the forward pass: advances n_computed and registers newly full blocks in the prefix index.
  void on_computed(const ScheduledChunk& chunk);
  // Releases a sequence's blocks and forgets it. Returns ownership so the caller can report on it.
  std::unique_ptr<Sequence> remove(Sequence* seq);

  // Every sequence (running first, then waiting), for cancellation checks.
  std::vector<Sequence*> all() const;
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t n_preemptions() const { return n_preemptions_; }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  // The cache's invariants plus: blocks held by sequences == the cache's references, pending counts consistent.
  void check_invariants() const;

 private:
  enum class Admit { Ok, Deferred, NoRoom };
  Admit try_admit(Sequence& seq, int32_t budget, std::vector<ScheduledChunk>& plan);
  // Grows seq's block table to cover n_positions, preempting others if needed. False: seq itself was preempted
  // or (when it is alone) cannot fit.
  bool ensure_blocks(Sequence& seq, int32_t n_positions);
  // The youngest running sequence not planned this step, other than `except`, or nullptr.
  Sequence* pick_victim(const Sequence* except) const;
  void preempt(Sequence& seq);
  void release_blocks(Sequence& seq);  // and the state slot
  // Recurrent models: seq's snapshot points (its first admission) plus a junction at n_junction (0: none); a chunk
  // of n tokens from `from` cut to end at the next point; a lookup's match cut back to the longest prefix ending
  // at a snapshot; the snapshot filed when seq's computed tokens end at a point or, past the prompt, a boundary.
  void plan_snapshots(Sequence& seq, int32_t n_junction) const;
  int32_t chunk_size(const Sequence& seq, int32_t from, int32_t n) const;
  void trim_to_snapshot(const Sequence& seq, std::span<const kv::Digest> hashes, kv::PrefixMatch& match);
  void take_snapshot(Sequence& seq);
  // Tiers below RAM: the snapshot filed at `at` offered to them; the longest of the first n_blocks block
  // boundaries with a snapshot in a tier loaded into RAM (once per sequence; stops at one RAM already has).
  void offer_snapshot(const Sequence& seq, int32_t at);
  void load_snapshot(Sequence& seq, std::span<const kv::Digest> hashes, size_t n_blocks);
  // Window pool: the match cut back to what the window pool serves, its blocks taken into seq's window table; and
  // the window table grown to n_positions, preempting running sequences other than `except` (false: none left).
  void trim_to_window(Sequence& seq, std::span<const kv::Digest> hashes, kv::PrefixMatch& match);
  bool extend_window(Sequence& seq, int32_t n_positions, const Sequence* except);
  // Drops the match's blocks past the first k and its partial hit.
  void cut_match(const Sequence& seq, std::span<const kv::Digest> hashes, kv::PrefixMatch& match, size_t k);
  void release_state_slot(Sequence& seq);
  void check_refs(const kv::BlockPool& pool, std::vector<int32_t> Sequence::*table, const char* what) const;
  void announce_pending(Sequence& seq, int32_t lo);
  void retract_pending(Sequence& seq);

  kv::KvCache& cache_;
  kv::WindowPool* window_;  // cache_.window_pool(): nullptr when the windowed layers share the main pool
  KvTiers* tiers_ = nullptr;
  bool prefix_cache_;
  bool recurrent_;  // the model has State layers: state slots and snapshots
  int32_t snapshot_interval_;  // a multiple of the block size; 0: no interval snapshots
  int32_t max_running_;
  int32_t hit_granularity_ = 1;
  std::vector<std::unique_ptr<Sequence>> owned_;  // every live sequence
  std::vector<Sequence*> running_;                // admission order (oldest first)
  std::deque<Sequence*> waiting_;                 // arrival order; preempted ones go to the front
  std::unordered_map<kv::Digest, int32_t, kv::DigestHash> pending_;  // block hash -> running seqs computing it
  int64_t n_preemptions_ = 0;
  uint64_t step_id_ = 0;                          // Sequence::planned_step == step_id_: in this step's plan
};

}  // namespace preface::engine
