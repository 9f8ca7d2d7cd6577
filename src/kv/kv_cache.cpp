#include "kv/kv_cache.h"

#include <utility>

#include "util/error.h"

namespace preface::kv {

void BlockStorage::read_state(int32_t, std::span<uint8_t>) const { throw Error("this storage holds no state"); }
void BlockStorage::write_state(int32_t, std::span<const uint8_t>) { throw Error("this storage holds no state"); }

KvCache::KvCache(int32_t n_blocks, int32_t block_size, BlockStorage& storage, std::unique_ptr<EvictionPolicy> policy,
                 int32_t n_state_slots, uint64_t snapshot_budget_bytes, int32_t n_window_blocks, int32_t window)
    : pool_(n_blocks, block_size, std::move(policy)),
      index_(pool_),
      storage_(storage),
      state_slots_(n_state_slots),
      snapshots_(snapshot_budget_bytes) {
  if (n_window_blocks > 0) window_.emplace(n_window_blocks, block_size, window);
}

bool KvCache::snapshot_state(const Digest& ns, const Digest& hash, SnapshotKind kind, int32_t slot) {
  std::vector<uint8_t> bytes(storage_.state_bytes());
  storage_.read_state(slot, bytes);
  return snapshots_.put(ns, hash, kind, std::move(bytes));
}

bool KvCache::restore_state(const Digest& hash, int32_t slot) {
  const std::vector<uint8_t>* bytes = snapshots_.get(hash);
  if (bytes == nullptr) return false;
  storage_.write_state(slot, *bytes);
  return true;
}

int32_t KvCache::purge_namespace(const Digest& root) {
  snapshots_.purge_namespace(root);
  if (window_) window_->blocks().purge_namespace(root);
  return pool_.purge_namespace(root);
}

PrefixMatch KvCache::peek(const Digest& ns, std::span<const int32_t> tokens, std::span<const Digest> hashes,
                          int32_t cap) const {
  return index_.match(ns, tokens, cap, hashes);
}

PrefixMatch KvCache::acquire_prefix(const Digest& ns, std::span<const int32_t> tokens,
                                    std::span<const Digest> hashes, int32_t cap) {
  return index_.match_and_acquire(ns, tokens, cap, hashes);
}

void KvCache::abandon(const PrefixMatch& match) {
  std::vector<int32_t> refs = match.block_ids;  // [k (+1)] prompt order, the partial source last
  if (match.partial_src_block >= 0) refs.push_back(match.partial_src_block);
  pool_.release(refs);
}

void KvCache::copy_partial(const PrefixMatch& match, int32_t dst_block) {
  const int32_t src = match.partial_src_block;
  if (src < 0) return;
  try {
    storage_.copy_block_rows(src, dst_block, match.n_partial_tokens);
  } catch (...) {  // the lookup's reference on src is the caller's alone to drop; dst stays with the caller
    pool_.release(std::span<const int32_t>(&src, 1));
    throw;
  }
  pool_.release(std::span<const int32_t>(&src, 1));
}

bool KvCache::register_block(const Digest& ns, int32_t block_id, const Digest& parent_hash, const Digest& hash,
                             std::span<const int32_t> block_tokens) {
  return index_.register_full_block(ns, block_id, parent_hash, hash, block_tokens);
}

}  // namespace preface::kv
