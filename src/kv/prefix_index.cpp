#include "kv/prefix_index.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace preface::kv {

PrefixMatch PrefixIndex::match_counting(const Digest& ns, std::span<const int32_t> tokens, int32_t max_tokens,
                                        std::span<const Digest> hashes, int64_t* n_collisions) const {
  if (max_tokens < 0) throw Error("PrefixIndex::match: max_tokens must be >= 0, got " + std::to_string(max_tokens));
  const size_t block_size = static_cast<size_t>(pool_.block_size());
  const size_t limit = std::min(tokens.size(), static_cast<size_t>(max_tokens));
  const size_t n_full_blocks = limit / block_size;

  PrefixMatch m;
  m.last_hash = ns;
  for (size_t i = 0; i < n_full_blocks; ++i) {
    const auto block = tokens.subspan(i * block_size, block_size);  // [block_size] query block i
    const Digest hash = i < hashes.size() ? hashes[i] : chain_hash(m.last_hash, block);
    const int32_t id = pool_.find(hash);
    if (id < 0) break;
    const auto stored = pool_.block_tokens(id);
    if (pool_.key(id).parent_hash != m.last_hash || !std::equal(stored.begin(), stored.end(), block.begin())) {
      ++*n_collisions;
      break;
    }
    m.block_ids.push_back(id);
    m.last_hash = hash;
  }
  m.n_cached_tokens = static_cast<int32_t>(m.block_ids.size() * block_size);

  // Partial: the child of h_k sharing the longest prefix with the query's next block (lowest id on ties).
  const auto next = tokens.subspan(static_cast<size_t>(m.n_cached_tokens), limit - m.n_cached_tokens);
  // Tokens of block k within the cap. A child equal on all block_size tokens would have been a full hit (same
  // parent and tokens give the same hash), so only block_size - 1 can match with honestly computed hashes.
  const size_t n_next = std::min(next.size(), block_size - 1);
  if (n_next == 0) return m;
  for (const int32_t child : pool_.children_of(m.last_hash)) {
    const auto stored = pool_.block_tokens(child);
    const auto n_common = static_cast<int32_t>(
        std::mismatch(next.begin(), next.begin() + static_cast<ptrdiff_t>(n_next), stored.begin()).first -
        next.begin());
    if (n_common > m.n_partial_tokens) {
      m.n_partial_tokens = n_common;
      m.partial_src_block = child;
    }
  }
  return m;
}

PrefixMatch PrefixIndex::match(const Digest& ns, std::span<const int32_t> tokens, int32_t max_tokens,
                               std::span<const Digest> hashes) const {
  int64_t n_collisions = 0;
  return match_counting(ns, tokens, max_tokens, hashes, &n_collisions);
}

PrefixMatch PrefixIndex::match_and_acquire(const Digest& ns, std::span<const int32_t> tokens, int32_t max_tokens,
                                           std::span<const Digest> hashes) {
  PrefixMatch m = match_counting(ns, tokens, max_tokens, hashes, &stats_.n_collisions);
  pool_.touch(m.block_ids);
  pool_.note_hits(m.block_ids);
  if (m.partial_src_block >= 0) pool_.touch(std::span<const int32_t>(&m.partial_src_block, 1));

  const auto limit = std::min(static_cast<int64_t>(tokens.size()), static_cast<int64_t>(max_tokens));
  stats_.n_queries += 1;
  stats_.n_query_tokens += limit;
  stats_.n_hit_tokens += m.n_cached_tokens;
  stats_.n_partial_hit_tokens += m.n_partial_tokens;
  stats_.n_query_blocks += limit / pool_.block_size();
  stats_.n_hit_blocks += static_cast<int64_t>(m.block_ids.size());
  return m;
}

Digest PrefixIndex::register_full_block(const Digest& ns, int32_t block_id, const Digest& parent_hash,
                                        std::span<const int32_t> block_tokens) {
  if (block_tokens.size() != static_cast<size_t>(pool_.block_size())) {
    throw Error("PrefixIndex::register_full_block: " + std::to_string(block_tokens.size()) +
                " tokens given, block size is " + std::to_string(pool_.block_size()));
  }
  const Digest hash = chain_hash(parent_hash, block_tokens);
  register_full_block(ns, block_id, parent_hash, hash, block_tokens);
  return hash;
}

bool PrefixIndex::register_full_block(const Digest& ns, int32_t block_id, const Digest& parent_hash,
                                      const Digest& hash, std::span<const int32_t> block_tokens) {
  if (block_tokens.size() != static_cast<size_t>(pool_.block_size())) {
    throw Error("PrefixIndex::register_full_block: " + std::to_string(block_tokens.size()) +
                " tokens given, block size is " + std::to_string(pool_.block_size()));
  }
  return pool_.register_block(block_id, BlockKey{hash, parent_hash, ns}, block_tokens);
}

}  // namespace preface::kv
