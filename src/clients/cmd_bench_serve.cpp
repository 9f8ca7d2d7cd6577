// `preface bench serve --url URL`: a load generator for any OpenAI-compatible server, so one run can measure
// preface and a peer on identical traffic. Prompts come from loadgen_workload.h (deterministic text from
// --seed); each request streams from /v1/completions and is timed by loadgen_client.cpp. Prints TTFT (also split
// into cache hits, requests whose usage reports at least half the prompt cached, and the rest),
// inter-token latency and end-to-end latency percentiles, throughput, and the share of prompt tokens the server
// reports as served from its prefix cache.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "clients/commands.h"
#include "clients/loadgen_client.h"
#include "clients/loadgen_stats.h"
#include "clients/loadgen_workload.h"
#include "util/error.h"

namespace preface::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using loadgen::WorkloadKind;

struct ServeBenchOptions {
  std::string url;
  std::string api_key;
  std::string model;  // empty: the first of /v1/models
  std::string workload_name = "shared-prefix";  // --workload; parsed by bench_serve
  loadgen::WorkloadSpec spec;
  int32_t max_tokens = 16;
  double temperature = 0.0;
  bool ignore_eos = true;
  int32_t concurrency = 4;
  double timeout_s = 600;
  bool json = false;
  bool session_ids = false;  // --session-ids: X-Session-Id per conversation
};

// Progress on stderr: a redrawn bar on a terminal, otherwise a line at every 10%.
class Progress {
 public:
  explicit Progress(int64_t n_total) : n_total_(n_total), tty_(::isatty(STDERR_FILENO) == 1) {}

  void tick(bool ok) {
    const std::lock_guard<std::mutex> lock(mu_);
    ++n_done_;
    if (!ok) ++n_failed_;
    const double elapsed_s = std::chrono::duration<double>(Clock::now() - t0_).count();
    const int64_t pct = n_done_ * 100 / n_total_;
    if (tty_) {
      constexpr int64_t kWidth = 30;
      const int64_t filled = n_done_ * kWidth / n_total_;
      std::fprintf(stderr, "\r[%s%s] %lld/%lld requests, %lld failed, %.1f s", std::string(filled, '#').c_str(),
                   std::string(kWidth - filled, ' ').c_str(), static_cast<long long>(n_done_),
                   static_cast<long long>(n_total_), static_cast<long long>(n_failed_), elapsed_s);
      if (n_done_ == n_total_) std::fputc('\n', stderr);
    } else if (pct / 10 > last_decile_) {
      last_decile_ = pct / 10;
      std::fprintf(stderr, "bench serve: %lld/%lld requests (%lld%%), %lld failed, %.1f s\n",
                   static_cast<long long>(n_done_), static_cast<long long>(n_total_), static_cast<long long>(pct),
                   static_cast<long long>(n_failed_), elapsed_s);
    }
    std::fflush(stderr);
  }

 private:
  std::mutex mu_;
  const int64_t n_total_;
  const bool tty_;
  const Clock::time_point t0_ = Clock::now();
  int64_t n_done_ = 0, n_failed_ = 0;
  int64_t last_decile_ = 0;
};

// The X-Session-Id of conversation i: distinct per conversation and per --seed, the same across runs.
std::string session_id(const ServeBenchOptions& opts, size_t i) {
  return "bench-" + std::to_string(opts.spec.seed) + "-" + std::to_string(i);
}

// Runs every conversation of `work` with at most opts.concurrency in flight; turns of one conversation run in
// order on one worker (turn t+1's prompt holds turn t's reply). Returns the results in completion order.
std::vector<loadgen::RequestResult> run_workload(const ServeBenchOptions& opts, const loadgen::Target& target,
                                                 const std::string& model,
                                                 const std::vector<loadgen::Conversation>& work) {
  Progress progress(loadgen::n_requests(work));
  std::mutex mu;
  std::vector<loadgen::RequestResult> results;  // [n_requests], guarded by mu
  std::atomic<size_t> next{0};
  const auto worker = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      const loadgen::Conversation& c = work[i];
      std::vector<std::string> replies;  // [turns done]
      for (size_t t = 0; t < c.questions.size(); ++t) {
        loadgen::RequestParams p{model, loadgen::render_prompt(c, replies), opts.max_tokens, opts.temperature,
                                 opts.ignore_eos, opts.session_ids ? session_id(opts, i) : std::string()};
        loadgen::RequestResult r = loadgen::run_request(target, p, opts.timeout_s);
        const bool ok = r.ok;
        replies.push_back(r.text);
        {
          const std::lock_guard<std::mutex> lock(mu);
          results.push_back(std::move(r));
        }
        progress.tick(ok);
        if (!ok) break;  // the rest of this conversation would build on a missing reply
      }
    }
  };
  const size_t n_threads = std::min(static_cast<size_t>(opts.concurrency), work.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n_threads; ++i) threads.emplace_back(worker);
  for (std::thread& th : threads) th.join();
  return results;
}

json distribution_ms(std::vector<double> samples_s) {
  for (double& v : samples_s) v *= 1000.0;
  const loadgen::Distribution d = loadgen::summarize(std::move(samples_s));
  return {{"n", d.n}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"p99", d.p99}};
}

json report(const ServeBenchOptions& opts, const std::string& model, const std::vector<loadgen::RequestResult>& rs,
            int64_t n_planned, double wall_s) {
  const loadgen::Totals t = loadgen::aggregate(rs);
  const int64_t n_ok = t.n_ok;
  const double per_s = wall_s > 0 ? 1.0 / wall_s : 0.0;
  return {{"url", opts.url},
          {"model", model},
          {"workload", opts.workload_name},
          {"seed", opts.spec.seed},
          {"concurrency", opts.concurrency},
          {"max_tokens", opts.max_tokens},
          {"n_requests", n_planned},
          {"n_ok", n_ok},
          {"n_failed", n_planned - n_ok},
          {"n_without_usage", t.n_without_usage},
          {"errors", t.errors},
          {"duration_s", wall_s},
          {"requests_per_s", static_cast<double>(n_ok) * per_s},
          {"output_tokens_per_s", static_cast<double>(t.n_completion_tokens) * per_s},
          {"prompt_tokens", t.n_prompt_tokens},
          {"cached_tokens", t.n_cached_tokens},
          {"completion_tokens", t.n_completion_tokens},
          {"mean_prompt_tokens", n_ok > 0 ? static_cast<double>(t.n_prompt_tokens) / static_cast<double>(n_ok) : 0.0},
          {"cached_ratio", loadgen::cached_ratio(t)},
          {"session_ids", opts.session_ids},
          {"ttft_ms", distribution_ms(t.ttft_s)},
          {"ttft_hit_ms", distribution_ms(t.ttft_hit_s)},
          {"ttft_miss_ms", distribution_ms(t.ttft_miss_s)},
          {"itl_ms", distribution_ms(t.itl_s)},
          {"tpot_ms", distribution_ms(t.tpot_s)},
          {"e2e_ms", distribution_ms(t.e2e_s)}};
}

void print_table(const json& r) {
  std::printf("%s  %s  workload %s  concurrency %d\n", r["url"].get<std::string>().c_str(),
              r["model"].get<std::string>().c_str(), r["workload"].get<std::string>().c_str(),
              r["concurrency"].get<int>());
  std::printf("requests        %lld ok, %lld failed in %.2f s\n", r["n_ok"].get<long long>(),
              r["n_failed"].get<long long>(), r["duration_s"].get<double>());
  std::printf("throughput      %.2f req/s, %.1f output tok/s\n", r["requests_per_s"].get<double>(),
              r["output_tokens_per_s"].get<double>());
  std::printf("prompt tokens   %lld total, %.0f mean, %lld cached (ratio %.3f)\n", r["prompt_tokens"].get<long long>(),
              r["mean_prompt_tokens"].get<double>(), r["cached_tokens"].get<long long>(),
              r["cached_ratio"].get<double>());
  std::printf("%-14s %10s %10s %10s %10s\n", "latency (ms)", "mean", "p50", "p90", "p99");
  for (const char* k : {"ttft_ms", "ttft_hit_ms", "ttft_miss_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
    const json& d = r[k];
    std::printf("%-14s %10.1f %10.1f %10.1f %10.1f\n", k, d["mean"].get<double>(), d["p50"].get<double>(),
                d["p90"].get<double>(), d["p99"].get<double>());
  }
  for (const json& e : r["errors"]) std::printf("error: %s\n", e.get<std::string>().c_str());
}

void bench_serve(ServeBenchOptions opts) {
  if (opts.concurrency < 1) throw Error("--concurrency must be >= 1");
  if (opts.max_tokens < 1) throw Error("--max-tokens must be >= 1");
  opts.spec.kind = opts.workload_name == "multi-turn" ? WorkloadKind::kMultiTurn
                   : opts.workload_name == "random"   ? WorkloadKind::kRandom
                                                      : WorkloadKind::kSharedPrefix;
  const loadgen::Target target = loadgen::parse_url(opts.url, opts.api_key);
  const std::vector<loadgen::Conversation> work = loadgen::make_workload(opts.spec);
  const std::string model = opts.model.empty() ? loadgen::first_model(target) : opts.model;
  const auto t0 = Clock::now();
  const std::vector<loadgen::RequestResult> results = run_workload(opts, target, model, work);
  const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const json r = report(opts, model, results, loadgen::n_requests(work), wall_s);
  if (opts.json) std::printf("%s\n", r.dump(2).c_str());
  else print_table(r);
  std::fflush(stdout);
  if (r["n_failed"].get<int64_t>() > 0)
    throw Error(std::to_string(r["n_failed"].get<int64_t>()) + " of " + std::to_string(r["n_requests"].get<int64_t>()) +
                " requests failed");
}

}  // namespace

void register_bench_serve(CLI::App* bench) {
  auto opts = std::make_shared<ServeBenchOptions>();
  CLI::App* cmd = bench->add_subcommand("serve", "Load-test an OpenAI-compatible server (streamed /v1/completions)");
  cmd->add_option("--url", opts->url, "Server base URL, e.g. http://127.0.0.1:8080")->required();
  cmd->add_option("--api-key", opts->api_key, "Bearer token to send");
  cmd->add_option("--model", opts->model, "Model name to request (default: the first of /v1/models)");
  cmd->add_option("--workload", opts->workload_name, "Traffic shape")
      ->check(CLI::IsMember({"shared-prefix", "multi-turn", "random"}))
      ->capture_default_str();
  cmd->add_option("--seed", opts->spec.seed, "Prompt generator seed")->capture_default_str();
  cmd->add_option("--groups", opts->spec.n_groups, "shared-prefix: system prompts")->capture_default_str();
  cmd->add_option("--prompts-per-group", opts->spec.n_prompts_per_group, "shared-prefix: questions per system prompt")
      ->capture_default_str();
  cmd->add_option("--users", opts->spec.n_users, "multi-turn: conversations")->capture_default_str();
  cmd->add_option("--turns", opts->spec.n_turns, "multi-turn: user turns per conversation")->capture_default_str();
  cmd->add_option("--requests", opts->spec.n_requests, "random: prompts")->capture_default_str();
  cmd->add_option("--system-len", opts->spec.system_words,
                  "System prompt length in words (~1-1.1 tokens each in GPT/Llama-style BPE vocabularies); random: added to --question-len")
      ->capture_default_str();
  cmd->add_option("--question-len", opts->spec.question_words, "Question / user turn length in words")
      ->capture_default_str();
  cmd->add_option("--max-tokens,--output-len", opts->max_tokens, "Tokens generated per request")->capture_default_str();
  cmd->add_option("--temperature", opts->temperature, "Sampling temperature")->capture_default_str();
  cmd->add_flag("--ignore-eos,!--no-ignore-eos", opts->ignore_eos,
                "Ask the server to generate exactly --max-tokens (ignore_eos)");
  cmd->add_option("--concurrency,-c", opts->concurrency, "Requests in flight at most")->capture_default_str();
  cmd->add_option("--timeout", opts->timeout_s, "Per-request timeout in seconds")->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print results as JSON on stdout");
  cmd->add_flag("--session-ids", opts->session_ids,
                "Send X-Session-Id (one per conversation) so a proxy can keep each session on one replica");
  cmd->callback([opts] { bench_serve(*opts); });
}

}  // namespace preface::cli
