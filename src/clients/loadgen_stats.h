// Summaries of the per-request measurements of `preface bench serve`. Header-only so tests can check them
// without linking the CLI (RequestResult is a plain struct; nothing here calls into loadgen_client.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "clients/loadgen_client.h"

namespace preface::cli::loadgen {

struct Distribution {
  int64_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;  // same unit as the samples
};

// Percentiles by linear interpolation between the closest ranks (numpy's default), so p50 of {1, 2} is 1.5.
// An empty sample gives all zeros with n = 0.
inline Distribution summarize(std::vector<double> samples) {
  Distribution d;
  d.n = static_cast<int64_t>(samples.size());
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double v : samples) sum += v;
  d.mean = sum / static_cast<double>(samples.size());
  const auto pct = [&](double q) {
    const double pos = q * static_cast<double>(samples.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, samples.size() - 1);
    return samples[lo] + (samples[hi] - samples[lo]) * (pos - static_cast<double>(lo));
  };
  d.p50 = pct(0.50);
  d.p90 = pct(0.90);
  d.p99 = pct(0.99);
  return d;
}

inline constexpr double kHitShare = 0.5;
inline bool is_hit(const RequestResult& r) {
  return r.n_prompt_tokens > 0 && static_cast<double>(r.n_cached_tokens) >= kHitShare * static_cast<double>(r.n_prompt_tokens);
}

// Totals over the requests of one run. Latency samples are in seconds and cover successful requests only.
struct Totals {
  int64_t n_ok = 0, n_failed = 0, n_without_usage = 0;
  int64_t n_prompt_tokens = 0, n_cached_tokens = 0, n_completion_tokens = 0;
  std::vector<double> ttft_s, e2e_s;  // [n_ok]
  // ttft_s split into cache hits, requests whose usage reports at least kHitShare of the prompt as cached, and
  // the rest ([n_ok] together). A share, not "any cached token": prompts that merely start alike share a few
  // tokens (a partial block), which is no hit of a cached prefix.
  std::vector<double> ttft_hit_s, ttft_miss_s;
  std::vector<double> itl_s;          // [sum over requests of n_text_chunks - 1]
  std::vector<double> tpot_s;         // [requests with > 1 completion token] (e2e - ttft) / (tokens - 1)
  std::vector<std::string> errors;    // [<= 5] the first failures
};

inline Totals aggregate(const std::vector<RequestResult>& results) {
  Totals t;
  for (const RequestResult& r : results) {
    if (!r.ok) {
      ++t.n_failed;
      if (t.errors.size() < 5) t.errors.push_back(r.error);
      continue;
    }
    ++t.n_ok;
    t.ttft_s.push_back(r.ttft_s);
    (is_hit(r) ? t.ttft_hit_s : t.ttft_miss_s).push_back(r.ttft_s);
    t.e2e_s.push_back(r.e2e_s);
    t.itl_s.insert(t.itl_s.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.n_completion_tokens > 1)
      t.tpot_s.push_back((r.e2e_s - r.ttft_s) / static_cast<double>(r.n_completion_tokens - 1));
    if (!r.has_usage) ++t.n_without_usage;
    t.n_prompt_tokens += r.n_prompt_tokens;
    t.n_cached_tokens += r.n_cached_tokens;
    t.n_completion_tokens += r.n_completion_tokens;
  }
  return t;
}

// Share of prompt tokens the server reported as served from its prefix cache; 0 without usage.
inline double cached_ratio(const Totals& t) {
  return t.n_prompt_tokens > 0 ? static_cast<double>(t.n_cached_tokens) / static_cast<double>(t.n_prompt_tokens)
                               : 0.0;
}

}  // namespace preface::cli::loadgen
