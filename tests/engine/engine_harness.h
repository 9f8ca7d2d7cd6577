// Test helpers for the engine: a loaded shared model + tokenizer, and running requests to completion.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace preface::test {

struct LoadedModel {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

inline LoadedModel load_shared_model(const std::string& file_name) {
  LoadedModel lm;
  const auto path = shared_file("models/" + file_name);
  if (path.empty()) return lm;
  lm.model = model::Model::load(path.string(), 512);
  lm.tokenizer = Tokenizer::from_gguf(lm.model->file());
  return lm;
}

// Everything a request produced: tokens, the logits of every sampled position, and the final record.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [n_tokens][n_vocab]
  engine::RequestStats stats;
};

inline Outcome collect(engine::RequestStream& stream) {
  Outcome out;
  while (auto ev = stream.next()) {
    out.tokens.push_back(ev->token);
    out.logits.insert(out.logits.end(), ev->logits.begin(), ev->logits.end());
  }
  out.stats = stream.stats();
  return out;
}

inline engine::RequestParams greedy_request(std::vector<int32_t> prompt, int32_t n_new) {
  engine::RequestParams p;
  p.prompt = std::move(prompt);
  p.max_new_tokens = n_new;
  p.ignore_eos = true;
  p.keep_logits = true;
  return p;
}

// The references hits are compared with: each prompt alone, in order, on one engine of cfg with caching off.
inline std::vector<Outcome> cold_outcomes(model::Model& model, const Tokenizer& tok, engine::EngineConfig cfg,
                                          const std::vector<const std::vector<int32_t>*>& prompts, int32_t n_new) {
  cfg.prefix_cache = false;
  engine::Engine eng(model, engine::with_eog(cfg, tok));
  std::vector<Outcome> out;
  for (const std::vector<int32_t>* prompt : prompts) {
    auto s = eng.submit(greedy_request(*prompt, n_new));
    eng.run_until_idle();
    out.push_back(collect(*s));
    EXPECT_EQ(out.back().stats.n_cached_tokens, 0);
  }
  return out;
}

// Bit-exact comparison of two outcomes' tokens and logits.
inline void expect_identical(const Outcome& a, const Outcome& b, const std::string& what) {
  ASSERT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)))
      << what << ": logits differ";
}

}  // namespace preface::test
