// `preface run`: generate a continuation of a prompt. Only the generated text goes to stdout (streamed, flushed
// per token); timing goes to stderr.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "cli/commands.h"
#include "cli/local_engine.h"
#include "cli/options.h"
#include "util/error.h"

namespace preface::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  int32_t n_predict = 256;
  engine::SamplingParams sampling{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f};
  int64_t seed = -1;  // < 0: random
};

void run(const RunOptions& opts) {
  const std::string path = resolve_model_path(opts.model.model_path);
  auto model = model::Model::load(path);
  const auto tokenizer = Tokenizer::from_gguf(model->file());
  engine::RequestParams params;
  params.prompt = encode_prompt(*tokenizer, opts.prompt);
  params.sampling = opts.sampling;
  params.sampling.seed = opts.seed >= 0 ? static_cast<uint64_t>(opts.seed) : std::random_device{}();
  params.max_new_tokens = opts.n_predict;
  const auto n_prompt = static_cast<int32_t>(params.prompt.size());
  const std::vector<int32_t> prompt = params.prompt;
  const uint64_t seed = params.sampling.seed;
  auto eng = local_engine(*model, *tokenizer, opts.model, n_prompt + opts.n_predict);
  eng->start();
  const auto stream = eng->submit(std::move(params));
  // The decoder first sees the prompt so that the first generated token is decoded as a continuation.
  StreamDecoder decoder(*tokenizer);
  for (const int32_t id : prompt) decoder.push(id);
  while (const auto ev = stream->next()) {
    const std::string text = decoder.push(ev->token);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  const engine::RequestStats stats = stream->stats();
  eng->stop();
  if (stats.finish == engine::FinishReason::Error) throw Error("generation failed: " + stats.error);
  const std::string rest = decoder.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fflush(stdout);

  std::fprintf(stderr, "\nmodel %s | %d threads | kv %s, blocks of %d | seed %llu\n", path.c_str(),
               resolve_threads(opts.model.threads), kv_types_text(opts.model).c_str(), block_size_of(opts.model),
               static_cast<unsigned long long>(seed));
  // prefill_ms runs to the first token (whose sampling it includes); decode_ms from there to the end.
  const int32_t n_decoded = std::max(stats.n_generated_tokens - 1, 0);
  std::fprintf(stderr, "prompt: %d tokens in %.1f ms (%.1f tok/s) | generation: %d tokens in %.1f ms (%.1f tok/s)\n",
               stats.n_prompt_tokens, stats.prefill_ms,
               stats.prefill_ms > 0 ? stats.n_prompt_tokens / (stats.prefill_ms / 1e3) : 0.0,
               stats.n_generated_tokens, stats.decode_ms,
               stats.decode_ms > 0 ? n_decoded / (stats.decode_ms / 1e3) : 0.0);
}

}  // namespace

void register_run(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate a continuation of a prompt (text to stdout, timing to stderr)");
  add_model_options(*cmd, opts->model);
  cmd->add_option("-p,--prompt", opts->prompt, "Prompt text (default: empty, start from BOS)");
  cmd->add_option("-n,--n-predict", opts->n_predict, "Tokens to generate at most")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  engine::SamplingParams& s = opts->sampling;
  cmd->add_option("--temp", s.temperature, "Temperature; <= 0 is greedy")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Random seed (default: random)");
  cmd->add_option("--top-k", s.top_k, "Keep the k most likely tokens; 0 = off")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass; 1 = off")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Drop tokens below min_p * p(best); 0 = off")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (llama.cpp); 1 = off")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "Tokens the repetition penalty looks back over")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty")->capture_default_str();
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty")->capture_default_str();
  cmd->callback([opts] { run(*opts); });
}

}  // namespace preface::cli
