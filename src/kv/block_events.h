// What the block pool tells its subscriber when a hash enters or leaves the prefix index: the hook for cache tiers
// below RAM (disk, Redis) and for event publishers. Events are delivered synchronously on the pool's thread, in the
// order the pool does things; a subscriber must not call back into the pool (it may read the block's K/V through
// whoever owns the storage: an Evicted event arrives before the block is handed to its new holder, so its rows
// still hold the evicted content).
#pragma once
#include <cstdint>
#include <span>

#include "kv/hash.h"

namespace preface::kv {

enum class BlockEventKind : uint8_t {
  Registered,  // a full block was registered under its chain hash (it can be hit from now on)
  Evicted,     // allocate() reused a cached block: its hash left the index under memory pressure
  Expired,     // expire_idle(): idle past the cache TTL
  Purged,      // purge_namespace(): its namespace was purged (DELETE /v1/cache)
};
const char* block_event_name(BlockEventKind k);  // "registered" | "evicted" | "expired" | "purged"

struct BlockEvent {
  BlockEventKind kind = BlockEventKind::Registered;
  int32_t block_id = -1;
  Digest hash;                    // chain hash h_i
  Digest parent_hash;             // h_{i-1} (the namespace digest for the first block)
  Digest root;                    // namespace digest h_0
  std::span<const int32_t> tokens;  // [block_size] the block's token ids; valid during the call only
};

class BlockEventSink {
 public:
  virtual ~BlockEventSink() = default;
  virtual void on_block_event(const BlockEvent& event) = 0;
};

}  // namespace preface::kv
