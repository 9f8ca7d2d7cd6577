// Engine::purge_namespace / purge_namespaces and the cache TTL (EngineConfig::cache_ttl, per block; see also
// engine_cache_ttl_test.cpp) on a fake clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "engine_harness.h"

namespace preface::test {
namespace {

using namespace std::chrono_literals;

std::vector<int32_t> prompt_of(int32_t n, int32_t offset) {
  std::vector<int32_t> p(static_cast<size_t>(n));  // [n] token ids
  for (int32_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = 1 + (i * 7 + offset) % 300;
  return p;
}

// cached tokens of one request of `prompt` under `salt`, run to completion.
int32_t run_cached(engine::Engine& eng, const std::vector<int32_t>& prompt, const std::string& salt) {
  engine::RequestParams p = greedy_request(prompt, 1);
  p.keep_logits = false;
  p.cache_salt = salt;
  auto stream = eng.submit(std::move(p));
  eng.run_until_idle();
  return collect(*stream).stats.n_cached_tokens;
}

struct FakeClock {
  std::atomic<int64_t> ms{0};
  std::chrono::steady_clock::time_point now() const {
    return std::chrono::steady_clock::time_point(std::chrono::milliseconds(ms.load()));
  }
};

engine::EngineConfig small_config() {
  engine::EngineConfig c;
  c.kv_cache_bytes = 8ull << 20;
  c.n_threads = 1;
  return c;
}

TEST(EnginePurge, PurgesExactlyTheNamespacesAsked) {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  if (!lm.model) GTEST_SKIP() << "stories260K.gguf not available";
  engine::Engine eng(*lm.model, engine::with_eog(small_config(), *lm.tokenizer));
  const auto prompt = prompt_of(64, 3);
  for (const char* salt : {"1:a", "1:ax", "1:b"}) EXPECT_EQ(run_cached(eng, prompt, salt), 0);
  EXPECT_EQ(eng.purge_namespace("1:ax"), 4);  // 64 tokens = 4 full blocks of 16
  EXPECT_EQ(run_cached(eng, prompt, "1:ax"), 0);
  EXPECT_GE(run_cached(eng, prompt, "1:a"), 48);
  const kv::Digest a_roots[] = {eng.cache_namespace("1:a"), eng.cache_namespace("1:ax")};
  EXPECT_GT(eng.purge_namespaces(a_roots), 0);  // "1:a" and "1:ax" (cached again above)
  EXPECT_EQ(run_cached(eng, prompt, "1:a"), 0);
  EXPECT_EQ(run_cached(eng, prompt, "1:ax"), 0);
  EXPECT_GE(run_cached(eng, prompt, "1:b"), 48) << "another prefix's namespace survives";
  const kv::Digest none = eng.cache_namespace("1:zzz");
  EXPECT_EQ(eng.purge_namespaces(std::span<const kv::Digest>(&none, 1)), 0);
  const auto live = eng.live_namespaces();  // 1:a, 1:ax (cached again just above) and 1:b
  EXPECT_EQ(live.size(), 3u);
  EXPECT_NE(std::find(live.begin(), live.end(), eng.cache_namespace("1:b")), live.end());
  EXPECT_EQ(std::find(live.begin(), live.end(), none), live.end());
  EXPECT_NO_THROW(eng.check_invariants());
}

TEST(EnginePurge, PurgeIsSafeBesideTheBackgroundLoop) {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  if (!lm.model) GTEST_SKIP() << "stories260K.gguf not available";
  engine::Engine eng(*lm.model, engine::with_eog(small_config(), *lm.tokenizer));
  eng.start();
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (int i = 0; i < 8; ++i) {
    engine::RequestParams p = greedy_request(prompt_of(80, i % 2), 20);
    p.keep_logits = false;
    p.cache_salt = i % 2 ? "1:a" : "1:b";
    streams.push_back(eng.submit(std::move(p)));
  }
  for (int i = 0; i < 20; ++i) {
    eng.purge_namespace("1:a");
    std::this_thread::sleep_for(1ms);
  }
  for (auto& s : streams) EXPECT_EQ(collect(*s).tokens.size(), 20u);
  eng.stop();
  EXPECT_NO_THROW(eng.check_invariants());
  EXPECT_EQ(eng.counters().n_blocks_in_use, 0);
}

TEST(EngineCacheTtl, UnusedNamespacesExpireOnTheFakeClock) {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  if (!lm.model) GTEST_SKIP() << "stories260K.gguf not available";
  FakeClock clock;
  engine::EngineConfig cfg = small_config();
  cfg.clock = [&clock] { return clock.now(); };
  cfg.cache_ttl = 60s;
  engine::Engine eng(*lm.model, engine::with_eog(cfg, *lm.tokenizer));
  const auto prompt = prompt_of(64, 5);
  EXPECT_EQ(run_cached(eng, prompt, "old"), 0);
  clock.ms += 40'000;
  EXPECT_EQ(run_cached(eng, prompt, "fresh"), 0);
  clock.ms += 30'000;  // "old" unused for 70 s, "fresh" for 30 s
  // "old" is asked first: the expiry must run before its own lookup, not at a later step.
  EXPECT_EQ(run_cached(eng, prompt, "old"), 0) << "unused for longer than the TTL: expired";
  EXPECT_EQ(run_cached(eng, prompt, "fresh"), 48 + 15) << "used within the TTL: still cached";
  // A hit refreshes: "fresh" used at 70 s stays cached at 125 s.
  clock.ms += 55'000;
  EXPECT_GT(run_cached(eng, prompt, "fresh"), 0);
  EXPECT_NO_THROW(eng.check_invariants());
}

}  // namespace
}  // namespace preface::test
