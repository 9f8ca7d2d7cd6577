// What the prefix cache did for each tenant, over time: the per-tenant cache metrics (Prometheus) and the
// history behind the dashboard (GET /v1/cache/stats, /dashboard). Thread-safe.
//
// Per tenant (a request's tenant is its API key's; "" without keys): requests, requests that hit (cached tokens
// > 0), prompt and completion tokens, tokens read from the cache (cached) and written to it (computed into newly registered
// blocks), prefill FLOPs and seconds saved (engine::RequestStats::saved_flops / saved_seconds), and time to first
// token split by hit and miss. At most kMaxTenants tenants are tracked by name; later ones are summed under
// kOtherTenant, so label cardinality and memory stay bounded.
//
// History: a ring of at most kMaxSamples samples, each the cumulative totals (all tenants, and per tracked tenant)
// plus the pool's occupancy and eviction/expiry counters at that time. A sample is taken when a generation ends or
// the stats are read, at most once per sample interval (so idle periods leave gaps, never lies). Memory: at most
// kMaxSamples x (kMaxTenants + 2) totals, ~2 MiB.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/observability/generation_summary.h"

namespace preface::server {

struct TenantCacheTotals {
  uint64_t n_requests = 0, n_hit_requests = 0;
  uint64_t n_prompt_tokens = 0, n_cached_tokens = 0, n_written_tokens = 0;
  uint64_t n_completion_tokens = 0;  // tokens reported to clients (an end-of-generation token counts)
  double saved_flops = 0, saved_seconds = 0;
  uint64_t n_ttft_hit = 0, n_ttft_miss = 0;  // requests with a first token, by hit / miss
  double ttft_hit_ms = 0, ttft_miss_ms = 0;  // sums of their TTFTs

  void add(const GenerationSummary& s);
  void add(const TenantCacheTotals& o);
  // cached / prompt tokens (0 without prompt tokens).
  double hit_ratio() const;
};

// The pool at one time (global: block counts say nothing of any tenant's content).
struct PoolSample {
  int32_t n_in_use = 0, n_cached = 0, n_pinned = 0, n_free = 0, n_total = 0;
  int64_t n_evictions = 0, n_expired = 0;
  double prefill_tokens_per_s = 0;
  static PoolSample of(const engine::EngineCounters& c);
};

struct CacheSample {
  double t_unix = 0;                                  // seconds since the epoch
  TenantCacheTotals all;
  std::map<std::string, TenantCacheTotals> tenants;  // the tracked tenants (and kOtherTenant)
  PoolSample pool;
};

class CacheStats {
 public:
  static constexpr size_t kMaxTenants = 64;
  static constexpr size_t kMaxSamples = 600;
  static constexpr const char* kOtherTenant = "(other)";

  explicit CacheStats(std::chrono::milliseconds sample_interval = std::chrono::seconds(1))
      : interval_(sample_interval) {}

  // One generation that ended (any outcome), then a sample if the interval passed.
  void on_generation(const std::string& tenant, const GenerationSummary& summary,
                     const engine::EngineCounters& counters);
  // A sample now if the interval passed (the stats endpoint calls it before reading).
  void maybe_sample(const engine::EngineCounters& counters);

  // Totals of one tenant (all tenants: nullopt).
  TenantCacheTotals totals(const std::optional<std::string>& tenant) const;
  // The history as seen by one tenant (nullopt: all), oldest first: {"t", totals fields..., pool fields...}.
  nlohmann::json series_json(const std::optional<std::string>& tenant) const;

  // The engine's registered blocks (Engine::cached_blocks), copied at most once per sample interval and shared by
  // every reader in between, so viewers polling the dashboard never walk the pool more than once a second.
  std::shared_ptr<const std::vector<engine::CachedBlockInfo>> cached_blocks(const engine::Engine& engine);

  // Appends the prefill rate, parameter count and verification counters when `counters` is set (aggregate
  // series, open to every scrape) and, when `with_tenants` (a scrape with the metrics or admin key), the
  // per-tenant families preface_tenant_*{tenant, model_name} (the only place they are rendered: one HELP and
  // one TYPE line each). The tenant "" (API keys off) is not listed: its traffic is the aggregate series'.
  void render_prometheus(const engine::EngineCounters* counters, std::string& out, bool with_tenants,
                         const std::string& model_name) const;

 private:
  void sample_locked(const engine::EngineCounters& counters, std::chrono::steady_clock::time_point now);
  const std::string& bucket(const std::string& tenant) const;  // mu_ held

  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  TenantCacheTotals all_;
  std::map<std::string, TenantCacheTotals> tenants_;
  std::deque<CacheSample> samples_;
  std::optional<std::chrono::steady_clock::time_point> last_sample_;
  std::mutex blocks_mu_;  // taken alone, never with mu_
  std::shared_ptr<const std::vector<engine::CachedBlockInfo>> blocks_;
  std::chrono::steady_clock::time_point blocks_at_{};
};

nlohmann::json totals_json(const TenantCacheTotals& t);

}  // namespace preface::server
