// RequestParams::prompt_logits: the logits of every prompt position equal, bit for bit, the logits a request for
// just that prefix samples from, however the prompt is chunked, and even when the prefix is cached.
#include <gtest/gtest.h>

#include "engine/engine_harness.h"

namespace preface::test {
namespace {

TEST(EnginePromptLogits, EveryPositionEqualsThePrefixAlone) {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  ASSERT_TRUE(lm.model) << "needs ../shared/models/stories260K.gguf";
  const auto n_vocab = static_cast<size_t>(lm.model->config().n_vocab);
  engine::EngineConfig cfg;
  cfg.kv_cache_bytes = 8ull << 20;
  cfg.n_threads = 1;
  cfg.max_batch_tokens = 7;  // chunked prefill
  engine::Engine eng(*lm.model, engine::with_eog(cfg, *lm.tokenizer));
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 40; ++i) prompt.push_back(1 + (i * 11) % 400);
  // The whole prompt once first, so that its blocks are cached: prompt_logits must compute them anyway.
  auto warm = eng.submit(greedy_request(prompt, 1));
  eng.run_until_idle();
  collect(*warm);

  engine::RequestParams p = greedy_request(prompt, 2);
  p.prompt_logits = true;
  auto s = eng.submit(std::move(p));
  eng.run_until_idle();
  const Outcome out = collect(*s);
  const std::vector<float> rows = s->prompt_logits();
  ASSERT_EQ(rows.size(), (prompt.size() - 1) * n_vocab);
  EXPECT_EQ(out.stats.n_cached_tokens, 0);
  for (size_t i = 0; i + 1 < prompt.size(); i += 5) {
    auto ref = eng.submit(greedy_request(std::vector<int32_t>(prompt.begin(), prompt.begin() + i + 1), 1));
    eng.run_until_idle();
    const Outcome r = collect(*ref);
    ASSERT_EQ(r.logits.size(), n_vocab);
    EXPECT_EQ(0, std::memcmp(rows.data() + i * n_vocab, r.logits.data(), n_vocab * sizeof(float)))
        << "position " << i;
  }
  EXPECT_NO_THROW(eng.check_invariants());
}

}  // namespace
}  // namespace preface::test
