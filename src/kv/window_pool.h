// The blocks of a model's sliding-window layers, kept apart from the other layers' blocks so that rows no query can
// read any more leave the sequences that wrote them (kv::KvStorage with n_window_blocks > 0 stores the windowed
// layers' rows under this pool's block ids; model/base/memory.h).
//
// A query at position p of a layer with window w attends keys p - w + 1 .. p, and every attention path loads whole
// chunks from the one holding the first of them (kernels::attention_first_read). So once a sequence has computed
// positions [0, n), no later query of it loads a row below first_block(n) * block_size. Beside its block table a
// sequence holds a window table with an entry per block of the same positions: this pool's block, or -1 once
// reclaim() gave it back. A given-back block that was registered (under the chain hash its main-pool twin has)
// stays cached: evictable first-come (LRU, the pool's own), and able to serve a hit until allocation reuses it.
//
// A hit at block boundary j * block_size needs, in this pool, the blocks [first_block(j * block_size), j) under the
// prompt's chain hashes; longest_hit() finds the largest such j up to the blocks the main pool matched, so the
// prefix a request resumes from is the longest one both pools agree on (the main pool's blocks beyond it are dropped
// by the caller). Every block holds exactly the rows a cold run writes (rows depend on tokens 0..i only), so a hit is
// bit-identical to a cold run whatever was reclaimed; a hit that would need reclaimed-and-evicted blocks is cut back
// to where the window is still whole, and the rest is recomputed.
//
// Single-threaded (the engine thread), like kv::KvCache, which owns it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "kv/hash.h"

namespace preface::kv {

class WindowPool {
 public:
  // n_blocks blocks of block_size tokens for layers whose widest window is `window` positions (>= 1). Throws
  // preface::Error on non-positive sizes.
  WindowPool(int32_t n_blocks, int32_t block_size, int32_t window);

  int32_t window() const { return window_; }
  int32_t block_size() const { return pool_.block_size(); }
  // The first block a query at position >= n_computed may load (0 while the window reaches position 0).
  int32_t first_block(int32_t n_computed) const;

  // Grows `table` to cover positions [0, n_positions) with fresh blocks (entries below its size are kept). False,
  // with the table unchanged, when the pool cannot supply them.
  bool extend(std::vector<int32_t>& table, int32_t n_positions);
  // Gives back the table's blocks below first_block(n_computed) (entries become -1), oldest first. Returns how many.
  int32_t reclaim(std::vector<int32_t>& table, int32_t n_computed);
  // Gives back every block of the table, back to front, and clears it.
  void release(std::vector<int32_t>& table);

  // Registers the just-filled block under `key` (the main pool's chain hash of the same positions); false when
  // another block already holds the hash (BlockPool::register_block).
  bool register_block(int32_t block_id, const BlockKey& key, std::span<const int32_t> block_tokens) {
    return pool_.register_block(block_id, key, block_tokens);
  }

  // The largest j <= max_blocks such that blocks [first_block(j * block_size), j) are cached under hashes[b] with
  // parent hashes[b - 1] (ns for block 0) and tokens[b * block_size, ...): the hit this pool can serve. 0 always
  // qualifies.
  int32_t longest_hit(const Digest& ns, std::span<const int32_t> tokens, std::span<const Digest> hashes,
                      int32_t max_blocks) const;
  // Takes references on the blocks longest_hit(..) == n_blocks found and makes `table` cover [0, n_blocks):
  // -1 below first_block(n_blocks * block_size), those blocks above.
  void acquire_hit(std::span<const Digest> hashes, int32_t n_blocks, std::vector<int32_t>& table);

  // The pool's bookkeeping (ref counts, cached and free blocks, purges, idle expiry: kv/block_pool.h).
  BlockPool& blocks() { return pool_; }
  const BlockPool& blocks() const { return pool_; }

 private:
  BlockPool pool_;
  int32_t window_;
};

}  // namespace preface::kv
