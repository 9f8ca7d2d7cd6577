// KV cache events in vLLM's wire shape (vllm/distributed/kv_events.py), which NVIDIA Dynamo's KV router, SGLang's
// gateway and llm-d's KV-cache indexer consume: one msgpack payload per batch. Two layouts (KvEventLayout):
//
// Vllm (vLLM since June 2026: msgspec structs encoded as maps, events tagged by a "type" key; fields equal to
// their default, None, are left out as vLLM's omit_defaults does):
//   KVEventBatch      {"ts": float64 (Unix seconds), "events": [event...], "data_parallel_rank": 0}
//   BlockStored       {"type": "BlockStored", "block_hashes": [h...], "parent_block_hash": h | nil,
//                      "token_ids": [int...], "block_size": int, "lora_id": nil, "medium": str, "lora_name": nil,
//                      "extra_keys": [["ns:" + 32 hex digits] per block]}
//   BlockRemoved      {"type": "BlockRemoved", "block_hashes": [h...], "medium": str}
//   AllBlocksCleared  {"type": "AllBlocksCleared"}
// extra_keys says which cache namespace (tenant, model, KV types: kv/hash.h) each block is in, as vLLM's entries
// carry a request's cache_salt: the namespace digest's first 16 bytes in hex, which names no tenant or key. Two
// tenants' identical prompts thus differ in extra_keys (and in their hashes), so a router keyed on token ids and
// extra keys does not send one tenant where only the other's blocks are.
//
// VllmLegacy (vLLM before June 2026, msgspec "array_like" structs, tagged by class name in their first element;
// no extra_keys):
//   KVEventBatch      [ts, events, data_parallel_rank]
//   BlockStored       ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
//                      lora_name]
//   BlockRemoved      ["BlockRemoved", block_hashes, medium]
//   AllBlocksCleared  ["AllBlocksCleared"]
//
// A hash h is, by KvEventHashFormat, either vLLM's int form (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES:
// int.from_bytes(digest, "big") & (2^64 - 1), i.e. the digest's last 8 bytes read big-endian, an unsigned 64-bit
// msgpack int) or its bytes form (the whole 32-byte SHA-256 digest as msgpack bin). parent_block_hash is nil for a
// chain's first block (its parent is the namespace root, which names no block), as vLLM's is.
// Consecutive Stored records that continue one chain (each one's parent is the previous one's hash) become one
// BlockStored with token_ids the concatenation of their blocks ([n_hashes * block_size]); consecutive removals
// of one medium become one BlockRemoved. A record's medium is its own when set, else the configured one.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv/hash.h"

namespace preface::engine {

enum class KvEventHashFormat : uint8_t { Int, Bytes };
enum class KvEventLayout : uint8_t { Vllm, VllmLegacy };

struct KvEventRecord {
  enum class Kind : uint8_t { Stored, Removed, Cleared };
  Kind kind = Kind::Stored;
  kv::Digest hash;               // Stored, Removed
  kv::Digest parent;             // Stored: the parent hash; unused when first_in_chain
  bool first_in_chain = false;   // Stored: parent is the namespace root (sent as nil)
  std::vector<int32_t> tokens;   // Stored: [block_size] the block's token ids
  kv::Digest root;               // Stored: the namespace digest (extra_keys)
  std::string medium;            // Stored, Removed: "" = KvEventWireConfig::medium
};

struct KvEventWireConfig {
  KvEventLayout layout = KvEventLayout::Vllm;
  KvEventHashFormat hash_format = KvEventHashFormat::Int;
  int32_t block_size = 16;
  std::string medium = "GPU";    // vLLM's name for the tier a request computes in (preface's RAM pool)
};

// vLLM's int form of a digest (see above).
uint64_t kv_event_int_hash(const kv::Digest& d);
// A namespace's extra key: "ns:" + the digest's first 16 bytes in lower-case hex.
std::string kv_event_namespace_key(const kv::Digest& root);

// The msgpack payload of one KVEventBatch holding `records` in order (coalesced as described above).
std::string encode_kv_event_batch(double ts, std::span<const KvEventRecord> records, const KvEventWireConfig& config);

}  // namespace preface::engine
