#include "engine/kv_tiers.h"

#include <chrono>
#include <optional>

#include "kv/disk_tier.h"
#include "kv/redis_tier.h"

namespace preface::engine {

KvTiers::KvTiers(const TierConfig& config, const Backend& backend, kv::KvCache& cache)
    : config_(config),
      cache_(cache),
      model_(kv::model_digest(backend.fingerprint())),
      kv_type_(backend.kv_format().name()) {
  const auto compression = config.compress ? kv::Compression::Zstd : kv::Compression::None;
  std::shared_ptr<const kv::RecordKey> key;
  if (!config.key_file.empty()) key = std::make_shared<const kv::RecordKey>(kv::RecordKey::from_file(config.key_file));
  if (!config.disk_dir.empty()) {
    kv::DiskTierOptions o;
    o.dir = config.disk_dir;
    o.max_bytes = config.disk_bytes;
    o.compression = compression;
    o.model = model_;
    o.kv_type = kv_type_;
    o.key = key;
    disk_ = std::make_unique<kv::DiskTier>(o);
  }
  if (!config.redis_url.empty()) {
    kv::RedisTierOptions o;
    o.url = config.redis_url;
    o.ttl_s = config.redis_ttl_s;
    o.max_record_bytes = config.redis_max_record_bytes;
    o.timeout_ms = config.redis_timeout_ms;
    o.tls = {config.redis_tls_ca, config.redis_tls_cert, config.redis_tls_key};
    o.compression = compression;
    o.model = model_;
    o.key = key;
    redis_ = std::make_unique<kv::RedisTier>(o);
  }
}

KvTiers::~KvTiers() = default;

kv::RecordMeta KvTiers::meta_of(const kv::Digest& ns, const kv::Digest& hash, const kv::Digest& parent,
                                std::span<const int32_t> tokens) const {
  kv::RecordMeta m;
  m.ns = ns;
  m.hash = hash;
  m.parent = parent;
  m.model = model_;
  m.kv_type = kv_type_;
  m.block_size = cache_.block_size();
  m.tokens.assign(tokens.begin(), tokens.end());
  m.payload_bytes = cache_.storage().block_bytes();
  return m;
}

kv::Digest state_parent(const kv::Digest& parent) {
  const int32_t marker = -1;
  return kv::chain_hash(parent, std::span<const int32_t>(&marker, 1));
}

kv::RecordMeta KvTiers::snapshot_meta_of(const kv::Digest& ns, const kv::Digest& parent,
                                         std::span<const int32_t> tokens) const {
  const kv::Digest p = state_parent(parent);
  kv::RecordMeta m = meta_of(ns, kv::chain_hash(p, tokens), p, tokens);
  m.kv_type = "state";
  m.payload_bytes = 1 + cache_.storage().state_bytes();
  return m;
}

void KvTiers::offer_snapshot(const kv::Digest& ns, const kv::Digest& hash, const kv::Digest& parent,
                             std::span<const int32_t> tokens) {
  const std::vector<uint8_t>* state = cache_.snapshots().peek(hash);
  const std::optional<kv::SnapshotKind> kind = cache_.snapshots().kind_of(hash);
  if (state == nullptr || !kind) return;
  const kv::RecordMeta meta = snapshot_meta_of(ns, parent, tokens);
  auto payload = std::make_shared<std::vector<uint8_t>>();
  payload->reserve(1 + state->size());
  payload->push_back(static_cast<uint8_t>(*kind));
  payload->insert(payload->end(), state->begin(), state->end());
  if (disk_ && !disk_->contains(meta.hash)) disk_->offer(meta, payload);
  if (redis_) redis_->offer(meta, payload);
}

bool KvTiers::load_snapshot(const kv::Digest& ns, const kv::Digest& hash, const kv::Digest& parent,
                            std::span<const int32_t> tokens, bool ask_redis) {
  const kv::RecordMeta meta = snapshot_meta_of(ns, parent, tokens);
  std::vector<std::vector<uint8_t>> got;
  if (disk_ && disk_->contains(meta.hash)) got = disk_->fetch(std::span<const kv::RecordMeta>(&meta, 1));
  if (got.empty() && redis_ && ask_redis) got = redis_->fetch(std::span<const kv::RecordMeta>(&meta, 1));
  // A record that passed its checks has the right length; its kind byte is checked here.
  if (got.empty() || got[0].empty() || got[0][0] >= kv::kSnapshotKinds) return false;
  const auto kind = static_cast<kv::SnapshotKind>(got[0][0]);
  std::vector<uint8_t> state(got[0].begin() + 1, got[0].end());
  if (!cache_.store_snapshot(ns, hash, kind, std::move(state))) return false;
  ++n_loaded_snapshots_;
  return true;
}

std::shared_ptr<const std::vector<uint8_t>> KvTiers::read(int32_t block_id) const {
  auto payload = std::make_shared<std::vector<uint8_t>>(cache_.storage().block_bytes());
  cache_.storage().read_block(block_id, *payload);
  return payload;
}

void KvTiers::on_block_event(const kv::BlockEvent& e) {
  const bool to_disk =
      disk_ && (e.kind == kv::BlockEventKind::Evicted ||
                (e.kind == kv::BlockEventKind::Registered && config_.write_through && !loading_)) &&
      !disk_->contains(e.hash);
  const bool to_redis = redis_ && e.kind == kv::BlockEventKind::Registered && !loading_;
  if (!to_disk && !to_redis) return;
  const kv::RecordMeta meta = meta_of(e.root, e.hash, e.parent_hash, e.tokens);
  std::shared_ptr<const std::vector<uint8_t>> payload;
  try {
    payload = read(e.block_id);
  } catch (const std::exception&) {
    return;  // a backend that cannot read a block offloads nothing; the cache in RAM is unaffected
  }
  if (to_disk) disk_->offer(meta, payload);
  if (to_redis) redis_->offer(meta, payload);
}

int32_t KvTiers::load(const kv::Digest& ns, std::span<const int32_t> tokens, std::span<const kv::Digest> hashes,
                      int32_t first_block, int32_t n_blocks, std::span<const int32_t> held) {
  const int32_t block_size = cache_.block_size();
  std::vector<kv::RecordMeta> expect;  // [n_blocks]
  for (int32_t b = first_block; b < first_block + n_blocks; ++b) {
    expect.push_back(meta_of(ns, hashes[static_cast<size_t>(b)], b == 0 ? ns : hashes[static_cast<size_t>(b) - 1],
                             tokens.subspan(static_cast<size_t>(b) * block_size, block_size)));
  }
  std::vector<std::vector<uint8_t>> payloads;
  for (kv::KvTier* tier : {disk_.get(), redis_.get()}) {
    if (tier == nullptr || payloads.size() == expect.size()) continue;
    auto more = tier->fetch(std::span<const kv::RecordMeta>(expect).subspan(payloads.size()));
    for (auto& p : more) payloads.push_back(std::move(p));
  }
  if (payloads.empty()) return 0;

  cache_.acquire(held);  // making room below must not evict the prompt's RAM hits
  const auto n = std::min<int32_t>(static_cast<int32_t>(payloads.size()), cache_.n_allocatable());
  std::vector<int32_t> fresh = cache_.allocate(n).value_or(std::vector<int32_t>{});
  int32_t n_loaded = 0;
  loading_ = true;
  try {
    for (; n_loaded < static_cast<int32_t>(fresh.size()); ++n_loaded) {
      const kv::RecordMeta& m = expect[static_cast<size_t>(n_loaded)];
      const int32_t id = fresh[static_cast<size_t>(n_loaded)];
      cache_.storage().write_block(id, payloads[static_cast<size_t>(n_loaded)]);
      if (!cache_.register_block(ns, id, m.parent, m.hash, m.tokens)) {
        break;  // the hash is registered meanwhile (cannot happen within one step; a chain stops at a gap anyway)
      }
    }
  } catch (const std::exception&) {  // a backend write failed: what was registered stays, the rest is recycled
  }
  loading_ = false;
  std::vector<int32_t> release(held.begin(), held.end());
  release.insert(release.end(), fresh.begin(), fresh.end());
  cache_.release(release);
  n_loaded_blocks_ += n_loaded;
  return n_loaded;
}

void KvTiers::flush_pool() {
  if (disk_) {
    // In batches the write queue holds, within a deadline: a shutdown is bounded even with a large pool.
    constexpr uint64_t kBatchBytes = 64u << 20;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    uint64_t n_batch_bytes = 0;
    const kv::BlockPool& pool = cache_.blocks();
    for (int32_t id = 0; id < pool.n_blocks() && std::chrono::steady_clock::now() < deadline; ++id) {
      if (!pool.is_registered(id)) continue;
      const kv::BlockKey& k = pool.key(id);
      if (disk_->contains(k.hash)) continue;
      kv::BlockEvent e{kv::BlockEventKind::Evicted, id, k.hash, k.parent_hash, k.root, pool.block_tokens(id)};
      on_block_event(e);
      if ((n_batch_bytes += cache_.storage().block_bytes()) >= kBatchBytes) {
        disk_->flush(10000);
        n_batch_bytes = 0;
      }
    }
  }
  for (kv::KvTier* tier : {disk_.get(), redis_.get()}) {
    if (tier != nullptr) tier->flush(10000);
  }
}

void KvTiers::purge_namespace(const kv::Digest& ns) {
  for (kv::KvTier* tier : {disk_.get(), redis_.get()}) {
    if (tier != nullptr) tier->purge_namespace(ns);
  }
}

std::vector<kv::TierStats> KvTiers::stats() const {
  std::vector<kv::TierStats> out;
  for (const kv::KvTier* tier : {disk_.get(), redis_.get()}) {
    if (tier != nullptr) out.push_back(tier->stats());
  }
  return out;
}

}  // namespace preface::engine
