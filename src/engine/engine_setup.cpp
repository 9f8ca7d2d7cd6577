// Building an Engine: the CPU backend and its KV budget, the snapshot budget of models with recurrent layers, the
// cache, scheduler, runner and pins over them, and the tiers below RAM; and describe(), what was built.
#include <algorithm>

#include "engine/cpu_backend.h"
#include "engine/engine.h"
#include "model/capacity.h"
#include "util/bytes.h"
#include "util/error.h"

namespace preface::engine {
namespace {

// The windowed layers get a pool of their own unless reclaim is off, the tiers are on (their records hold every
// paged layer of a block) or the model has recurrent layers.
bool split_windows(const model::Model& model, const EngineConfig& c) {
  return c.window_reclaim && !(c.prefix_cache && c.tiers.enabled()) && !model.memory().has_state() &&
         model.memory().can_split_windows();
}

std::unique_ptr<Backend> cpu_backend(model::Model& model, const EngineConfig& c) {
  const uint64_t budget = c.kv_cache_bytes ? c.kv_cache_bytes : default_kv_cache_bytes(model, c);
  // A recurrent state per running sequence.
  const int32_t n_state_slots = model.memory().has_state() ? std::max(c.max_running, 1) : 0;
  const KvPools pools =
      split_windows(model, c)
          ? kv_pools_for_budget(model.memory(), c.kv_format, c.block_size, budget, c.max_running, c.max_batch_tokens)
          : KvPools{kv_blocks_for_budget(model.memory(), c.kv_format, c.block_size, budget), 0};
  return std::make_unique<CpuBackend>(model, c.kv_format, c.block_size, pools.n_blocks, c.n_threads, n_state_slots,
                                      pools.n_window_blocks);
}

// The snapshot budget: as configured, else 256 MiB; at least one snapshot for a model with recurrent layers.
uint64_t snapshot_budget(const EngineConfig& c, const Backend& backend) {
  if (!backend.memory().has_state()) return 0;
  const uint64_t one = backend.memory().state_bytes_per_sequence();
  return std::max(c.state_snapshot_bytes > 0 ? c.state_snapshot_bytes : uint64_t{256} << 20, one);
}

// model::shape_param_count of the model's shape (a Llama-family count: fused or extra tensors of other architectures
// are not seen); 0 when the shape is not one it can count.
uint64_t model_param_count(const model::Config& c) {
  model::KvShape s;
  s.n_layers = c.n_layers;
  s.n_heads = c.n_heads;
  s.n_kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim;
  s.dim = c.dim;
  s.ffn_dim = c.ffn_dim;
  s.n_vocab = c.n_vocab;
  s.tied_embeddings = c.tied_embeddings;
  s.qkv_bias = c.qkv_bias;
  try {
    return model::shape_param_count(s);
  } catch (const Error&) {
    return 0;
  }
}

}  // namespace

uint64_t default_kv_cache_bytes() {
  const uint64_t quarter = mem_available_bytes() / 4;
  return std::clamp<uint64_t>(quarter, 64ull << 20, 8ull << 30);
}

uint64_t default_kv_cache_bytes(const model::Model& model, const EngineConfig& c) {
  const model::MemoryLayout& memory = model.memory();
  const auto n_running = static_cast<uint64_t>(std::max(c.max_running, 1));
  const auto ctx = static_cast<uint64_t>(std::max(model.config().ctx_len, 1));
  const uint64_t per_token = kv_bytes_per_token(memory, c.kv_format);
  uint64_t wanted = per_token * ctx * n_running;
  if (split_windows(model, c)) {
    // The global layers' every position, and the window pool kv_pools_for_budget would make.
    const uint64_t windowed = memory.windowed_bytes_per_token(c.kv_format);
    const auto bs = static_cast<uint64_t>(std::max(c.block_size, 1));
    const uint64_t window_blocks = window_pool_blocks(memory, c.block_size, c.max_running, c.max_batch_tokens);
    wanted = std::min(wanted, (per_token - windowed) * ctx * n_running + windowed * bs * window_blocks);
  }
  return std::min(wanted, default_kv_cache_bytes());
}

Engine::Engine(model::Model& model, const EngineConfig& config) : Engine(cpu_backend(model, config), config) {}

Engine::Engine(std::unique_ptr<Backend> backend, const EngineConfig& config)
    : backend_(std::move(backend)),
      config_(config),
      fingerprint_(backend_->fingerprint()),
      cache_(backend_->n_kv_blocks(), backend_->block_size(), *backend_, nullptr, backend_->n_state_slots(),
             snapshot_budget(config_, *backend_), backend_->n_window_blocks(), backend_->memory().max_window()),
      scheduler_(cache_, config_.prefix_cache, config.max_running, config.state_snapshot_interval),
      runner_(*backend_, std::max(config.max_running, 1)),
      pins_(std::max(1, backend_->n_kv_blocks() / 2), config.max_pinned_blocks_per_group),
      verifier_(config.verify_fraction, config.max_pending_verifications) {
  config_.kv_format = backend_->kv_format();
  config_.block_size = backend_->block_size();
  if (kernels::kv_type_is_per_channel(config_.kv_format.k)) scheduler_.set_hit_granularity(kernels::kKvChannelGroup);
  std::sort(config_.end_of_generation.begin(), config_.end_of_generation.end());
  if (config_.max_batch_tokens < 1 || config_.max_batch_tokens > backend_->max_batch_tokens()) {
    throw Error("max batch tokens must be in [1, " + std::to_string(backend_->max_batch_tokens()) + "], got " +
                std::to_string(config_.max_batch_tokens));
  }
  if (config_.max_running < 1) throw Error("max running sequences must be >= 1");
  rope_desc_ = model::rope_description(backend_->config());
  n_params_ = model_param_count(backend_->config());
  if (config_.prefix_cache && config_.tiers.enabled()) {
    tiers_ = std::make_unique<KvTiers>(config_.tiers, *backend_, cache_);
    cache_.add_event_sink(tiers_.get());
    scheduler_.set_tiers(tiers_.get());
  }
  publish_counters();
}

EngineDescription Engine::describe() const {
  const auto& cfg = backend_->config();
  EngineDescription d{cfg.ctx_len,          cfg.n_vocab,          backend_->block_size(), backend_->n_kv_blocks(),
                      backend_->kv_bytes(), backend_->kv_format(), config_.prefix_cache, cache_.snapshots().budget_bytes()};
  d.n_window_blocks = backend_->n_window_blocks();
  d.window = d.n_window_blocks > 0 ? backend_->memory().max_window() : 0;
  return d;
}

}  // namespace preface::engine
