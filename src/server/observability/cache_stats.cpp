#include "server/observability/cache_stats.h"
#include "server/observability/metrics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace preface::server {
namespace {

using nlohmann::json;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string num(double v) { return prometheus_number(v); }
std::string label_value(const std::string& s) { return prometheus_label_value(s); }

// The per-tenant families: name, type, help, value.
struct Family {
  const char* name;
  const char* type;
  const char* help;
  double (*value)(const TenantCacheTotals&);
};
constexpr Family kFamilies[] = {
    {"preface_tenant_requests_total", "counter", "Generations served per tenant.",
     [](const TenantCacheTotals& t) { return double(t.n_requests); }},
    {"preface_tenant_cache_hit_requests_total", "counter", "Generations with at least one cached prompt token.",
     [](const TenantCacheTotals& t) { return double(t.n_hit_requests); }},
    {"preface_tenant_prompt_tokens_total", "counter", "Prompt tokens per tenant.",
     [](const TenantCacheTotals& t) { return double(t.n_prompt_tokens); }},
    {"preface_tenant_completion_tokens_total", "counter", "Completion tokens reported to clients per tenant.",
     [](const TenantCacheTotals& t) { return double(t.n_completion_tokens); }},
    {"preface_tenant_cache_read_tokens_total", "counter", "Prompt tokens read from the prefix cache per tenant.",
     [](const TenantCacheTotals& t) { return double(t.n_cached_tokens); }},
    {"preface_tenant_cache_write_tokens_total", "counter",
     "Prompt tokens computed into newly cached blocks per tenant.",
     [](const TenantCacheTotals& t) { return double(t.n_written_tokens); }},
    {"preface_tenant_cache_saved_flops_total", "counter",
     "Prefill FLOPs skipped thanks to the prefix cache (2 x params x cached tokens) per tenant.",
     [](const TenantCacheTotals& t) { return t.saved_flops; }},
    {"preface_tenant_cache_saved_seconds_total", "counter",
     "Prefill seconds skipped thanks to the prefix cache (cached tokens at the measured prefill rate) per tenant.",
     [](const TenantCacheTotals& t) { return t.saved_seconds; }},
    {"preface_tenant_cache_hit_ratio", "gauge", "Cached / prompt tokens per tenant, since the server started.",
     [](const TenantCacheTotals& t) { return t.hit_ratio(); }},
};

}  // namespace

void TenantCacheTotals::add(const GenerationSummary& s) {
  const engine::RequestStats& st = s.stats;
  const bool hit = st.n_cached_tokens > 0;
  n_requests++;
  n_hit_requests += hit ? 1 : 0;
  n_prompt_tokens += static_cast<uint64_t>(std::max(0, st.n_prompt_tokens));
  n_cached_tokens += static_cast<uint64_t>(std::max(0, st.n_cached_tokens));
  n_written_tokens += static_cast<uint64_t>(std::max(0, st.n_written_tokens));
  n_completion_tokens += static_cast<uint64_t>(std::max(0, s.n_completion_tokens));
  saved_flops += st.saved_flops;
  saved_seconds += st.saved_seconds;
  if (st.n_generated_tokens > 0) {
    (hit ? n_ttft_hit : n_ttft_miss)++;
    (hit ? ttft_hit_ms : ttft_miss_ms) += st.first_token_ms;
  }
}

void TenantCacheTotals::add(const TenantCacheTotals& o) {
  n_requests += o.n_requests;
  n_hit_requests += o.n_hit_requests;
  n_prompt_tokens += o.n_prompt_tokens;
  n_cached_tokens += o.n_cached_tokens;
  n_written_tokens += o.n_written_tokens;
  n_completion_tokens += o.n_completion_tokens;
  saved_flops += o.saved_flops;
  saved_seconds += o.saved_seconds;
  n_ttft_hit += o.n_ttft_hit;
  n_ttft_miss += o.n_ttft_miss;
  ttft_hit_ms += o.ttft_hit_ms;
  ttft_miss_ms += o.ttft_miss_ms;
}

double TenantCacheTotals::hit_ratio() const {
  return n_prompt_tokens > 0 ? static_cast<double>(n_cached_tokens) / static_cast<double>(n_prompt_tokens) : 0.0;
}

PoolSample PoolSample::of(const engine::EngineCounters& c) {
  return {c.n_blocks_in_use, c.n_blocks_cached, c.n_pinned_blocks, c.n_blocks_free, c.n_blocks_total,
          c.n_evictions,     c.n_expired,       c.prefill_tokens_per_s};
}

json totals_json(const TenantCacheTotals& t) {
  return {{"requests", t.n_requests},
          {"hit_requests", t.n_hit_requests},
          {"prompt_tokens", t.n_prompt_tokens},
          {"cached_tokens", t.n_cached_tokens},
          {"written_tokens", t.n_written_tokens},
          {"completion_tokens", t.n_completion_tokens},
          {"hit_ratio", t.hit_ratio()},
          {"saved_flops", t.saved_flops},
          {"saved_seconds", t.saved_seconds},
          {"ttft_hit_count", t.n_ttft_hit},
          {"ttft_hit_ms_sum", t.ttft_hit_ms},
          {"ttft_miss_count", t.n_ttft_miss},
          {"ttft_miss_ms_sum", t.ttft_miss_ms}};
}

const std::string& CacheStats::bucket(const std::string& tenant) const {
  static const std::string other = kOtherTenant;
  if (tenants_.contains(tenant) || tenants_.size() < kMaxTenants) return tenant;
  return other;
}

void CacheStats::on_generation(const std::string& tenant, const GenerationSummary& summary,
                               const engine::EngineCounters& counters) {
  std::lock_guard lock(mu_);
  all_.add(summary);
  tenants_[bucket(tenant)].add(summary);
  sample_locked(counters, std::chrono::steady_clock::now());
}

void CacheStats::maybe_sample(const engine::EngineCounters& counters) {
  std::lock_guard lock(mu_);
  sample_locked(counters, std::chrono::steady_clock::now());
}

void CacheStats::sample_locked(const engine::EngineCounters& counters, std::chrono::steady_clock::time_point now) {
  if (last_sample_ && now - *last_sample_ < interval_) return;
  last_sample_ = now;
  samples_.push_back({unix_seconds(), all_, tenants_, PoolSample::of(counters)});
  while (samples_.size() > kMaxSamples) samples_.pop_front();
}

TenantCacheTotals CacheStats::totals(const std::optional<std::string>& tenant) const {
  std::lock_guard lock(mu_);
  if (!tenant) return all_;
  const auto it = tenants_.find(*tenant);
  return it == tenants_.end() ? TenantCacheTotals{} : it->second;
}

json CacheStats::series_json(const std::optional<std::string>& tenant) const {
  std::lock_guard lock(mu_);
  json out = json::array();
  for (const CacheSample& s : samples_) {
    TenantCacheTotals t = s.all;
    if (tenant) {
      const auto it = s.tenants.find(*tenant);
      t = it == s.tenants.end() ? TenantCacheTotals{} : it->second;
    }
    json j = totals_json(t);
    j["t"] = s.t_unix;
    j["blocks_in_use"] = s.pool.n_in_use;
    j["blocks_cached"] = s.pool.n_cached;
    j["blocks_pinned"] = s.pool.n_pinned;
    j["blocks_free"] = s.pool.n_free;
    j["blocks_total"] = s.pool.n_total;
    j["evictions"] = s.pool.n_evictions;
    j["expired"] = s.pool.n_expired;
    j["prefill_tokens_per_s"] = s.pool.prefill_tokens_per_s;
    out.push_back(std::move(j));
  }
  return out;
}

std::shared_ptr<const std::vector<engine::CachedBlockInfo>> CacheStats::cached_blocks(const engine::Engine& engine) {
  std::lock_guard lock(blocks_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (!blocks_ || now - blocks_at_ >= interval_) {
    blocks_ = std::make_shared<const std::vector<engine::CachedBlockInfo>>(engine.cached_blocks());
    blocks_at_ = now;
  }
  return blocks_;
}

void CacheStats::render_prometheus(const engine::EngineCounters* counters, std::string& out, bool with_tenants,
                                   const std::string& model_name) const {
  if (counters != nullptr) {
    out += "# HELP preface_prefill_tokens_per_second Measured prefill rate (moving average over prefill steps).\n"
           "# TYPE preface_prefill_tokens_per_second gauge\n";
    out += "preface_prefill_tokens_per_second " + num(counters->prefill_tokens_per_s) + "\n";
    out += "# HELP preface_model_parameters Parameters of the served model (the FLOP estimates' n_params).\n"
           "# TYPE preface_model_parameters gauge\n";
    out += "preface_model_parameters " + num(static_cast<double>(counters->n_params)) + "\n";
    out += "# HELP preface_cache_verify_total Cache hits recomputed cold (--verify-fraction), by whether the first "
           "generated position's logits matched bit for bit.\n# TYPE preface_cache_verify_total counter\n";
    out += "preface_cache_verify_total{result=\"match\"} " + num(double(counters->n_verify_match)) + "\n";
    out += "preface_cache_verify_total{result=\"mismatch\"} " + num(double(counters->n_verify_mismatch)) + "\n";
    out += "# HELP preface_cache_verify_pending Verifications waiting for an idle engine.\n"
           "# TYPE preface_cache_verify_pending gauge\n";
    out += "preface_cache_verify_pending " + num(double(counters->n_verify_pending)) + "\n";
    out += "# HELP preface_cache_verify_dropped_total Verifications dropped (queue full, or the shadow failed).\n"
           "# TYPE preface_cache_verify_dropped_total counter\n";
    out += "preface_cache_verify_dropped_total " + num(double(counters->n_verify_dropped)) + "\n";
  }
  if (!with_tenants) return;
  const std::string model_label = ",model_name=\"" + label_value(model_name) + "\"} ";
  std::lock_guard lock(mu_);
  for (const Family& f : kFamilies) {
    out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
    out.append("# TYPE ").append(f.name).append(" ").append(f.type).append("\n");
    for (const auto& [tenant, t] : tenants_) {
      if (tenant.empty()) continue;
      out.append(f.name).append("{tenant=\"").append(label_value(tenant)).append("\"").append(model_label);
      out.append(num(f.value(t))).append("\n");
    }
  }
}

}  // namespace preface::server
