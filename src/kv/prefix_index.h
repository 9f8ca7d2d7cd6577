// Automatic prefix caching over a BlockPool: finds the longest cached prefix of a prompt and registers blocks as
// they fill. Identity is the hash chain of kv/hash.h rooted at a namespace digest; every hit is confirmed by
// comparing the block's stored token ids and parent hash with the query's, so a hash collision is a miss.
//
// A prompt of n tokens, block_size B, cap max_tokens (the caller passes <= n - 1 so the last prompt token is
// always computed and yields logits); limit = min(n, max_tokens):
//
//   | block 0 | block 1 | ... | block k-1 | next block ........ |
//   |<------ full hits: n_cached_tokens = k*B ->|<- partial ->|      (all within [0, limit))
//
// Full hits are the longest run of registered blocks h_1..h_k. The partial match is the registered child of
// h_k (any block whose parent hash is h_k, cached or in use) sharing the longest token prefix with the query's
// next block, truncated to limit; the caller copies those n_partial_tokens K/V rows into a fresh block
// (copy-on-write) and then releases partial_src_block.
//
// Counters live here (queries and hits); evictions are counted by the pool, which does them.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "kv/hash.h"

namespace preface::kv {

// The scheduler-facing result of a lookup.
struct PrefixMatch {
  std::vector<int32_t> block_ids;   // [k] full-block hits in prompt order; after *_and_acquire, each ref'd once
  int32_t n_cached_tokens = 0;      // k * block_size
  Digest last_hash;                 // h_k: the parent hash for registering block k (the namespace when k == 0)
  int32_t partial_src_block = -1;   // registered block sharing n_partial_tokens with block k; -1 when none.
                                    // After *_and_acquire it is ref'd: release it once its rows are copied.
  int32_t n_partial_tokens = 0;     // 0 <= n < block_size
};

// Why a prompt's cached prefix ends where it does (PrefixIndex::explain). Positions are token indices.
enum class MissReason : uint8_t {
  FullHit,         // every full block below the cap is cached; only the last token(s) are computed
  PartialBlock,    // every full block below the cap is cached; the rest is a block that is not full yet
  NeverSeen,       // block `miss_block` was never registered here (a new or edited prompt)
  Evicted,         // it was, and was evicted (removal: when, blocks in use then)
  Expired,         // it was, and expired (the cache TTL)
  Purged,          // it was, and its namespace was purged
  OtherNamespace,  // absent here, but registered under one of the sibling namespaces the caller offered
};
const char* miss_reason_name(MissReason r);  // "full_hit" | "partial_block" | "never_seen" | "evicted" | ...

struct PrefixExplanation {
  MissReason reason = MissReason::NeverSeen;
  int32_t n_cached_tokens = 0;    // full-block hits + copy-on-write partial tokens (what admission would reuse now)
  int32_t n_full_hit_tokens = 0;  // k * block_size
  int32_t miss_block = -1;        // k: the first full block below the cap that is not cached; -1 with FullHit /
                                  // PartialBlock
  // The first position where this prompt differs from what the namespace holds after the hit prefix: the longest
  // registered child of h_k sharing tokens with block k; cached_token is that child's token there (-1: the cached
  // chain simply ends, e.g. the previous turn's prompt stopped at this block, or the block was removed).
  int32_t diverged_at = -1;
  int32_t cached_token = -1;
  int32_t new_token = -1;         // the prompt's token at diverged_at
  std::optional<Removal> removal; // with Evicted / Expired / Purged
  int32_t sibling = -1;           // with OtherNamespace: the index into the siblings given
};

struct PrefixStats {
  int64_t n_queries = 0;             // match_and_acquire calls
  int64_t n_query_tokens = 0;        // tokens offered for matching, after the max_tokens cap
  int64_t n_hit_tokens = 0;          // tokens served from full-block hits
  int64_t n_partial_hit_tokens = 0;  // tokens served by copy-on-write partial matches
  int64_t n_query_blocks = 0;        // full blocks offered for matching
  int64_t n_hit_blocks = 0;
  int64_t n_collisions = 0;          // hash found but stored tokens or parent differed (treated as a miss)
};

class PrefixIndex {
 public:
  // The pool must outlive the index and stay at the same address.
  explicit PrefixIndex(BlockPool& pool) : pool_(pool) {}
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  // The longest cached prefix of tokens[0, min(size, max_tokens)) under namespace ns. Changes nothing (no refs,
  // no counters). Throws preface::Error when max_tokens < 0. `hashes`: the chain hashes of tokens' full blocks
  // under ns, block 0 first (kv::block_hashes), computed once by the caller; blocks past its end are hashed here.
  PrefixMatch match(const Digest& ns, std::span<const int32_t> tokens, int32_t max_tokens,
                    std::span<const Digest> hashes = {}) const;
  // match() plus pool.touch() of the hits and the partial source, and the counters. Releasing those ids undoes
  // the refs (e.g. when the scheduler cannot allocate the rest of the prompt).
  PrefixMatch match_and_acquire(const Digest& ns, std::span<const int32_t> tokens, int32_t max_tokens,
                                std::span<const Digest> hashes = {});

  // Registers an in-use, just-filled block whose parent hash is parent_hash (ns for the first block) and returns
  // its chain hash, the parent_hash of the following block. When an identical hash is already registered to
  // another block, that one stays and this block remains unregistered (the hash is returned all the same).
  Digest register_full_block(const Digest& ns, int32_t block_id, const Digest& parent_hash,
                             std::span<const int32_t> block_tokens);
  // The same with the block's chain hash already computed (hash == chain_hash(parent_hash, block_tokens), trusted).
  // Returns true when block_id holds hash afterwards (false: another block holds it).
  bool register_full_block(const Digest& ns, int32_t block_id, const Digest& parent_hash, const Digest& hash,
                           std::span<const int32_t> block_tokens);

  // A dry run of match() that says why the cached prefix ends where it does (no refs, no counters). `siblings`:
  // other namespace roots the caller may learn about (the same tenant's other salts; never another tenant's, since
  // a hit there would reveal that tenant's content), checked only when block k is absent from ns.
  PrefixExplanation explain(const Digest& ns, std::span<const int32_t> tokens, int32_t max_tokens,
                            std::span<const Digest> siblings = {}) const;

  const PrefixStats& stats() const { return stats_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

 private:
  // match(), also counting blocks found under the query's hash whose stored parent or tokens differed.
  PrefixMatch match_counting(const Digest& ns, std::span<const int32_t> tokens, int32_t max_tokens,
                             std::span<const Digest> hashes, int64_t* n_collisions) const;

  BlockPool& pool_;
  PrefixStats stats_;
};

}  // namespace preface::kv
