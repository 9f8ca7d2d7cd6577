// `preface perplexity`: what a KV format costs in accuracy, as llama.cpp's llama-perplexity --kl-divergence
// measures it. The text is cut into windows of --ctx tokens (BOS first where the vocab adds one); each window runs
// once with the KV format asked for and once with the base format (--base-kv, f16 by default), and over every
// position after the first of each window it reports:
//   perplexity        exp(mean -log p(next token)) with each format;
//   kl_divergence     mean KL(P_base || P) of the next-token distributions (nats), and its 99th percentile;
//   top1_agreement    the fraction of positions whose argmax token is the same;
//   max_abs_logit_diff.
// Probabilities are computed in double from the f32 logits. The KV memory per token of both formats is printed too.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/local_engine.h"
#include "cli/options.h"
#include "engine/cpu_backend.h"
#include "util/error.h"

namespace preface::cli {
namespace {

struct PerplexityOptions {
  ModelOptions model;
  std::string file;
  std::string base_kv = "f16";
  int32_t ctx = 256;
  int32_t max_windows = 0;  // 0: every whole window of the text
  bool json = false;
};

// Log-softmax of logits, in double.
std::vector<double> log_softmax(const float* x, size_t n) {
  double m = -INFINITY;
  for (size_t i = 0; i < n; ++i) m = std::max(m, double{x[i]});
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double{x[i]} - m);
  const double log_z = m + std::log(sum);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = double{x[i]} - log_z;
  return out;
}

// The logits of positions 0..n-2 of one window (each predicting the next token), [n - 1][n_vocab].
std::vector<float> window_logits(engine::Engine& eng, const std::vector<int32_t>& window) {
  engine::RequestParams p;
  p.prompt = window;
  p.max_new_tokens = 1;
  p.ignore_eos = true;
  p.prompt_logits = true;
  const auto stream = eng.submit(std::move(p));
  eng.run_until_idle();
  while (stream->next()) {
  }
  if (stream->stats().finish == engine::FinishReason::Error) throw Error("perplexity: " + stream->stats().error);
  return stream->prompt_logits();
}

void perplexity(const PerplexityOptions& opts) {
  std::ifstream in(opts.file, std::ios::binary);
  if (!in) throw Error("cannot read " + opts.file);
  std::stringstream text;
  text << in.rdbuf();
  auto model = model::Model::load(resolve_model_path(opts.model.model_path));
  const auto tokenizer = Tokenizer::from_gguf(model->file());
  const size_t n_vocab = static_cast<size_t>(model->config().n_vocab);
  const int32_t ctx = std::min({opts.ctx, model->config().ctx_len, model->max_batch_tokens()});
  if (ctx < 2) throw Error("--ctx must be at least 2 tokens");
  const std::vector<int32_t> tokens = tokenizer->encode(text.str(), false);
  const bool bos = tokenizer->add_bos_default() && tokenizer->bos_id() >= 0;
  const size_t body = static_cast<size_t>(ctx) - (bos ? 1 : 0);  // text tokens per window
  size_t n_windows = tokens.size() / body;
  if (opts.max_windows > 0) n_windows = std::min(n_windows, static_cast<size_t>(opts.max_windows));
  if (n_windows == 0) {
    throw Error("the text has " + std::to_string(tokens.size()) + " tokens, fewer than one window of " +
                std::to_string(body) + " (lower --ctx)");
  }
  ModelOptions base_opts = opts.model;
  base_opts.kv_type = opts.base_kv;
  base_opts.kv_type_k.clear();
  base_opts.kv_type_v.clear();
  base_opts.kv_rotate = "off";  // the reference is plain f16 KV
  const kernels::KvFormat format = kv_format(opts.model, model->memory());
  const kernels::KvFormat base = kv_format(base_opts, model->memory());
  auto eng = local_engine(*model, *tokenizer, opts.model, ctx + 1);
  auto base_eng = local_engine(*model, *tokenizer, base_opts, ctx + 1);

  double nll = 0, base_nll = 0, kl_sum = 0, max_diff = 0;
  std::vector<double> kls;
  size_t n_scored = 0, same_top1 = 0;
  for (size_t w = 0; w < n_windows; ++w) {
    std::vector<int32_t> window;
    if (bos) window.push_back(tokenizer->bos_id());
    window.insert(window.end(), tokens.begin() + static_cast<ptrdiff_t>(w * body),
                  tokens.begin() + static_cast<ptrdiff_t>((w + 1) * body));
    const std::vector<float> a = window_logits(*eng, window), b = window_logits(*base_eng, window);
    for (size_t i = 1; i + 1 < window.size(); ++i) {  // position i predicts token i + 1
      const float* la = a.data() + i * n_vocab;
      const float* lb = b.data() + i * n_vocab;
      const std::vector<double> pa = log_softmax(la, n_vocab), pb = log_softmax(lb, n_vocab);
      const auto next = static_cast<size_t>(window[i + 1]);
      nll -= pa[next];
      base_nll -= pb[next];
      double kl = 0;
      for (size_t v = 0; v < n_vocab; ++v) {
        kl += std::exp(pb[v]) * (pb[v] - pa[v]);
        max_diff = std::max(max_diff, std::fabs(double{la[v]} - lb[v]));
      }
      kls.push_back(kl);
      kl_sum += kl;
      same_top1 += std::max_element(la, la + n_vocab) - la == std::max_element(lb, lb + n_vocab) - lb ? 1 : 0;
      ++n_scored;
    }
  }
  std::sort(kls.begin(), kls.end());
  const double n = static_cast<double>(n_scored);
  nlohmann::json j = {{"kv", format.name()},
                      {"kv_describe", format.describe()},
                      {"base_kv", base.name()},
                      {"kv_bytes_per_token", engine::kv_bytes_per_token(model->memory(), format)},
                      {"base_kv_bytes_per_token", engine::kv_bytes_per_token(model->memory(), base)},
                      {"ctx", ctx},
                      {"windows", n_windows},
                      {"positions", n_scored},
                      {"perplexity", std::exp(nll / n)},
                      {"base_perplexity", std::exp(base_nll / n)},
                      {"kl_divergence", kl_sum / n},
                      {"kl_divergence_p99", kls[std::min(kls.size() - 1, static_cast<size_t>(0.99 * n))]},
                      {"top1_agreement", static_cast<double>(same_top1) / n},
                      {"max_abs_logit_diff", max_diff}};
  if (opts.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("kv %s (%llu bytes per token) against %s (%llu): %zu windows of %d tokens, %zu positions\n",
              format.describe().c_str(), static_cast<unsigned long long>(j["kv_bytes_per_token"].get<uint64_t>()),
              base.name().c_str(), static_cast<unsigned long long>(j["base_kv_bytes_per_token"].get<uint64_t>()),
              n_windows, ctx, n_scored);
  std::printf("perplexity %.4f (base %.4f) | KL divergence mean %.6f p99 %.6f | top-1 agreement %.2f%% | max "
              "|logit diff| %.4g\n",
              j["perplexity"].get<double>(), j["base_perplexity"].get<double>(), j["kl_divergence"].get<double>(),
              j["kl_divergence_p99"].get<double>(), 100.0 * j["top1_agreement"].get<double>(), max_diff);
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto opts = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity and KL divergence of a KV format against a base format (f16) over a text file");
  add_model_options(*cmd, opts->model);
  cmd->add_option("-f,--file", opts->file, "The text file")->required();
  cmd->add_option("--base-kv", opts->base_kv, "The base format's type for both sides (unrotated unless --kv-rotate on)")
      ->capture_default_str();
  cmd->add_option("--ctx", opts->ctx, "Tokens per window (BOS included)")->check(CLI::Range(2, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-windows", opts->max_windows, "Windows at most (0: every whole window of the text)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--json", opts->json, "One JSON object");
  cmd->callback([opts] { perplexity(*opts); });
}

}  // namespace preface::cli
