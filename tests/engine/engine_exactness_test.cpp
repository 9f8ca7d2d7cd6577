// Bit-exactness of the engine: a request served cold, with a full-block hit, with a partial (copy-on-write) hit,
// alone or batched with others, at prefill chunk sizes 1/7/16/64/512 and at 1 and 2 threads gives the same tokens
// and memcmp-identical logits; with F16 KV and with Q8_0 KV (which an engine refuses, with preface::Error, for a
// model whose head_dim is not a multiple of 32). The 2026 attention models too: mixture-of-experts FFNs (qwen3moe,
// gpt-oss F16 and MXFP4: batched tokens share experts), attention sinks and alternating windows (gpt-oss), and
// gemma4's per-layer shapes with its last layers reading earlier layers' rows.
#include <gtest/gtest.h>

#include "engine/engine_harness.h"
#include "model/synth_kv_models.h"
#include "util/error.h"

namespace preface::test {
namespace {

struct Case {
  const char* model;
};

class EngineExactness : public ::testing::TestWithParam<Case> {};

// Prompts with long shared prefixes: b shares a's first 37 tokens (2 full blocks + 5 rows of a partial),
// c extends a entirely.
struct Prompts {
  std::vector<int32_t> a, b, c;
};

Prompts make_prompts(const Tokenizer& tok) {
  Prompts p;
  p.a = tok.encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
      "friends, and every day she would run to the big tree at the end of the road to look for birds, "
      "squirrels and shiny stones that she kept in a small red box under her bed",
      tok.add_bos_default());
  p.b.assign(p.a.begin(), p.a.begin() + 37);
  const auto tail = tok.encode(" and then a dog came by and barked at the bird", false);
  p.b.insert(p.b.end(), tail.begin(), tail.end());
  p.c = p.a;
  const auto more = tok.encode(" until the sun went down.", false);
  p.c.insert(p.c.end(), more.begin(), more.end());
  return p;
}

engine::EngineConfig config_for(int32_t chunk, int32_t threads, const kernels::KvFormat& kv_type, bool reclaim = true) {
  engine::EngineConfig cfg;
  cfg.window_reclaim = reclaim;
  cfg.kv_format = kv_type;
  cfg.kv_cache_bytes = 64ull << 20;
  cfg.max_batch_tokens = chunk;
  cfg.n_threads = threads;
  return cfg;
}

void check_exactness(const LoadedModel& lm, const std::string& model_name, const kernels::KvFormat& kv_type) {
  const Prompts p = make_prompts(*lm.tokenizer);
  ASSERT_GT(p.a.size(), 40u);
  constexpr int32_t kNew = 6;

  // References: each prompt alone on a cold engine with caching off, one chunk, one thread.
  const std::vector<Outcome> ref =
      cold_outcomes(*lm.model, *lm.tokenizer, config_for(512, 1, kv_type), {&p.a, &p.b, &p.c}, kNew);
  // Models with windowed and global layers run with the windowed layers' own pool (reclaim: every chunk size and
  // thread count) and without it (two configurations). The pool serves no partial block: b's hit stops at 32.
  const bool splits = lm.model->memory().can_split_windows();
  for (const bool reclaim : splits ? std::vector<bool>{true, false} : std::vector<bool>{true})
  for (int32_t threads : {1, 2}) {
    for (int32_t chunk : {1, 7, 16, 64, 512}) {
      if (!reclaim && (threads == 2 || (chunk != 7 && chunk != 512))) continue;
      const std::string what = model_name + " kv=" + kv_type.name() +
                               " threads=" + std::to_string(threads) + " chunk=" + std::to_string(chunk) +
                               (splits ? (reclaim ? " window pool" : " one pool") : "");
      const int32_t b_hit = splits && reclaim ? 32 : 37;
      engine::Engine eng(*lm.model, engine::with_eog(config_for(chunk, threads, kv_type, reclaim), *lm.tokenizer));
      // Cold, alone.
      auto sa = eng.submit(greedy_request(p.a, kNew));
      eng.run_until_idle();
      eng.check_invariants();
      const Outcome a = collect(*sa);
      expect_identical(a, ref[0], what + " cold");
      EXPECT_EQ(a.stats.n_cached_tokens, 0) << what;
      // The same prompt again: its full blocks come from the cache, and the rows of the block holding the last
      // prompt token too (copy-on-write) when generation filled that block; never the last prompt token itself.
      auto sa2 = eng.submit(greedy_request(p.a, kNew));
      eng.run_until_idle();
      const Outcome a2 = collect(*sa2);
      expect_identical(a2, ref[0], what + " full hit");
      const auto n_a = static_cast<int32_t>(p.a.size());
      const int32_t n_full_hit = (n_a - 1) / 16 * 16;
      const bool last_block_registered = n_a + kNew - 1 >= n_full_hit + 16;
      EXPECT_EQ(a2.stats.n_cached_tokens, last_block_registered && b_hit == 37 ? n_a - 1 : n_full_hit) << what;
      // b (partial hit on block 2) and c (extends a) together in one batch.
      auto sb = eng.submit(greedy_request(p.b, kNew));
      auto sc = eng.submit(greedy_request(p.c, kNew));
      while (eng.step()) eng.check_invariants();
      const Outcome b = collect(*sb);
      const Outcome c = collect(*sc);
      expect_identical(b, ref[1], what + " partial hit, batched");
      expect_identical(c, ref[2], what + " extension hit, batched");
      EXPECT_EQ(b.stats.n_cached_tokens, b_hit) << what;
      // Cached and written tokens never overlap: together they cover the prompt's full blocks.
      const auto n_b_full = static_cast<int32_t>(p.b.size()) / 16 * 16;
      EXPECT_EQ(b.stats.n_cached_tokens + b.stats.n_written_tokens, std::max(b_hit, n_b_full)) << what;
      EXPECT_GE(c.stats.n_cached_tokens, n_a / 16 * 16) << what;
      eng.check_invariants();
      const auto counters = eng.counters();
      EXPECT_EQ(counters.n_blocks_in_use, 0) << what;
      EXPECT_EQ(counters.n_window_blocks_in_use, 0) << what;
      EXPECT_EQ(counters.n_window_blocks_total > 0, splits && reclaim) << what;
    }
  }
}

TEST_P(EngineExactness, CachedPartialBatchedChunkedThreaded) {
  auto lm = load_shared_model(GetParam().model);
  ASSERT_TRUE(lm.model);
  check_exactness(lm, GetParam().model, kernels::KvType::F16);
}

// Quantized KV: the same exactness with block types (rows quantized in 32-value blocks: stories260K's and
// synth-spm's heads of 8 and 16 values share blocks), K and V of different types, and rotated rows, on every
// format the model's rows and heads can hold (synth_kv_models.h adds shapes with heads of 32 to 128).
class EngineQuantKv : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineQuantKv, CachedPartialBatchedChunkedThreaded) {
  const std::string path = q8_0_kv_model_path(GetParam());
  if (path.empty()) return;
  LoadedModel lm;
  lm.model = model::Model::load(path, 512);
  lm.tokenizer = Tokenizer::from_gguf(lm.model->file());
  using kernels::KvFormat;
  using kernels::KvType;
  int n_checked = 0;
  for (const KvFormat& f : {KvFormat(KvType::Q8_0), KvFormat(KvType::Q8_0, KvType::Q4_0, true, true),
                            KvFormat(KvType::Q4_1, KvType::IQ4_NL)}) {
    try {
      lm.model->memory().check_type_fits(f);
    } catch (const Error&) {
      continue;  // heads below 64 values are not rotated
    }
    check_exactness(lm, GetParam(), f);
    ++n_checked;
  }
  EXPECT_GE(n_checked, 2);
}

std::vector<std::string> q8_0_engine_models() {
  std::vector<std::string> names = {"stories260K.gguf", "synth-spm-d128-f16.gguf"};  // heads of 8 and 16
  for (const std::string& n : q8_0_kv_model_names()) names.push_back(n);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Models, EngineQuantKv, ::testing::ValuesIn(q8_0_engine_models()),
                         [](const auto& info) { return q8_0_kv_model_test_name(info.param); });

INSTANTIATE_TEST_SUITE_P(SharedModels, EngineExactness,
                         ::testing::Values(Case{"stories260K.gguf"}, Case{"synth-spm-d128-f16.gguf"},
                                           Case{"synth-spm-d128-q8_0.gguf"}, Case{"synth-spm-d128-q4_0.gguf"},
                                           Case{"synth-gpt2-d128-q8_0-tied.gguf"},
                                           Case{"synth-qwen2-d128-bf16.gguf"}, Case{"synth-llama-d256-q4_k_m.gguf"},
                                           Case{"synth-llama-d256-q3_k_m.gguf"}, Case{"synth-llama-d256-iq4_xs.gguf"},
                                           Case{"synth-llama-d256-q4_1.gguf"}, Case{"synth-qwen3-d256-f16.gguf"},
                                           Case{"synth-phi3-d256-f16.gguf"},
                                           Case{"synth-llama-rope-llama3-oc64-d256-f16.gguf"},
                                           Case{"synth-gemma2-d128-f16.gguf"}, Case{"synth-gemma3-d256-f16.gguf"},
                                           Case{"synth-qwen3moe-d128-f16.gguf"}, Case{"synth-gpt-oss-d128-f16.gguf"},
                                           Case{"2026/synth-gpt-oss-d128-mxfp4.gguf"},
                                           Case{"synth-gemma4-d128-f16.gguf"}),
                         [](const auto& info) {
                           std::string name = info.param.model;
                           name = name.substr(0, name.find(".gguf"));
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace preface::test
