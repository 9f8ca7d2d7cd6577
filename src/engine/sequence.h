// One request inside the engine. A sequence has two counters, not phases: tokens known (prompt + generated so far)
// and tokens computed (K/V present in its blocks). Prefill, chunked prefill, cache hits and decode are all "compute
// tokens[n_computed, size) a chunk at a time"; when a chunk reaches the end, the logits of the last token are
// sampled and the new token is appended.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "kv/hash.h"
#include "kv/state_snapshots.h"

namespace preface::engine {

using Clock = std::chrono::steady_clock;

// Models with recurrent layers: a prompt position (a multiple of the block size) where the scheduler files a state
// snapshot, and why (engine/scheduler.h).
struct SnapshotPoint {
  int32_t pos = 0;
  kv::SnapshotKind kind = kv::SnapshotKind::Prompt;
};

struct Sequence {
  Sequence(uint64_t id_, RequestParams params_, std::shared_ptr<RequestStream> stream_)
      : id(id_), params(std::move(params_)), stream(std::move(stream_)), sampler(params.sampling) {
    if (params.constraint) matcher.emplace(params.constraint, params.constraint_strip_space);
  }

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_remaining() const { return n_tokens() - n_computed; }  // tokens still to compute (>= 1 while alive)

  uint64_t id;
  RequestParams params;
  std::shared_ptr<RequestStream> stream;
  Sampler sampler;                      // lives across preemption: the RNG stream continues
  std::optional<grammar::Matcher> matcher;  // params.constraint's state after the generated tokens
  kv::Digest ns;                        // cache namespace h_0
  // The chain hashes of tokens' full blocks under ns, block 0 first, each computed once (kv::KvCache lookups take
  // them, so an admission attempt never re-hashes a prompt): the prompt's at submit, a generated block's when
  // block_hashes() first sees it full. Hashes never change: tokens only grow.
  std::span<const kv::Digest> block_hashes(int32_t block_size) {
    if (hashes.empty()) n_prompt_blocks = n_prompt / block_size;
    for (size_t b = hashes.size(); (b + 1) * static_cast<size_t>(block_size) <= tokens.size(); ++b) {
      const std::span<const int32_t> block(tokens.data() + b * static_cast<size_t>(block_size),
                                           static_cast<size_t>(block_size));
      hashes.push_back(kv::chain_hash(b == 0 ? ns : hashes[b - 1], block));
    }
    return hashes;
  }
  // [n_prompt / block_size] the prompt's block hashes; empty until block_hashes() ran (never without a prefix cache).
  std::span<const kv::Digest> prompt_hashes() const {
    return std::span<const kv::Digest>(hashes).first(static_cast<size_t>(n_prompt_blocks));
  }
  std::vector<kv::Digest> hashes;       // [blocks hashed so far] see block_hashes()
  int32_t n_prompt_blocks = 0;          // n_prompt / block_size once block_hashes() ran, else 0

  std::vector<int32_t> tokens;          // [n_prompt + n_generated]
  int32_t n_prompt = 0;
  int32_t n_computed = 0;               // tokens[0, n_computed) have K/V in block_table
  int32_t max_total_tokens = 0;         // generation stops (Length) when tokens reach this (context / pool cap)
  std::vector<int32_t> block_table;     // physical block ids; covers positions [0, n_computed) and the chunk
  // With a window pool (kv/window_pool.h): that pool's blocks of the same positions, -1 where given back.
  std::vector<int32_t> window_table;
  int32_t state_slot = -1;              // the recurrent-state slot held while running (models with State layers)
  // Per-channel keys: the f32 K rows of the positions of the last unsealed group below n_computed
  // (model::ForwardBatch::open_keys; ModelRunner sizes it). A hit ends where a group does, so after one nothing
  // here is read.
  std::vector<float> open_keys;
  // Recurrent models with a prefix cache: the prompt's snapshot points, ascending positions (set at the first
  // admission; a junction may be added at a later one), and where the reply snapshot this sequence filed last lies
  // (replaced as decode passes each block boundary; 0: none).
  std::vector<SnapshotPoint> snapshot_points;
  bool snapshot_points_set = false;
  int32_t reply_snapshot_at = 0;
  bool state_tiers_checked = false;     // the cache tiers were asked for a snapshot where the cached blocks end
  int32_t n_hashed_blocks = 0;          // leading full blocks offered to the prefix index
  kv::Digest last_hash;                 // chain hash of block n_hashed_blocks - 1 (ns when none)
  int32_t n_hit_blocks = 0;             // leading blocks that came from the cache at the latest admission
  int32_t n_partial_rows = 0;           // rows of block n_hit_blocks copied from a cached block at admission
  int32_t n_prompt_logits = 0;          // prompt positions whose logits were recorded (params.prompt_logits)
  int32_t pending_lo = 0, pending_hi = 0;  // prompt_hashes()[lo, hi) are announced as being computed by this seq

  bool running = false;
  uint64_t planned_step = 0;            // the scheduler step that last planned this sequence
  bool admitted_once = false;
  bool tiers_checked = false;           // the cache tiers below RAM were asked for this prompt's blocks
  bool hits_touched = false;            // pins of the blocks hit at first admission were refreshed
  RequestStats stats;
  Clock::time_point t_submit, t_first_scheduled, t_first_token;
};

}  // namespace preface::engine
