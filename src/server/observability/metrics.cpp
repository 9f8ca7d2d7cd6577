#include "server/observability/metrics.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace preface::server {

std::string prometheus_number(double v) {
  char buf[32];
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v > -1e15 && v < 1e15) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    return buf;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

namespace {

std::string fmt(double v) { return prometheus_number(v); }

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, const std::string& name, double value, const std::string& labels = {}) {
  out.append(name);
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(fmt(value)).append("\n");
}

}  // namespace

std::string prometheus_label_value(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

namespace {

std::string label_value(const std::string& v) { return prometheus_label_value(v); }

void single(std::string& out, const std::string& name, const char* type, const char* help, double value) {
  header(out, name, type, help);
  sample(out, name, value);
}

// The cache tiers below RAM (engine/kv_tiers.h), labelled tier="disk" | "redis"; nothing without tiers.
void render_tier_metrics(std::string& out, const engine::EngineCounters& c) {
  if (c.tiers.empty()) return;
  using Field = int64_t kv::TierStats::*;
  struct Counter {
    const char* name;
    const char* help;
    Field field;
  };
  static constexpr Counter kCounters[] = {
      {"preface_kv_tier_lookup_blocks_total", "Blocks looked up in a cache tier below RAM.",
       &kv::TierStats::n_lookup_blocks},
      {"preface_kv_tier_hit_blocks_total", "Blocks a cache tier returned (loaded into the pool).",
       &kv::TierStats::n_hit_blocks},
      {"preface_kv_tier_miss_blocks_total", "Blocks looked up that a cache tier did not return.",
       &kv::TierStats::n_miss_blocks},
      {"preface_kv_tier_read_bytes_total", "Record bytes read from a cache tier.", &kv::TierStats::n_read_bytes},
      {"preface_kv_tier_written_bytes_total", "Record bytes written to a cache tier.", &kv::TierStats::n_written_bytes},
      {"preface_kv_tier_written_records_total", "Block records written to a cache tier.",
       &kv::TierStats::n_written_records},
      {"preface_kv_tier_dropped_writes_total",
       "Block records not written: queue full, tier unavailable, or over the record size cap.",
       &kv::TierStats::n_dropped_writes},
      {"preface_kv_tier_errors_total", "I/O and server errors of a cache tier (each a miss or a dropped write).",
       &kv::TierStats::n_errors},
      {"preface_kv_tier_loads_total", "Lookups that loaded at least one block from a cache tier.",
       &kv::TierStats::n_fetches},
  };
  for (const Counter& k : kCounters) {
    header(out, k.name, "counter", k.help);
    for (const kv::TierStats& t : c.tiers) sample(out, k.name, static_cast<double>(t.*k.field), "tier=\"" + t.name + "\"");
  }
  header(out, "preface_kv_tier_load_seconds_total", "counter", "Time spent in the lookups counted by loads_total.");
  for (const kv::TierStats& t : c.tiers) {
    sample(out, "preface_kv_tier_load_seconds_total", t.fetch_seconds, "tier=\"" + t.name + "\"");
  }
  header(out, "preface_kv_tier_rejected_records_total", "counter",
         "Records a cache tier refused to serve (torn, corrupt, another model or layout, not the expected block).");
  for (const kv::TierStats& t : c.tiers) {
    for (size_t r = 1; r < kv::kRecordStatusCount; ++r) {
      sample(out, "preface_kv_tier_rejected_records_total", static_cast<double>(t.n_rejected[r]),
             "tier=\"" + t.name + "\",reason=\"" + kv::record_status_name(static_cast<kv::RecordStatus>(r)) + "\"");
    }
  }
  header(out, "preface_kv_tier_up", "gauge",
         "1 while a cache tier answers, 0 from a failed connection or command until one succeeds (redis).");
  for (const kv::TierStats& t : c.tiers) sample(out, "preface_kv_tier_up", t.up, "tier=\"" + t.name + "\"");
  header(out, "preface_kv_tier_stored", "gauge", "Records and bytes a cache tier holds (disk only).");
  for (const kv::TierStats& t : c.tiers) {
    if (t.n_records < 0) continue;
    sample(out, "preface_kv_tier_stored", static_cast<double>(t.n_records), "tier=\"" + t.name + "\",unit=\"records\"");
    sample(out, "preface_kv_tier_stored", static_cast<double>(t.n_stored_bytes), "tier=\"" + t.name + "\",unit=\"bytes\"");
  }
  single(out, "preface_kv_tier_loaded_blocks_total", "counter", "Blocks loaded from the cache tiers into the pool.",
         static_cast<double>(c.n_tier_loaded_blocks));
  single(out, "preface_kv_tier_loaded_snapshots_total", "counter",
         "Recurrent-state snapshots loaded from the cache tiers (models with recurrent layers).",
         static_cast<double>(c.n_tier_loaded_snapshots));
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += value;
  count_++;
}

void Histogram::render(const std::string& name, std::string& out, const std::string& labels) const {
  const std::string more = labels.empty() ? "" : "," + labels;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    sample(out, name + "_bucket", static_cast<double>(cumulative), "le=\"" + fmt(bounds_[i]) + "\"" + more);
  }
  sample(out, name + "_bucket", static_cast<double>(count_), "le=\"+Inf\"" + more);
  sample(out, name + "_sum", sum_, labels);
  sample(out, name + "_count", static_cast<double>(count_), labels);
}

Metrics::Metrics()
    : ttft_s_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      inter_token_s_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      e2e_s_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      queue_s_({0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60}) {}

void Metrics::on_response(const std::string& route, int status) {
  std::lock_guard lock(mu_);
  responses_[{route, status}]++;
}

void Metrics::on_generation(const GenerationSummary& s) {
  std::lock_guard lock(mu_);
  n_generations_++;
  n_completion_tokens_ += static_cast<uint64_t>(s.n_completion_tokens);
  n_cached_tokens_ += static_cast<uint64_t>(s.stats.n_cached_tokens);
  n_written_tokens_ += static_cast<uint64_t>(s.stats.n_written_tokens);
  finish_reasons_[stop_kind_names(s.kind).label]++;
  if (s.stats.n_generated_tokens > 0) ttft_s_.observe(s.stats.first_token_ms / 1e3);
  for (const float gap : s.inter_token_s) inter_token_s_.observe(gap);
  e2e_s_.observe(s.stats.total_ms / 1e3);
  queue_s_.observe(s.stats.queue_ms / 1e3);
}

void Metrics::render_vllm(std::string& out, const engine::EngineCounters& c, const std::string& model_name) const {
  const std::string label = "model_name=\"" + label_value(model_name) + "\"";
  header(out, "preface_model_info", "gauge", "1, labelled with the served model's name.");
  sample(out, "preface_model_info", 1, label);
  struct Scalar {
    const char* name;
    const char* type;
    const char* help;
    double value;
  };
  const Scalar scalars[] = {
      {"vllm:num_requests_running", "gauge", "Requests running in the engine (alias of preface_requests_running).",
       static_cast<double>(c.n_running)},
      {"vllm:num_requests_waiting", "gauge", "Requests queued in the engine (alias of preface_requests_waiting).",
       static_cast<double>(c.n_waiting)},
      {"vllm:kv_cache_usage_perc", "gauge", "Fraction of KV blocks held by requests, 0..1 (preface_kv_usage_ratio).",
       c.n_blocks_total > 0 ? static_cast<double>(c.n_blocks_in_use) / c.n_blocks_total : 0.0},
      {"vllm:prefix_cache_queries_total", "counter", "Prompt tokens offered to prefix-cache lookups.",
       static_cast<double>(c.prefix.n_query_tokens)},
      {"vllm:prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.",
       static_cast<double>(c.prefix.n_hit_tokens + c.prefix.n_partial_hit_tokens)},
      {"vllm:prompt_tokens_total", "counter", "Prompt tokens admitted by the engine.",
       static_cast<double>(c.n_prompt_tokens)},
      {"vllm:generation_tokens_total", "counter", "Tokens sampled by the engine.",
       static_cast<double>(c.n_generated_tokens)},
      {"vllm:num_preemptions_total", "counter", "Running requests preempted for lack of KV blocks.",
       static_cast<double>(c.n_preemptions)},
  };
  for (const Scalar& k : scalars) {
    header(out, k.name, k.type, k.help);
    sample(out, k.name, k.value, label);
  }
  std::lock_guard lock(mu_);
  header(out, "vllm:request_success_total", "counter", "Generations served, by how they ended.");
  for (const auto& [reason, n] : finish_reasons_) {
    sample(out, "vllm:request_success_total", static_cast<double>(n), "finished_reason=\"" + reason + "\"," + label);
  }
  struct Hist {
    const char* name;
    const char* help;
    const Histogram Metrics::*histogram;
  };
  static constexpr Hist kHistograms[] = {
      {"vllm:time_to_first_token_seconds", "Time from submission to the first token.", &Metrics::ttft_s_},
      {"vllm:e2e_request_latency_seconds", "Time from submission to the end of generation.", &Metrics::e2e_s_},
      {"vllm:inter_token_latency_seconds", "Time between consecutive tokens of a request.", &Metrics::inter_token_s_},
      {"vllm:request_queue_time_seconds", "Time from submission to first scheduling.", &Metrics::queue_s_},
  };
  for (const Hist& h : kHistograms) {
    header(out, h.name, "histogram", h.help);
    (this->*h.histogram).render(h.name, out, label);
  }
}

bool Metrics::check_kv_invariants(const engine::Engine& engine) {
  try {
    engine.check_invariants();
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "preface: KV cache invariants violated: %s\n", e.what());
    return false;
  }
}

std::string Metrics::render(const engine::EngineCounters* c, int32_t n_in_flight,
                            std::optional<bool> kv_invariants_ok) const {
  std::string out;
  single(out, "preface_model_loaded", "gauge", "1 once the model is loaded and requests are served.",
         c != nullptr ? 1 : 0);
  single(out, "preface_requests_in_flight", "gauge", "Generation requests being served over HTTP.", n_in_flight);
  std::lock_guard lock(mu_);
  header(out, "preface_http_responses_total", "counter", "HTTP responses by route and status code.");
  for (const auto& [key, n] : responses_) {
    sample(out, "preface_http_responses_total", static_cast<double>(n),
           "route=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"");
  }
  header(out, "preface_generations_total", "counter", "Generations served, by how they ended.");
  for (const auto& [reason, n] : finish_reasons_) {
    sample(out, "preface_generations_total", static_cast<double>(n), "finish=\"" + reason + "\"");
  }
  single(out, "preface_completion_tokens_total", "counter", "Completion tokens reported to clients.",
         static_cast<double>(n_completion_tokens_));
  single(out, "preface_prompt_tokens_cached_total", "counter",
         "Prompt tokens whose K/V came from the prefix cache, summed over requests.",
         static_cast<double>(n_cached_tokens_));
  single(out, "preface_prompt_tokens_written_total", "counter",
         "Prompt tokens computed into newly cached blocks, summed over requests.",
         static_cast<double>(n_written_tokens_));
  header(out, "preface_time_to_first_token_seconds", "histogram", "Time from submission to the first token.");
  ttft_s_.render("preface_time_to_first_token_seconds", out);
  header(out, "preface_inter_token_latency_seconds", "histogram", "Time between consecutive tokens of a request.");
  inter_token_s_.render("preface_inter_token_latency_seconds", out);
  header(out, "preface_request_duration_seconds", "histogram", "Time from submission to the end of generation.");
  e2e_s_.render("preface_request_duration_seconds", out);
  header(out, "preface_request_queue_seconds", "histogram", "Time from submission to first scheduling.");
  queue_s_.render("preface_request_queue_seconds", out);
  if (c == nullptr) return out;

  single(out, "preface_engine_requests_total", "counter", "Requests submitted to the engine.",
         static_cast<double>(c->n_requests));
  single(out, "preface_engine_requests_finished_total", "counter", "Requests the engine finished.",
         static_cast<double>(c->n_requests_finished));
  single(out, "preface_prompt_tokens_total", "counter", "Prompt tokens admitted by the engine.",
         static_cast<double>(c->n_prompt_tokens));
  single(out, "preface_generation_tokens_total", "counter", "Tokens sampled by the engine.",
         static_cast<double>(c->n_generated_tokens));
  single(out, "preface_prefix_cache_queries_total", "counter", "Prefix-cache lookups.",
         static_cast<double>(c->prefix.n_queries));
  single(out, "preface_prefix_cache_queries_tokens_total", "counter", "Prompt tokens offered to prefix-cache lookups.",
         static_cast<double>(c->prefix.n_query_tokens));
  single(out, "preface_prefix_cache_hits_tokens_total", "counter",
         "Prompt tokens served from the prefix cache (full blocks and copy-on-write partial blocks).",
         static_cast<double>(c->prefix.n_hit_tokens + c->prefix.n_partial_hit_tokens));
  single(out, "preface_prefix_cache_partial_hits_tokens_total", "counter",
         "Prompt tokens served by copying rows of a partially matching cached block.",
         static_cast<double>(c->prefix.n_partial_hit_tokens));
  single(out, "preface_prefix_cache_collisions_total", "counter", "Hash matches whose tokens differed (misses).",
         static_cast<double>(c->prefix.n_collisions));
  header(out, "preface_kv_blocks", "gauge", "KV cache blocks by state (used: held by requests; cached: idle, "
                                            "reusable, evictable; free: empty).");
  sample(out, "preface_kv_blocks", c->n_blocks_in_use, "state=\"used\"");
  sample(out, "preface_kv_blocks", c->n_blocks_cached, "state=\"cached\"");
  sample(out, "preface_kv_blocks", c->n_blocks_free, "state=\"free\"");
  single(out, "preface_kv_blocks_capacity", "gauge", "KV cache blocks in the pool.", c->n_blocks_total);
  if (c->n_window_blocks_total > 0) {
    header(out, "preface_kv_window_blocks", "gauge",
           "Blocks of the sliding-window layers' own pool by state (used: inside a running sequence's window; cached: "
           "left the window, reusable, evictable; free: empty).");
    sample(out, "preface_kv_window_blocks", c->n_window_blocks_in_use, "state=\"used\"");
    sample(out, "preface_kv_window_blocks", c->n_window_blocks_cached, "state=\"cached\"");
    sample(out, "preface_kv_window_blocks", c->n_window_blocks_free, "state=\"free\"");
    single(out, "preface_kv_window_blocks_capacity", "gauge", "Blocks in the sliding-window layers' pool.",
           c->n_window_blocks_total);
  }
  single(out, "preface_kv_blocks_pinned", "gauge", "Cached blocks pinned by cache_control until their TTL passes.",
         c->n_pinned_blocks);
  header(out, "preface_state_snapshots", "gauge",
         "Recurrent-state snapshots held for prefix hits on models with recurrent layers (qwen35), and their bytes.");
  sample(out, "preface_state_snapshots", static_cast<double>(c->n_state_snapshots), "unit=\"snapshots\"");
  sample(out, "preface_state_snapshots", static_cast<double>(c->state_snapshot_bytes), "unit=\"bytes\"");
  single(out, "preface_state_snapshots_evicted_total", "counter",
         "Recurrent-state snapshots dropped to stay within --state-cache-mem.",
         static_cast<double>(c->n_state_snapshots_evicted));
  header(out, "preface_state_snapshots_taken_total", "counter",
         "Recurrent-state snapshots filed, by where they were placed (breakpoint, prompt, reply, interval, junction).");
  for (size_t k = 0; k < kv::kSnapshotKinds; ++k) {
    sample(out, "preface_state_snapshots_taken_total", static_cast<double>(c->n_state_snapshots_taken[k]),
           std::string("kind=\"") + kv::snapshot_kind_name(static_cast<kv::SnapshotKind>(k)) + "\"");
  }
  header(out, "preface_state_snapshot_hits_total", "counter",
         "Prefix hits on models with recurrent layers, by the kind of snapshot they resumed from.");
  for (size_t k = 0; k < kv::kSnapshotKinds; ++k) {
    sample(out, "preface_state_snapshot_hits_total", static_cast<double>(c->n_state_snapshot_hits[k]),
           std::string("kind=\"") + kv::snapshot_kind_name(static_cast<kv::SnapshotKind>(k)) + "\"");
  }
  if (kv_invariants_ok) {
    single(out, "preface_kv_invariants_ok", "gauge",
           "1 when the KV block pool's and scheduler's invariants held at this scrape, else 0.",
           *kv_invariants_ok ? 1 : 0);
  }
  single(out, "preface_kv_usage_ratio", "gauge", "Fraction of KV blocks held by requests.",
         c->n_blocks_total > 0 ? static_cast<double>(c->n_blocks_in_use) / c->n_blocks_total : 0.0);
  single(out, "preface_kv_evictions_total", "counter", "Cached blocks evicted to make room.",
         static_cast<double>(c->n_evictions));
  single(out, "preface_kv_expired_total", "counter", "Cached blocks dropped after --cache-ttl seconds unused.",
         static_cast<double>(c->n_expired));
  single(out, "preface_cache_removal_records", "gauge",
         "Hashes of removed blocks remembered so the cache explainer can name an eviction or expiry (bounded).",
         static_cast<double>(c->n_removal_records));
  single(out, "preface_cache_removal_record_bytes", "gauge", "Memory held by those records.",
         static_cast<double>(c->removal_record_bytes));
  single(out, "preface_preemptions_total", "counter", "Running requests preempted for lack of KV blocks.",
         static_cast<double>(c->n_preemptions));
  single(out, "preface_requests_waiting", "gauge", "Requests queued in the engine (queue depth).", c->n_waiting);
  single(out, "preface_requests_running", "gauge", "Requests running in the engine.", c->n_running);
  single(out, "preface_engine_steps_total", "counter", "Engine scheduling steps with a forward pass.",
         static_cast<double>(c->n_steps));
  render_tier_metrics(out, *c);
  return out;
}

}  // namespace preface::server
