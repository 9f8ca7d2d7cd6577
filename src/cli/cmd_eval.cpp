// `preface eval`: one JSON object in the format of ../shared/oracle/*.jsonl (prompt, tokens, argmax at every
// prompt position, last_logits, greedy continuation), for comparing with llama.cpp. --logits-digest adds
// logits_sha256: SHA-256 of the raw f32 bytes of every logit computed (each prompt position's, then each greedy
// step's), so two runs agree on it only when every logit has the same bits.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/local_engine.h"
#include "cli/options.h"
#include "kv/hash.h"
#include "util/error.h"

namespace preface::cli {
namespace {

struct EvalOptions {
  ModelOptions model;
  std::string prompt;
  int32_t n_greedy = 48;
  bool logits_digest = false;
};

// Keys in the oracle's order; floats printed as the shortest text that reads back as the same float.
using OracleJson =
    nlohmann::basic_json<nlohmann::ordered_map, std::vector, std::string, bool, int64_t, uint64_t, float>;

// Index of the largest value, the lowest index on ties.
int32_t argmax(const float* x, size_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

void eval(const EvalOptions& opts) {
  auto model = model::Model::load(resolve_model_path(opts.model.model_path));
  const auto tokenizer = Tokenizer::from_gguf(model->file());
  const size_t n_vocab = static_cast<size_t>(model->config().n_vocab);

  // One greedy request through the engine: the logits of every prompt position (prompt_logits for all but the
  // last, keep_logits for the last and each greedy step), exactly n_greedy tokens (not stopped at
  // end-of-generation), as the oracle lists them; at least one step, for the last prompt position's logits.
  engine::RequestParams params;
  params.prompt = encode_prompt(*tokenizer, opts.prompt);
  params.max_new_tokens = std::max(opts.n_greedy, 1);
  params.ignore_eos = true;
  params.keep_logits = true;
  params.prompt_logits = true;
  const std::vector<int32_t> prompt = params.prompt;
  auto eng = local_engine(*model, *tokenizer, opts.model, static_cast<int32_t>(prompt.size()) + opts.n_greedy);
  const auto stream = eng->submit(std::move(params));
  eng->run_until_idle();
  std::vector<float> logits = stream->prompt_logits();  // [n_prompt - 1][n_vocab], then the sampled steps'
  std::vector<int32_t> greedy;
  while (const auto ev = stream->next()) {
    greedy.push_back(ev->token);
    logits.insert(logits.end(), ev->logits.begin(), ev->logits.end());
  }
  const engine::RequestStats stats = stream->stats();
  if (stats.finish == engine::FinishReason::Error) throw Error("eval failed: " + stats.error);
  if (logits.size() < prompt.size() * n_vocab) throw Error("eval: the engine returned too few logits");
  greedy.resize(std::min(greedy.size(), static_cast<size_t>(opts.n_greedy)));
  // The logits computed: prompt positions, then the steps after each greedy token but the last.
  logits.resize(std::min(logits.size(), (prompt.size() + std::max<size_t>(greedy.size(), 1) - 1) * n_vocab));
  std::vector<int32_t> argmaxes(prompt.size());
  for (size_t i = 0; i < prompt.size(); ++i) argmaxes[i] = argmax(logits.data() + i * n_vocab, n_vocab);
  const std::vector<float> last(logits.begin() + static_cast<ptrdiff_t>((prompt.size() - 1) * n_vocab),
                                logits.begin() + static_cast<ptrdiff_t>(prompt.size() * n_vocab));

  OracleJson out = {{"prompt", opts.prompt}, {"tokens", prompt},      {"argmax", argmaxes},
                    {"last_logits", last},   {"greedy", greedy}};
  if (opts.logits_digest) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(logits.data());
    out["logits_sha256"] = kv::to_hex(kv::sha256({bytes, logits.size() * sizeof(float)}));
  }
  const std::string text = out.dump(-1, ' ', false, OracleJson::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
}

}  // namespace

void register_eval(CLI::App& app) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Print one JSON line: prompt tokens, argmax at every position, last logits, greedy continuation");
  add_model_options(*cmd, opts->model);
  cmd->add_option("-p,--prompt", opts->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-greedy", opts->n_greedy, "Greedy tokens to generate")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  cmd->add_flag("--logits-digest", opts->logits_digest,
                "Add logits_sha256: SHA-256 of every logit computed (prompt positions, then greedy steps)");
  cmd->callback([opts] { eval(*opts); });
}

}  // namespace preface::cli
