// The engine's cache tiers below RAM (kv/tier.h): it subscribes to kv::KvCache's block events to feed them, and
// loads a prompt's blocks back from them (through the cache) before prefill.
//
// What goes where:
//   disk   (--cache-dir)  evicted blocks not on disk yet; with write_through also every newly computed block; at
//                         stop() every cached block not on disk yet (an orderly shutdown keeps the whole cache).
//   redis  (--cache-redis) every newly computed block (the shared tier serves other replicas, which can only hit
//                         what was published when it was computed).
// Blocks loaded from a tier are not offered again on registration. Expired blocks are not offloaded (the TTL is a
// retention promise); a purge removes the namespace from every tier.
//
// Lookup (load): the chain continues past the RAM hits on disk, then on Redis (one pipelined round trip), and
// stops at the first block no tier has (or whose record is rejected). The found blocks are written into fresh pool
// blocks through the cache's storage and registered, so admission then finds them as ordinary cached blocks. Exactness:
// a record is the block's K/V bytes (Backend::read_block), checked against the prompt's namespace, chain hash,
// parent and tokens before it is written, so the logits equal those of a recomputed prefix bit for bit.
//
// Recurrent-state snapshots (kv/state_snapshots.h; models with recurrent layers) are records of their own: the
// snapshot at the end of block (parent, tokens) is stored under chain_hash(state_parent(parent), tokens) (a hash no
// block has), with kv type "state" and the payload = its SnapshotKind (1 byte) then the state bytes; the header's
// namespace is the block's, so purges and the model check cover it as for blocks. Every tier gets a snapshot when
// the scheduler files it (a reply snapshot when its request ends), not at eviction: a snapshot stands for
// thousands of tokens of prefill. The scheduler asks for one when a prompt's cached blocks (RAM or loaded) end
// without one: the disk tier at every block boundary it indexes, longest first; Redis for the longest only (one
// round trip).
//
// Runs on the engine thread (events and loads happen inside a step; flush_pool under the step lock).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "kv/block_events.h"
#include "kv/kv_cache.h"
#include "kv/tier.h"

namespace preface::engine {

struct TierConfig {
  std::string disk_dir;               // empty: no disk tier
  uint64_t disk_bytes = 50ull << 30;  // the disk tier's size
  bool write_through = false;         // disk: write blocks when computed, not only when evicted
  bool compress = false;              // zstd (level 1) on the records of every tier
  std::string redis_url;              // empty: no Redis tier
  int redis_ttl_s = 3600;
  uint64_t redis_max_record_bytes = 4u << 20;
  int redis_timeout_ms = 500;
  std::string redis_tls_ca, redis_tls_cert, redis_tls_key;  // rediss:// (kv/redis_tls.h)
  // Seals every record of every tier with AES-256-GCM under this file's key (kv/record_seal.h) and accepts only
  // records sealed under it; empty: records are unsealed, and the tiers' storage must be trusted.
  std::string key_file;
  bool enabled() const { return !disk_dir.empty() || !redis_url.empty(); }
};

class KvTiers final : public kv::BlockEventSink {
 public:
  // Opens the configured tiers (the disk tier scans its directory now). Throws preface::Error on a directory that
  // cannot be created or a malformed Redis URL. `backend` and `cache` must outlive this object, which the caller
  // subscribes to the cache's events (KvCache::add_event_sink).
  KvTiers(const TierConfig& config, const Backend& backend, kv::KvCache& cache);
  ~KvTiers() override;

  void on_block_event(const kv::BlockEvent& event) override;

  // Loads blocks first_block, first_block + 1, ... (at most n_blocks) of a prompt from the tiers into the pool and
  // registers them. hashes: the prompt's chain hashes under ns; tokens: the prompt; held: the RAM hits before
  // first_block (kept referenced meanwhile, so making room cannot evict them). Returns the blocks loaded.
  int32_t load(const kv::Digest& ns, std::span<const int32_t> tokens, std::span<const kv::Digest> hashes,
               int32_t first_block, int32_t n_blocks, std::span<const int32_t> held);

  // Snapshots: offers the one filed in RAM under the hash of the block (parent, tokens) of namespace ns to every
  // tier; loads the one at the end of that block from the tiers into RAM (Redis asked only with ask_redis); true
  // when RAM then holds it.
  void offer_snapshot(const kv::Digest& ns, const kv::Digest& hash, const kv::Digest& parent,
                      std::span<const int32_t> tokens);
  bool load_snapshot(const kv::Digest& ns, const kv::Digest& hash, const kv::Digest& parent,
                     std::span<const int32_t> tokens, bool ask_redis);
  int64_t n_loaded_snapshots() const { return n_loaded_snapshots_; }

  // Shutdown: offers every cached block absent from the disk tier to it, then waits (bounded) for every tier's
  // queue to drain.
  void flush_pool();
  void purge_namespace(const kv::Digest& ns);
  // Reports the disk tier's stores and removals to `sink` (kv::KvTier::set_event_sink); Redis reports none.
  void set_event_sink(kv::TierEventSink* sink) {
    if (disk_) disk_->set_event_sink(sink);
  }
  // "disk" when the disk tier holds (or is writing) a record under hash, else "" (Redis is not asked).
  std::string holder(const kv::Digest& hash) const { return disk_ && disk_->contains(hash) ? "disk" : ""; }
  std::vector<kv::TierStats> stats() const;
  int64_t n_loaded_blocks() const { return n_loaded_blocks_; }

 private:
  kv::RecordMeta meta_of(const kv::Digest& ns, const kv::Digest& hash, const kv::Digest& parent,
                         std::span<const int32_t> tokens) const;
  kv::RecordMeta snapshot_meta_of(const kv::Digest& ns, const kv::Digest& parent, std::span<const int32_t> tokens) const;
  std::shared_ptr<const std::vector<uint8_t>> read(int32_t block_id) const;

  TierConfig config_;
  kv::KvCache& cache_;
  kv::Digest model_;
  std::string kv_type_;
  std::unique_ptr<kv::KvTier> disk_;
  std::unique_ptr<kv::KvTier> redis_;
  bool loading_ = false;  // registrations of loaded blocks are not offered again
  int64_t n_loaded_blocks_ = 0;
  int64_t n_loaded_snapshots_ = 0;
};

// The parent under which a snapshot's record is filed: chain_hash(parent, {-1}), a one-token "block" of an id no
// tokenizer gives, so no block record shares its hash.
kv::Digest state_parent(const kv::Digest& parent);

}  // namespace preface::engine
