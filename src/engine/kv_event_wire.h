// KV cache events in vLLM's wire shape (vllm/distributed/kv_events.py), which NVIDIA Dynamo's KV router, SGLang's
// gateway and llm-d's KV-cache indexer consume: one msgpack payload per batch, msgspec "array_like" structs, events
// tagged by class name in their first element:
//
//   KVEventBatch      [ts: float64 (Unix seconds), events: [event...], data_parallel_rank: int (always 0)]
//   BlockStored       ["BlockStored", block_hashes: [h...], parent_block_hash: h | nil, token_ids: [int...],
//                      block_size: int, lora_id: nil, medium: str, lora_name: nil]
//   BlockRemoved      ["BlockRemoved", block_hashes: [h...], medium: str]
//   AllBlocksCleared  ["AllBlocksCleared"]
//
// A hash h is, by KvEventHashFormat, either vLLM's int form (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES:
// int.from_bytes(digest, "big") & (2^64 - 1), i.e. the digest's last 8 bytes read big-endian, an unsigned 64-bit
// msgpack int) or its bytes form (the whole 32-byte SHA-256 digest as msgpack bin). parent_block_hash is nil for a
// chain's first block (its parent is the namespace root, which names no block), as vLLM's is.
// Consecutive Stored records that continue one chain (each one's parent is the previous one's hash) become one
// BlockStored with token_ids the concatenation of their blocks ([n_hashes * block_size]); consecutive removals
// become one BlockRemoved. Trailing fields a consumer does not know are ignored by msgspec's array_like decoding,
// so older consumers (6-field BlockStored) read this too.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv/hash.h"

namespace preface::engine {

enum class KvEventHashFormat : uint8_t { Int, Bytes };

struct KvEventRecord {
  enum class Kind : uint8_t { Stored, Removed, Cleared };
  Kind kind = Kind::Stored;
  kv::Digest hash;               // Stored, Removed
  kv::Digest parent;             // Stored: the parent hash; unused when first_in_chain
  bool first_in_chain = false;   // Stored: parent is the namespace root (sent as nil)
  std::vector<int32_t> tokens;   // Stored: [block_size] the block's token ids
};

struct KvEventWireConfig {
  KvEventHashFormat hash_format = KvEventHashFormat::Int;
  int32_t block_size = 16;
  std::string medium = "GPU";    // vLLM's name for the tier a request computes in (preface's RAM pool)
};

// vLLM's int form of a digest (see above).
uint64_t kv_event_int_hash(const kv::Digest& d);

// The msgpack payload of one KVEventBatch holding `records` in order (coalesced as described above).
std::string encode_kv_event_batch(double ts, std::span<const KvEventRecord> records, const KvEventWireConfig& config);

}  // namespace preface::engine
