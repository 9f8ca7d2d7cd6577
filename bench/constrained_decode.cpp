// Decode time per token with and without a JSON Schema constraint, through the engine (issue 25: the constraint
// may add at most 10% per token). Plain main, forward_timing style:
//   constrained_decode MODEL THREADS [--tokens N] [--reps R] [--properties P]
// Runs, per repetition: an unconstrained greedy decode of N tokens (ignore_eos), then the same prompt constrained
// by a schema of P required properties (strings of at most 12 characters, integers and booleans in turn, never
// complete within N tokens), first with a cold mask cache (a freshly compiled constraint) and then warm (the same
// constraint again, a different seed, temperature 1). Prints the best decode ms/token of each and the overhead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace preface;

nlohmann::json wide_schema(int n) {
  nlohmann::json props = nlohmann::json::object(), required = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    const std::string name = "field_" + std::to_string(i);
    if (i % 3 == 0) props[name] = {{"type", "string"}, {"maxLength", 12}};
    if (i % 3 == 1) props[name] = {{"type", "integer"}};
    if (i % 3 == 2) props[name] = {{"type", "boolean"}};
    required.push_back(name);
  }
  return {{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
}

struct Run {
  double ms_per_token = 0;
  int32_t n_tokens = 0;
  std::vector<int32_t> tokens;
};

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The constraint's own work per token, without the model: replays `tokens` through a matcher of `c`, computing
// each step's mask and sampling greedily under it from fixed pseudo-random logits (the engine's order: mask,
// sample, accept). Returns ms per token.
double replay_ms(const std::shared_ptr<grammar::Constraint>& c, const std::vector<int32_t>& tokens, int32_t n_vocab) {
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  uint64_t x = 88172645463325252ull;
  for (float& l : logits) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    l = static_cast<float>(x % 1000) / 100.0f;
  }
  engine::Sampler sampler(engine::SamplingParams{});
  grammar::Matcher m(c, false);
  const double t0 = now_ms();
  for (const int32_t t : tokens) {
    const auto mask = m.allowed();
    const int32_t s = sampler.sample(logits.data(), n_vocab, tokens, mask.get());
    if (s < 0 || !mask->test(t) || !m.accept(t)) {
      std::fprintf(stderr, "replay diverged\n");
      std::exit(1);
    }
  }
  return (now_ms() - t0) / static_cast<double>(std::max<size_t>(tokens.size(), 1));
}

Run run(engine::Engine& e, const std::vector<int32_t>& prompt, int32_t n, std::shared_ptr<grammar::Constraint> c,
        float temperature, uint64_t seed) {
  engine::RequestParams p;
  p.prompt = prompt;
  p.max_new_tokens = n;
  p.ignore_eos = true;
  p.sampling.temperature = temperature;
  p.sampling.seed = seed;
  p.constraint = std::move(c);
  auto stream = e.submit(std::move(p));
  e.run_until_idle();
  Run r;
  while (auto ev = stream->next()) r.tokens.push_back(ev->token);
  const engine::RequestStats s = stream->stats();
  r.n_tokens = s.n_generated_tokens;
  r.ms_per_token = s.n_generated_tokens > 1 ? s.decode_ms / (s.n_generated_tokens - 1) : 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL THREADS [--tokens N] [--reps R] [--properties P]\n", argv[0]);
    return 2;
  }
  int32_t n_tokens = 128, reps = 3, n_props = 50;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) n_tokens = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--properties")) n_props = std::atoi(argv[i + 1]);
  }
  auto model = model::Model::load(argv[1], 512);
  auto tok = Tokenizer::from_gguf(model->file());
  engine::EngineConfig cfg;
  cfg.n_threads = std::atoi(argv[2]);
  cfg.kv_cache_bytes = 64ull << 20;
  cfg.prefix_cache = false;  // every run computes its prompt: the decode steps compared are alike
  engine::Engine e(*model, engine::with_eog(cfg, *tok));
  const std::vector<int32_t> prompt = tok->encode("Write the record as JSON:", tok->add_bos_default());
  const auto vocab = grammar::TokenVocab::from_tokenizer(*tok);
  const nlohmann::json schema = wide_schema(n_props);

  double plain = 1e30, cold = 1e30, warm = 1e30;
  int32_t n_plain = 0, n_cold = 0, n_warm = 0;
  for (int r = 0; r < reps; ++r) {
    const Run a = run(e, prompt, n_tokens, nullptr, 0.0f, 1);
    grammar::GrammarCache cache(vocab);  // fresh: a cold mask cache
    auto c = cache.json_schema(schema);
    const Run b = run(e, prompt, n_tokens, c, 0.0f, 1);
    const Run w = run(e, prompt, n_tokens, c, 1.0f, 2 + static_cast<uint64_t>(r));
    const Run w2 = run(e, prompt, n_tokens, c, 1.0f, 2 + static_cast<uint64_t>(r));  // every state seen before
    plain = std::min(plain, a.ms_per_token);
    cold = std::min(cold, b.ms_per_token);
    warm = std::min(warm, w2.ms_per_token);
    n_plain = a.n_tokens;
    n_cold = b.n_tokens;
    n_warm = w2.n_tokens;
    const auto st = c->stats();
    std::printf("rep %d: plain %.3f  cold %.3f  first-seed %.3f  warm %.3f ms/token; %zu states, %zu masks\n", r,
                a.ms_per_token, b.ms_per_token, w.ms_per_token, w2.ms_per_token, st.n_states, st.n_masks_cached);
  }
  // The constraint's own cost, isolated: the tokens of the last warm run replayed through a fresh constraint
  // (cold masks) and again through the same one (warm).
  {
    grammar::GrammarCache cache(vocab);
    auto c = cache.json_schema(schema);
    const Run w = run(e, prompt, n_tokens, c, 1.0f, 99);
    grammar::GrammarCache fresh(vocab);
    auto c2 = fresh.json_schema(schema);
    const double cold_ms = replay_ms(c2, w.tokens, tok->n_vocab());
    const double warm_ms = replay_ms(c2, w.tokens, tok->n_vocab());
    std::printf("constraint work alone: cold %.3f ms/token (%.1f%% of plain decode), warm %.3f ms/token (%.1f%%)\n",
                cold_ms, 100.0 * cold_ms / plain, warm_ms, 100.0 * warm_ms / plain);
  }
  std::printf("tokens: plain %d, constrained %d / %d\n", n_plain, n_cold, n_warm);
  std::printf("best ms/token: plain %.3f, constrained cold cache %.3f (%+.1f%%), warm cache %.3f (%+.1f%%)\n", plain,
              cold, 100.0 * (cold / plain - 1.0), warm, 100.0 * (warm / plain - 1.0));
  return 0;
}
