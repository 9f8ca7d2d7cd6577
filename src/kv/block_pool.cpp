#include "kv/block_pool.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace preface::kv {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_size, std::unique_ptr<EvictionPolicy> policy)
    : block_size_(block_size), policy_(policy ? std::move(policy) : std::make_unique<LruPolicy>()) {
  if (n_blocks < 1 || block_size < 1) {
    throw Error("BlockPool: need n_blocks >= 1 and block_size >= 1, got " + std::to_string(n_blocks) + " and " +
                std::to_string(block_size));
  }
  blocks_.resize(static_cast<size_t>(n_blocks));
  policy_->reset(n_blocks);
  tokens_.assign(static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size), 0);
  hash_to_block_.reserve(static_cast<size_t>(n_blocks));
  parent_to_children_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t id = 0; id < n_blocks; ++id) queue_push_back(id, List::Free);
  n_free_ = n_blocks;
}

void BlockPool::check_id(int32_t block_id, const char* op) const {
  if (block_id < 0 || block_id >= n_blocks()) {
    throw Error(std::string("BlockPool::") + op + ": block id " + std::to_string(block_id) + " out of range [0, " +
                std::to_string(n_blocks()) + ")");
  }
}

int32_t& BlockPool::state_counter(const Block& b) {
  if (b.ref_count > 0) return n_in_use_;
  return b.registered ? n_cached_ : n_free_;
}

void BlockPool::queue_push_front(int32_t block_id, List list) {
  Queue& q = queue_of(list);
  Block& b = blocks_[block_id];
  b.prev_id = -1;
  b.next_id = q.head_id;
  if (q.head_id >= 0) blocks_[q.head_id].prev_id = block_id;
  q.head_id = block_id;
  if (q.tail_id < 0) q.tail_id = block_id;
  b.list = list;
  ++q.n;
}

void BlockPool::queue_push_back(int32_t block_id, List list) {
  Queue& q = queue_of(list);
  Block& b = blocks_[block_id];
  b.next_id = -1;
  b.prev_id = q.tail_id;
  if (q.tail_id >= 0) blocks_[q.tail_id].next_id = block_id;
  q.tail_id = block_id;
  if (q.head_id < 0) q.head_id = block_id;
  b.list = list;
  ++q.n;
  if (list == List::Cached) policy_->add(block_id, ++idle_tick_);
}

void BlockPool::queue_remove(int32_t block_id) {
  Block& b = blocks_[block_id];
  if (b.list == List::Cached) policy_->remove(block_id);
  Queue& q = queue_of(b.list);
  if (b.prev_id >= 0) blocks_[b.prev_id].next_id = b.next_id;
  else q.head_id = b.next_id;
  if (b.next_id >= 0) blocks_[b.next_id].prev_id = b.prev_id;
  else q.tail_id = b.prev_id;
  b.prev_id = b.next_id = -1;
  b.list = List::None;
  --q.n;
}

void BlockPool::enqueue_idle(int32_t block_id) {
  Block& b = blocks_[block_id];
  if (b.registered) {
    b.last_use = now_;
    queue_push_back(block_id, List::Cached);
  } else {
    queue_push_front(block_id, List::Free);
  }
}

void BlockPool::unregister(int32_t block_id, RemovalReason reason) {
  Block& b = blocks_[block_id];
  // Before the key is dropped: the subscriber sees the block as it was (its rows still hold the content).
  static constexpr BlockEventKind kEventOf[] = {BlockEventKind::Evicted, BlockEventKind::Expired,
                                                BlockEventKind::Purged};  // [RemovalReason]
  emit(kEventOf[static_cast<size_t>(reason)], block_id);
  removals_.record(b.key.hash, Removal{reason, now_, n_in_use_});
  --state_counter(b);
  hash_to_block_.erase(b.key.hash);
  auto [first, last] = parent_to_children_.equal_range(b.key.parent_hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == block_id) {
      parent_to_children_.erase(it);
      break;
    }
  }
  b.registered = false;
  b.pin_count = 0;
  ++state_counter(b);
}

std::optional<std::vector<int32_t>> BlockPool::allocate(int32_t n) {
  if (n < 0) throw Error("BlockPool::allocate: negative block count " + std::to_string(n));
  if (n > n_allocatable()) return std::nullopt;
  std::vector<int32_t> ids;  // [n] in free-queue order
  ids.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = free_q_.head_id >= 0 ? free_q_.head_id : policy_->victim();
    queue_remove(id);
    if (blocks_[id].registered) {
      unregister(id, RemovalReason::Evicted);
      ++n_evictions_;
    }
    Block& b = blocks_[id];
    --state_counter(b);
    b.ref_count = 1;
    ++state_counter(b);
    ids.push_back(id);
  }
  return ids;
}

void BlockPool::touch(std::span<const int32_t> block_ids) {
  for (const int32_t id : block_ids) check_id(id, "touch");
  for (const int32_t id : block_ids) {
    Block& b = blocks_[id];
    if (b.list != List::None) queue_remove(id);
    --state_counter(b);
    ++b.ref_count;
    ++state_counter(b);
  }
}

void BlockPool::release(std::span<const int32_t> block_ids) {
  for (const int32_t id : block_ids) {
    check_id(id, "release");
    if (blocks_[id].ref_count == 0) throw Error("BlockPool::release: block " + std::to_string(id) + " is not in use");
  }
  std::vector<int32_t> sorted(block_ids.begin(), block_ids.end());  // [n] duplicate check only
  std::sort(sorted.begin(), sorted.end());
  if (const auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    throw Error("BlockPool::release: block " + std::to_string(*dup) + " listed twice");
  }
  for (auto it = block_ids.rbegin(); it != block_ids.rend(); ++it) {
    Block& b = blocks_[*it];
    --state_counter(b);
    --b.ref_count;
    ++state_counter(b);
    if (b.ref_count > 0 || b.pin_count > 0) continue;
    enqueue_idle(*it);
  }
}

bool BlockPool::register_block(int32_t block_id, const BlockKey& key, std::span<const int32_t> block_tokens) {
  check_id(block_id, "register_block");
  Block& b = blocks_[block_id];
  if (b.ref_count == 0) {
    throw Error("BlockPool::register_block: block " + std::to_string(block_id) + " is not in use");
  }
  if (block_tokens.size() != static_cast<size_t>(block_size_)) {
    throw Error("BlockPool::register_block: block " + std::to_string(block_id) + " given " +
                std::to_string(block_tokens.size()) + " tokens, block size is " + std::to_string(block_size_));
  }
  if (b.registered) {
    if (b.key.hash == key.hash && b.key.parent_hash == key.parent_hash && b.key.root == key.root) return true;
    throw Error("BlockPool::register_block: block " + std::to_string(block_id) + " is already registered as " +
                to_hex(b.key.hash, 16));
  }
  if (hash_to_block_.contains(key.hash)) return false;
  --state_counter(b);
  b.registered = true;
  b.key = key;
  b.registered_at = now_;
  b.hits = 0;
  ++state_counter(b);
  std::copy(block_tokens.begin(), block_tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(block_id) * block_size_);
  hash_to_block_.emplace(key.hash, block_id);
  parent_to_children_.emplace(key.parent_hash, block_id);
  removals_.forget(key.hash);
  emit(BlockEventKind::Registered, block_id);
  return true;
}

void BlockPool::emit(BlockEventKind kind, int32_t block_id) {
  if (sinks_.empty()) return;
  const Block& b = blocks_[block_id];
  const BlockEvent event{kind, block_id, b.key.hash, b.key.parent_hash, b.key.root, block_tokens(block_id)};
  for (BlockEventSink* sink : sinks_) sink->on_block_event(event);
}

void BlockPool::add_event_sink(BlockEventSink* sink) {
  if (sink != nullptr && std::find(sinks_.begin(), sinks_.end(), sink) == sinks_.end()) sinks_.push_back(sink);
}

void BlockPool::remove_event_sink(BlockEventSink* sink) {
  sinks_.erase(std::remove(sinks_.begin(), sinks_.end(), sink), sinks_.end());
}

const char* block_event_name(BlockEventKind k) {
  static constexpr const char* kNames[] = {"registered", "evicted", "expired", "purged"};
  return kNames[static_cast<size_t>(k)];
}

int32_t BlockPool::find(const Digest& hash) const {
  const auto it = hash_to_block_.find(hash);
  return it == hash_to_block_.end() ? -1 : it->second;
}

std::vector<int32_t> BlockPool::children_of(const Digest& parent_hash) const {
  std::vector<int32_t> ids;  // [n_children] ascending
  auto [first, last] = parent_to_children_.equal_range(parent_hash);
  for (auto it = first; it != last; ++it) ids.push_back(it->second);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void BlockPool::pin(int32_t block_id) {
  check_id(block_id, "pin");
  Block& b = blocks_[block_id];
  if (!b.registered) throw Error("BlockPool::pin: block " + std::to_string(block_id) + " holds no registered hash");
  if (b.list != List::None) queue_remove(block_id);
  ++b.pin_count;
}

void BlockPool::unpin(int32_t block_id) {
  check_id(block_id, "unpin");
  Block& b = blocks_[block_id];
  if (b.pin_count == 0) throw Error("BlockPool::unpin: block " + std::to_string(block_id) + " is not pinned");
  if (--b.pin_count == 0 && b.ref_count == 0) enqueue_idle(block_id);
}

int32_t BlockPool::purge_namespace(const Digest& root) {
  int32_t n_purged = 0;
  for (int32_t id = 0; id < n_blocks(); ++id) {
    Block& b = blocks_[id];
    if (!b.registered || b.key.root != root) continue;
    if (b.list != List::None) queue_remove(id);
    unregister(id, RemovalReason::Purged);
    ++n_purged;
    if (b.ref_count == 0) queue_push_front(id, List::Free);
  }
  return n_purged;
}

int32_t BlockPool::expire_idle(TimePoint cutoff) {
  int32_t n_expired = 0;
  // The cached list is ordered by last_use, so the expired blocks are a prefix of it.
  while (cached_q_.head_id >= 0 && blocks_[cached_q_.head_id].last_use <= cutoff) {
    const int32_t id = cached_q_.head_id;
    queue_remove(id);
    unregister(id, RemovalReason::Expired);
    queue_push_front(id, List::Free);
    ++n_expired;
  }
  n_expired_ += n_expired;
  return n_expired;
}

int32_t BlockPool::ref_count(int32_t block_id) const {
  check_id(block_id, "ref_count");
  return blocks_[block_id].ref_count;
}

int64_t BlockPool::hits(int32_t block_id) const {
  check_id(block_id, "hits");
  return blocks_[block_id].hits;
}

BlockPool::TimePoint BlockPool::registered_at(int32_t block_id) const {
  check_id(block_id, "registered_at");
  return blocks_[block_id].registered_at;
}

void BlockPool::note_hits(std::span<const int32_t> block_ids) {
  for (const int32_t id : block_ids) check_id(id, "note_hits");
  for (const int32_t id : block_ids) {
    blocks_[id].hits++;
    policy_->note_hit(id);
  }
}

int32_t BlockPool::pin_count(int32_t block_id) const {
  check_id(block_id, "pin_count");
  return blocks_[block_id].pin_count;
}

bool BlockPool::is_registered(int32_t block_id) const {
  check_id(block_id, "is_registered");
  return blocks_[block_id].registered;
}

const BlockKey& BlockPool::key(int32_t block_id) const {
  check_id(block_id, "key");
  return blocks_[block_id].key;
}

std::span<const int32_t> BlockPool::block_tokens(int32_t block_id) const {
  check_id(block_id, "block_tokens");
  return std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(block_id) * block_size_, block_size_);
}

std::vector<int32_t> BlockPool::free_queue() const {
  std::vector<int32_t> ids;  // [n_allocatable] head first: the free list, then the policy's candidates
  ids.reserve(static_cast<size_t>(n_allocatable()));
  for (int32_t id = free_q_.head_id; id >= 0 && ids.size() <= blocks_.size(); id = blocks_[id].next_id) {
    ids.push_back(id);
  }
  const std::vector<int32_t> cached = policy_->candidates();
  ids.insert(ids.end(), cached.begin(), cached.end());
  return ids;
}

}  // namespace preface::kv
