// Per-channel keys (q8_pc, q4_pc; model/layers/channel_keys.h) in the engine: a request served cold, after a full
// or partial hit, alone or batched, in prefill chunks of 1 (token by token, as decode feeds them) to 512 positions
// and on 1 or 2 threads gives the same tokens and memcmp-identical logits, because a query reads the groups before
// its own sealed and its own open however its tokens arrived. Hits end where a group does. Also on windowed layers
// with their own pool (gpt-oss, gemma3) and on a hybrid (qwen35); refused where a layer reads another's rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/engine_harness.h"
#include "model/synth_kv_models.h"
#include "util/error.h"

namespace preface::test {
namespace {

using kernels::KvFormat;
using kernels::KvType;

namespace fs = std::filesystem;

constexpr int32_t kGroup = kernels::kKvChannelGroup;

struct Prompts {
  std::vector<int32_t> a, b, c;  // b: a's first 45 tokens, then its own; c: a, then more
};

// A story and two variations of it, built so that every shared prefix ends inside a group.
Prompts make_prompts(const Tokenizer& tok) {
  Prompts p;
  const std::string story =
      "Tom had a small boat that he took to the lake on sunny days. One morning a duck swam up to the boat and "
      "looked at him, so Tom gave it some bread from his bag. The duck came back the next day with three little "
      "ducks, and soon the whole family followed the boat wherever it went on the water, all through the long "
      "summer until the leaves began to fall";
  p.a = tok.encode(story, tok.add_bos_default());
  p.b.assign(p.a.begin(), p.a.begin() + 45);
  for (int32_t t : tok.encode(" when the wind started to blow and the sky turned grey", false)) p.b.push_back(t);
  p.c = p.a;
  for (int32_t t : tok.encode(", and Tom was happy.", false)) p.c.push_back(t);
  return p;
}

engine::EngineConfig config_for(int32_t chunk, int32_t threads, const KvFormat& f) {
  engine::EngineConfig cfg;
  cfg.kv_format = f;
  cfg.block_size = 32;
  cfg.kv_cache_bytes = 64ull << 20;
  cfg.max_batch_tokens = chunk;
  cfg.n_threads = threads;
  return cfg;
}

void check_channel_keys(const LoadedModel& lm, const std::string& name, const KvFormat& f) {
  const Prompts p = make_prompts(*lm.tokenizer);
  ASSERT_GT(p.a.size(), 2u * kGroup + 8) << "the prompt should span several groups";
  constexpr int32_t kNew = 6;
  const std::vector<Outcome> ref =  // one chunk, one thread
      cold_outcomes(*lm.model, *lm.tokenizer, config_for(512, 1, f), {&p.a, &p.b, &p.c}, kNew);
  const bool recurrent = lm.model->memory().has_state();
  for (int32_t threads : {1, 2}) {
    for (int32_t chunk : {1, 5, 32, 33, 512}) {
      if (threads == 2 && chunk != 5 && chunk != 512) continue;
      const std::string what =
          name + " kv=" + f.name() + " threads=" + std::to_string(threads) + " chunk=" + std::to_string(chunk);
      engine::Engine eng(*lm.model, engine::with_eog(config_for(chunk, threads, f), *lm.tokenizer));
      auto sa = eng.submit(greedy_request(p.a, kNew));
      eng.run_until_idle();
      eng.check_invariants();
      expect_identical(collect(*sa), ref[0], what + " cold");
      auto sa2 = eng.submit(greedy_request(p.a, kNew));
      eng.run_until_idle();
      const Outcome a2 = collect(*sa2);
      expect_identical(a2, ref[0], what + " full hit");
      EXPECT_EQ(a2.stats.n_cached_tokens % kGroup, 0) << what;
      if (!recurrent) {
        EXPECT_EQ(a2.stats.n_cached_tokens, (static_cast<int32_t>(p.a.size()) - 1) / kGroup * kGroup) << what;
      }
      auto sb = eng.submit(greedy_request(p.b, kNew));
      auto sc = eng.submit(greedy_request(p.c, kNew));
      while (eng.step()) eng.check_invariants();
      const Outcome b = collect(*sb);
      const Outcome c = collect(*sc);
      expect_identical(b, ref[1], what + " hit ending inside the shared prefix, batched");
      expect_identical(c, ref[2], what + " extension hit, batched");
      // b shares 45 tokens with a: its hit is the one whole group, never the 13 rows past it.
      if (!recurrent) {
        EXPECT_EQ(b.stats.n_cached_tokens, kGroup) << what;
      }
      EXPECT_EQ(c.stats.n_cached_tokens % kGroup, 0) << what;
      EXPECT_GT(c.stats.n_cached_tokens, 0) << what;
      eng.check_invariants();
      EXPECT_EQ(eng.counters().n_blocks_in_use, 0) << what;
    }
  }
}

class EngineChannelKeys : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineChannelKeys, HitEqualsColdAcrossChunksBatchesAndThreads) {
  const std::string path = q8_0_kv_model_path(GetParam());
  if (path.empty()) GTEST_SKIP() << GetParam() << " needs ../shared/models";
  LoadedModel lm;
  lm.model = model::Model::load(path, 512);
  lm.tokenizer = Tokenizer::from_gguf(lm.model->file());
  for (const KvFormat& f : {KvFormat(KvType::Q8_PC, KvType::F16), KvFormat(KvType::Q4_PC, KvType::Q4_0),
                            KvFormat(KvType::Q4_PC, KvType::Q8_0, false, lm.model->memory().v_rotation_fits())}) {
    check_channel_keys(lm, GetParam(), f);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineChannelKeys,
                         ::testing::Values("stories260K.gguf", "synth-spm-d128-f16.gguf", "llama-h64-gqa-q8_0",
                                           "qwen2-h32-f16", "synth-gpt-oss-d128-f16.gguf",
                                           "synth-gemma3-d256-f16.gguf", "synth-qwen35-d128-f16.gguf"),
                         [](const auto& info) { return q8_0_kv_model_test_name(info.param); });

// The disk tier: sealed blocks written by one engine and served to another after a restart, bit-exact; records of
// the same prompt in another format are not served.
TEST(EngineChannelKeysTiers, RestartServesSealedBlocksFromDiskBitExact) {
  auto lm = load_shared_model("stories260K.gguf");
  if (!lm.model) GTEST_SKIP() << "stories260K.gguf not available";
  const std::string dir = (temp_dir("engine-channel-keys") / "disk").string();
  fs::remove_all(dir);
  const Prompts p = make_prompts(*lm.tokenizer);
  const KvFormat f(KvType::Q4_PC, KvType::Q4_0);
  auto tiered = [&](const KvFormat& format) {
    auto cfg = config_for(64, 1, format);
    cfg.tiers.disk_dir = dir;
    cfg.tiers.disk_bytes = 1ull << 30;
    return engine::with_eog(cfg, *lm.tokenizer);
  };
  Outcome cold;
  {
    auto cfg = config_for(512, 1, f);
    cfg.prefix_cache = false;
    engine::Engine eng(*lm.model, engine::with_eog(cfg, *lm.tokenizer));
    auto s = eng.submit(greedy_request(p.a, 4));
    eng.run_until_idle();
    cold = collect(*s);
  }
  {
    engine::Engine eng(*lm.model, tiered(f));
    auto s = eng.submit(greedy_request(p.a, 4));
    eng.run_until_idle();
    expect_identical(collect(*s), cold, "populating run");
    eng.stop();  // writes the cached blocks
  }
  {
    engine::Engine other(*lm.model, tiered(KvFormat(KvType::Q8_PC, KvType::Q4_0)));
    auto s = other.submit(greedy_request(p.a, 4));
    other.run_until_idle();
    EXPECT_EQ(collect(*s).stats.n_tier_tokens, 0) << "another key type's records are not served";
  }
  engine::Engine eng(*lm.model, tiered(f));
  auto s = eng.submit(greedy_request(p.a, 4));
  eng.run_until_idle();
  const Outcome o = collect(*s);
  expect_identical(o, cold, "served from disk");
  EXPECT_EQ(o.stats.n_tier_tokens, (static_cast<int32_t>(p.a.size()) - 1) / kGroup * kGroup);
  eng.check_invariants();
}

TEST(EngineChannelKeysRefusals, BlocksOfPartGroupsAndLayersReadingOthersRows) {
  auto lm = load_shared_model("stories260K.gguf");
  if (!lm.model) GTEST_SKIP() << "stories260K.gguf not available";
  auto cfg = config_for(64, 1, KvFormat(KvType::Q8_PC, KvType::F16));
  cfg.block_size = 16;
  try {
    engine::Engine eng(*lm.model, cfg);
    ADD_FAILURE() << "a block of 16 positions cannot hold a group of 32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--block-size"), std::string::npos) << e.what();
  }
  auto gemma4 = load_shared_model("synth-gemma4-d128-f16.gguf");
  if (!gemma4.model) GTEST_SKIP() << "synth-gemma4-d128-f16.gguf not available";
  try {
    gemma4.model->memory().check_type_fits(KvFormat(KvType::Q4_PC, KvType::F16));
    ADD_FAILURE() << "gemma4's last layers read earlier layers' rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("read another layer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kernels::resolve_kv_format(KvType::F16, KvType::Q8_PC, kernels::KvRotate::Auto, true, true), Error);
  // auto never rotates per-channel keys.
  EXPECT_FALSE(kernels::resolve_kv_format(KvType::Q4_PC, KvType::Q4_0, kernels::KvRotate::Auto, true, true).rotate_k);
}

}  // namespace
}  // namespace preface::test
