// `preface bench engine`: in-process throughput of the engine on one model — prefill tok/s at several prompt
// lengths, decode tok/s at several batch sizes and context lengths, and what the prefix cache saves: time to first
// token for a long prompt cold vs with all but its tail cached, and shared-prefix traffic with and without the cache.
// Prompts are random token ids from a fixed seed, so runs are comparable.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "engine/engine.h"
#include "model/capacity.h"
#include "tokenizer/tokenizer.h"
#include "util/bytes.h"

namespace preface::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  ModelOptions model;
  std::string kv_cache_mem = "2GiB";
  int32_t max_batch_tokens = 512;
  std::vector<int32_t> prefill_lengths{128, 512, 2048};
  std::vector<int32_t> decode_batches{1, 4, 16};
  std::vector<int32_t> decode_contexts{0, 1024, 4096};
  int32_t n_decode = 32;
  bool json = false;
  bool skip_groups = false;
};

struct Bench {
  model::Model& model;
  const Tokenizer& tokenizer;
  engine::EngineConfig cfg;
  std::mt19937_64 rng{1234};

  std::vector<int32_t> random_prompt(int32_t n) {
    std::vector<int32_t> out(static_cast<size_t>(n));
    for (auto& t : out) t = 3 + static_cast<int32_t>(rng() % static_cast<uint64_t>(model.config().n_vocab - 3));
    return out;
  }
  static engine::RequestParams request(std::vector<int32_t> prompt, int32_t n_new) {
    engine::RequestParams p;
    p.prompt = std::move(prompt);
    p.max_new_tokens = n_new;
    p.ignore_eos = true;
    return p;
  }
  static engine::RequestStats drain(engine::RequestStream& s) {
    while (s.next()) {
    }
    return s.stats();
  }
  // Wall seconds of running `prompts` (max `concurrency` in flight) to completion on `eng`.
  static double run_all(engine::Engine& eng, const std::vector<std::vector<int32_t>>& prompts, int32_t n_new,
                        size_t concurrency, std::vector<engine::RequestStats>* stats) {
    const auto t0 = Clock::now();
    std::vector<std::shared_ptr<engine::RequestStream>> live;
    size_t next = 0;
    while (next < prompts.size() || !live.empty()) {
      while (next < prompts.size() && live.size() < concurrency) live.push_back(eng.submit(request(prompts[next++], n_new)));
      eng.step();
      for (size_t i = 0; i < live.size();) {
        if (live[i]->finished()) {
          stats->push_back(drain(*live[i]));
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
};

void bench_engine(const BenchOptions& opts) {
  const std::string path = resolve_model_path(opts.model.model_path);
  auto model = model::Model::load(path, opts.max_batch_tokens);
  const auto tokenizer = Tokenizer::from_gguf(model->file());
  engine::EngineConfig cfg;
  cfg.kv_format = kv_format(opts.model, model->memory());
  cfg.block_size = block_size_of(opts.model);
  cfg.kv_cache_bytes = parse_bytes(opts.kv_cache_mem);
  cfg.max_batch_tokens = opts.max_batch_tokens;
  cfg.n_threads = resolve_threads(opts.model.threads);
  Bench b{*model, *tokenizer, cfg};
  nlohmann::json out = {{"model", path}, {"threads", cfg.n_threads}, {"kv_type", cfg.kv_format.name()}};
  auto say = [&](const char* fmt, auto... args) {
    if (!opts.json) std::fprintf(stderr, fmt, args...);
  };
  const int32_t ctx = model->config().ctx_len;
  say("model %s | %d threads | kv %s\n", path.c_str(), cfg.n_threads, cfg.kv_format.describe().c_str());

  // Prefill: one cold prompt per length, prefix cache off; tok/s over the time to the first token.
  for (int32_t n : opts.prefill_lengths) {
    if (n >= ctx) continue;
    auto c = cfg;
    c.prefix_cache = false;
    engine::Engine eng(*model, engine::with_eog(c, *tokenizer));
    auto s = eng.submit(Bench::request(b.random_prompt(n), 1));
    eng.run_until_idle();
    const auto st = Bench::drain(*s);
    const double tps = n / (st.prefill_ms / 1e3);
    say("prefill  %5d tokens: %8.1f ms  %8.1f tok/s\n", n, st.prefill_ms, tps);
    out["prefill"].push_back({{"tokens", n}, {"ms", st.prefill_ms}, {"tok_per_s", tps}});
  }
  // Decode: `batch` sequences sharing a context of `n_ctx` tokens (computed once through the cache) plus one
  // distinct token each, then n_decode tokens each; tok/s over the decode span.
  for (int32_t n_ctx : opts.decode_contexts) {
    if (n_ctx + 2 + opts.n_decode >= ctx) continue;
    const auto shared = b.random_prompt(n_ctx);
    for (int32_t batch : opts.decode_batches) {
      engine::Engine eng(*model, engine::with_eog(cfg, *tokenizer));
      std::vector<std::shared_ptr<engine::RequestStream>> streams;
      if (n_ctx > 0) {  // warm the shared context
        auto w = eng.submit(Bench::request(shared, 1));
        eng.run_until_idle();
        Bench::drain(*w);
      }
      for (int32_t i = 0; i < batch; ++i) {
        auto p = shared;
        p.push_back(3 + i);
        streams.push_back(eng.submit(Bench::request(p, opts.n_decode + 1)));
      }
      // Step until the sequences have their first tokens (their prompts are all cached but one token, so they
      // are admitted together), then time the pure decode steps.
      const int64_t gen_start = eng.counters().n_generated_tokens;
      while (eng.counters().n_generated_tokens - gen_start < batch) eng.step();
      const int64_t gen0 = eng.counters().n_generated_tokens;
      const auto t0 = Clock::now();
      eng.run_until_idle();
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      const int64_t n_gen = eng.counters().n_generated_tokens - gen0;
      const double tps = n_gen / secs;
      say("decode   batch %2d  context %5d: %8.1f tok/s  (%.2f ms/step)\n", batch, n_ctx, tps,
          secs * 1e3 / (static_cast<double>(n_gen) / batch));
      out["decode"].push_back({{"batch", batch}, {"context", n_ctx}, {"tok_per_s", tps}});
    }
  }
  // Prefix cache: TTFT of a 2,000-token prompt cold vs with its first 1,980 tokens cached.
  if (2000 < ctx) {
    engine::Engine eng(*model, engine::with_eog(cfg, *tokenizer));
    const auto prompt = b.random_prompt(2000);
    auto cold = eng.submit(Bench::request(prompt, 1));
    eng.run_until_idle();
    const auto st_cold = Bench::drain(*cold);
    auto warm_prompt = std::vector<int32_t>(prompt.begin(), prompt.begin() + 1980);
    const auto tail = b.random_prompt(20);
    warm_prompt.insert(warm_prompt.end(), tail.begin(), tail.end());
    auto warm = eng.submit(Bench::request(warm_prompt, 1));
    eng.run_until_idle();
    const auto st_warm = Bench::drain(*warm);
    say("ttft     2000 tokens cold: %8.1f ms | with %d cached: %8.1f ms\n", st_cold.first_token_ms,
        st_warm.n_cached_tokens, st_warm.first_token_ms);
    out["ttft_2000"] = {{"cold_ms", st_cold.first_token_ms},
                        {"cached_ms", st_warm.first_token_ms},
                        {"cached_tokens", st_warm.n_cached_tokens}};
  }
  // Shared-prefix traffic: 8 groups x 4 requests, each group a 1,500-token system prompt plus a 32-token question,
  // 16 output tokens, 4 in flight; with and without the prefix cache.
  if (!opts.skip_groups && 1500 + 32 + 16 < ctx) {
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::vector<int32_t>> systems;
    for (int g = 0; g < 8; ++g) systems.push_back(b.random_prompt(1500));
    for (int i = 0; i < 4; ++i) {
      for (int g = 0; g < 8; ++g) {
        auto p = systems[static_cast<size_t>(g)];
        const auto q = b.random_prompt(32);
        p.insert(p.end(), q.begin(), q.end());
        prompts.push_back(std::move(p));
      }
    }
    for (bool cache : {true, false}) {
      auto c = cfg;
      c.prefix_cache = cache;
      engine::Engine eng(*model, engine::with_eog(c, *tokenizer));
      std::vector<engine::RequestStats> stats;
      const double secs = Bench::run_all(eng, prompts, 16, 4, &stats);
      double ttft = 0;
      int64_t cached = 0, prompt_tokens = 0;
      for (const auto& st : stats) {
        ttft += st.first_token_ms;
        cached += st.n_cached_tokens;
        prompt_tokens += st.n_prompt_tokens;
      }
      ttft /= static_cast<double>(stats.size());
      say("groups   8x4 x 1532 tokens, 4 at a time, cache %-3s: %7.2f s  %6.3f req/s  mean ttft %8.1f ms  cached %4.1f%%\n",
          cache ? "on" : "off", secs, stats.size() / secs, ttft, 100.0 * cached / prompt_tokens);
      out[cache ? "groups_cache_on" : "groups_cache_off"] = {
          {"seconds", secs}, {"mean_ttft_ms", ttft}, {"cached_ratio", static_cast<double>(cached) / prompt_tokens}};
    }
  }
  if (opts.json) std::printf("%s\n", out.dump(2).c_str());
}

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench->add_subcommand("engine", "In-process prefill/decode throughput and prefix-cache savings");
  add_model_options(*cmd, opts->model);
  cmd->add_option("--kv-cache-mem", opts->kv_cache_mem, "KV cache budget")->capture_default_str();
  cmd->add_option("--max-batch-tokens", opts->max_batch_tokens, "Tokens per engine step")->capture_default_str();
  cmd->add_option("--prefill", opts->prefill_lengths, "Prompt lengths for prefill")->capture_default_str();
  cmd->add_option("--batch", opts->decode_batches, "Batch sizes for decode")->capture_default_str();
  cmd->add_option("--context", opts->decode_contexts, "Context lengths for decode")->capture_default_str();
  cmd->add_option("--n-decode", opts->n_decode, "Tokens decoded per sequence")->capture_default_str();
  cmd->add_flag("--skip-groups", opts->skip_groups, "Skip the shared-prefix traffic benchmark");
  cmd->add_flag("--json", opts->json, "Print results as JSON on stdout");
  cmd->callback([opts] { bench_engine(*opts); });
}

}  // namespace preface::cli
