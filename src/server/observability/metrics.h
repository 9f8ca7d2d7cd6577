// Server metrics in the Prometheus text exposition format (version 0.0.4). Counts HTTP responses and
// generations here; the engine's counters (tokens, prefix-cache queries and hits, blocks, evictions,
// preemptions, queue depth) are read from a snapshot at scrape time. Thread-safe. The per-tenant series are
// CacheStats' (cache_stats.h), the only place they are rendered; docs/metrics.md lists every family.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "server/observability/generation_summary.h"

namespace preface::server {

// A Prometheus sample value: integers exactly, other values in the shortest form that reads back exactly.
std::string prometheus_number(double v);
// A Prometheus label value with its escapes (backslash, double quote, newline).
std::string prometheus_label_value(const std::string& v);

// A cumulative histogram over fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket, _sum and _count lines of `name`; `labels` (e.g. `model_name="m"`) go on each line.
  void render(const std::string& name, std::string& out, const std::string& labels = {}) const;

 private:
  std::vector<double> bounds_;   // [n] ascending upper bounds; +Inf is implicit
  std::vector<uint64_t> counts_; // [n + 1] observations per bucket (not cumulative), last = above all bounds
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // One HTTP response (any route; `route` is the matched path or "other").
  void on_response(const std::string& route, int status);
  // One generation that ran to its end (any StopKind).
  void on_generation(const GenerationSummary& summary);
  // The whole exposition. `counters` is null while the model loads. `kv_invariants_ok`: the result of
  // check_kv_invariants() (the preface_kv_invariants_ok gauge; omitted when nullopt).
  std::string render(const engine::EngineCounters* counters, int32_t n_in_flight,
                     std::optional<bool> kv_invariants_ok = std::nullopt) const;

  // Appends preface_model_info{model_name} 1 and vLLM's names for the same figures, labelled model_name (its Grafana dashboard then works
  // unchanged): vllm:num_requests_running / _waiting, vllm:kv_cache_usage_perc (0..1),
  // vllm:prefix_cache_queries_total / _hits_total (tokens), vllm:prompt_tokens_total,
  // vllm:generation_tokens_total, vllm:num_preemptions_total, vllm:request_success_total{finished_reason},
  // and the histograms vllm:time_to_first_token_seconds, vllm:e2e_request_latency_seconds,
  // vllm:inter_token_latency_seconds, vllm:request_queue_time_seconds.
  void render_vllm(std::string& out, const engine::EngineCounters& counters, const std::string& model_name) const;

  // Runs engine.check_invariants() (block pool ref counts, free queue, hash map; scheduler block tables), which
  // takes the engine's step lock so it never sees a step half done: true when they hold. A failure is also
  // written to stderr with the reason. Costs O(blocks + block-table entries) and delays the engine by that much.
  static bool check_kv_invariants(const engine::Engine& engine);

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;  // (route, status) -> count
  uint64_t n_generations_ = 0;
  uint64_t n_completion_tokens_ = 0;
  uint64_t n_cached_tokens_ = 0, n_written_tokens_ = 0;
  std::map<std::string, uint64_t> finish_reasons_;
  Histogram ttft_s_, inter_token_s_, e2e_s_, queue_s_;
};

}  // namespace preface::server
