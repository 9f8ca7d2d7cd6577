// Constrained decoding in the sampler and the engine: the mask restricts greedy and random sampling alike; on a
// byte-level BPE model (gpt2 vocabulary, 50k tokens) every constrained output matches its grammar, ends with
// Stop once the grammar is complete, and is the same token for token whether the request ran alone, batched
// with seven others (some unconstrained), or after its prompt was cached.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "engine/engine_harness.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"

namespace preface::test {
namespace {

grammar::TokenMask mask_of(int32_t n_vocab, std::initializer_list<int32_t> ids) {
  grammar::TokenMask m;
  m.bits.assign((static_cast<size_t>(n_vocab) + 63) / 64, 0);
  for (int32_t id : ids) {
    m.bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    ++m.n_allowed;
  }
  return m;
}

TEST(ConstrainedSampler, MaskAppliesToGreedyRandomAndPenalties) {
  std::vector<float> logits(200);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 37) % 101) / 10.0f;
  const grammar::TokenMask m = mask_of(200, {3, 77, 150, 199});
  int32_t best = 3;
  for (int32_t id : {77, 150, 199}) best = logits[static_cast<size_t>(id)] > logits[static_cast<size_t>(best)] ? id : best;
  engine::Sampler greedy(engine::SamplingParams{});
  EXPECT_EQ(greedy.sample(logits.data(), 200, {}, &m), best);
  engine::SamplingParams pen;
  pen.repeat_penalty = 1.3f;
  engine::Sampler penalized(pen);
  const std::vector<int32_t> history{best};
  const int32_t t = penalized.sample(logits.data(), 200, history, &m);
  EXPECT_TRUE(m.test(t));
  for (uint64_t seed = 0; seed < 200; ++seed) {
    engine::SamplingParams p;
    p.temperature = 1.5f;
    p.top_k = 50;
    p.top_p = 0.95f;
    p.seed = seed;
    engine::Sampler s(p);
    ASSERT_TRUE(m.test(s.sample(logits.data(), 200, {}, &m)));
  }
  const grammar::TokenMask none = mask_of(200, {});
  EXPECT_EQ(greedy.sample(logits.data(), 200, {}, &none), -1);
}

class ConstrainedEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    lm_ = load_shared_model("synth-gpt2-d128-q8_0-tied.gguf");
    if (!lm_.model) GTEST_SKIP() << "shared test data not found";
    cache_ = std::make_unique<grammar::GrammarCache>(grammar::TokenVocab::from_tokenizer(*lm_.tokenizer));
  }

  engine::EngineConfig config(int32_t max_running) const {
    engine::EngineConfig c;
    c.kv_cache_bytes = 32ull << 20;
    c.n_threads = 1;
    c.max_running = max_running;
    return engine::with_eog(c, *lm_.tokenizer);
  }

  engine::RequestParams request(int i) const {
    engine::RequestParams p;
    p.prompt = lm_.tokenizer->encode("Record number " + std::to_string(i % 3) + " as JSON:", false);
    p.max_new_tokens = 200;
    p.sampling.temperature = i % 2 == 0 ? 0.0f : 1.0f;
    p.sampling.seed = static_cast<uint64_t>(100 + i);
    if (i % 4 != 3) p.constraint = constraints_[static_cast<size_t>(i) % constraints_.size()];
    return p;
  }

  LoadedModel lm_;
  std::unique_ptr<grammar::GrammarCache> cache_;
  std::vector<std::shared_ptr<grammar::Constraint>> constraints_;
};

TEST_F(ConstrainedEngine, OutputsMatchTheGrammarAndDoNotDependOnBatchOrCache) {
  const char* schemas[] = {
      R"({"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"},
          "tags":{"type":"array","items":{"enum":["a","bc"]},"maxItems":3}},"required":["id","ok","tags"]})",
      R"({"anyOf":[{"type":"null"},{"type":"string","pattern":"^[a-z]{1,6}$"}]})",
  };
  for (const char* s : schemas) constraints_.push_back(cache_->json_schema(nlohmann::json::parse(s)));
  constraints_.push_back(cache_->gbnf("root ::= \"<\" [a-z ]{0,8} \">\"\n"));
  constexpr int kN = 8;
  std::vector<Outcome> alone(kN), batched(kN), cached(kN);
  {
    engine::EngineConfig c = config(1);
    c.prefix_cache = false;
    engine::Engine e(*lm_.model, c);
    for (int i = 0; i < kN; ++i) {
      auto s = e.submit(request(i));
      e.run_until_idle();
      alone[static_cast<size_t>(i)] = collect(*s);
    }
  }
  engine::Engine e(*lm_.model, config(kN));
  for (auto* out : {&batched, &cached}) {
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (int i = 0; i < kN; ++i) streams.push_back(e.submit(request(i)));
    e.run_until_idle();
    for (int i = 0; i < kN; ++i) (*out)[static_cast<size_t>(i)] = collect(*streams[static_cast<size_t>(i)]);
  }
  EXPECT_NO_THROW(e.check_invariants());
  for (int i = 0; i < kN; ++i) {
    const auto k = static_cast<size_t>(i);
    EXPECT_EQ(batched[k].tokens, alone[k].tokens) << "request " << i << " batched";
    EXPECT_EQ(cached[k].tokens, alone[k].tokens) << "request " << i << " after a cache hit";
    EXPECT_GT(cached[k].stats.n_cached_tokens, 0) << "request " << i;
    if (i % 4 == 3) continue;  // unconstrained
    const auto& g = constraints_[k % constraints_.size()]->grammar();
    const std::string text = lm_.tokenizer->decode(alone[k].tokens);
    EXPECT_TRUE(grammar::match_bytes(g, text).accepting) << "request " << i << ": '" << text << "'";
    EXPECT_EQ(alone[k].stats.finish, engine::FinishReason::Stop) << "request " << i << ": '" << text << "'";
  }
  EXPECT_GT(constraints_[0]->stats().n_mask_hits, 0);
}

}  // namespace
}  // namespace preface::test
