// The per-block cache TTL (EngineConfig::cache_ttl) through the engine on a fake clock: within one namespace the
// blocks a recent request used stay cached while the others expire, and pinned blocks outlive the TTL.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "engine_harness.h"

namespace preface::test {
namespace {

using namespace std::chrono_literals;

constexpr int32_t kBlock = 16;  // EngineConfig's default block_size

struct FakeClock {
  std::atomic<int64_t> ms{0};
  std::chrono::steady_clock::time_point now() const {
    return std::chrono::steady_clock::time_point(std::chrono::milliseconds(ms.load()));
  }
};

struct TtlEngine {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  FakeClock clock;
  std::unique_ptr<engine::Engine> eng;

  explicit TtlEngine(std::chrono::seconds ttl) {
    if (!lm.model) return;
    engine::EngineConfig c;
    c.kv_cache_bytes = 8ull << 20;
    c.n_threads = 1;
    c.clock = [this] { return clock.now(); };
    c.cache_ttl = ttl;
    eng = std::make_unique<engine::Engine>(*lm.model, engine::with_eog(c, *lm.tokenizer));
  }

  // Cached prompt tokens of one request run to completion; invariants checked after.
  int32_t run(const std::vector<int32_t>& prompt, std::vector<engine::CachePin> pins = {}) {
    engine::RequestParams p = greedy_request(prompt, 1);
    p.cache_pins = std::move(pins);
    auto stream = eng->submit(std::move(p));
    eng->run_until_idle();
    EXPECT_NO_THROW(eng->check_invariants());
    return collect(*stream).stats.n_cached_tokens;
  }
};

// [n] tokens: the first n_shared from one pattern, the rest from another.
std::vector<int32_t> prompt_of(int32_t n, int32_t n_shared, int32_t variant) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = 1 + (i * 7 + (i < n_shared ? 0 : 13 * variant)) % 300;
  return p;
}

TEST(EngineCacheTtl, ExpiryIsPerBlockWithinANamespace) {
  TtlEngine t(60s);
  if (!t.eng) GTEST_SKIP() << "stories260K.gguf not available";
  const auto a = prompt_of(4 * kBlock, 4 * kBlock, 0);
  const auto b = prompt_of(4 * kBlock, 2 * kBlock, 1);  // shares A's first two blocks only
  ASSERT_NE(a[2 * kBlock], b[2 * kBlock]);
  EXPECT_EQ(t.run(a), 0);
  t.clock.ms += 40'000;
  EXPECT_EQ(t.run(b), 2 * kBlock);  // hits (and so refreshes) A's first two blocks at t = 40 s
  t.clock.ms += 30'000;             // t = 70 s: A's blocks 2, 3 idle for 70 s, blocks 0, 1 for 30 s
  EXPECT_EQ(t.run(a), 2 * kBlock) << "exactly the blocks unused for longer than the TTL expired";
  EXPECT_GE(t.eng->counters().n_blocks_cached, 2);
  EXPECT_EQ(t.eng->counters().n_expired, 2) << "A's blocks 2 and 3";
}

TEST(EngineCacheTtl, EverythingIdleExpires) {
  TtlEngine t(60s);
  if (!t.eng) GTEST_SKIP() << "stories260K.gguf not available";
  const auto a = prompt_of(4 * kBlock, 4 * kBlock, 0);
  EXPECT_EQ(t.run(a), 0);
  EXPECT_GT(t.eng->counters().n_blocks_cached, 0);
  t.clock.ms += 59'000;
  t.eng->step();
  EXPECT_GT(t.eng->counters().n_blocks_cached, 0) << "59 s < TTL";
  t.clock.ms += 1'000;
  t.eng->step();  // an idle step runs the expiry too
  EXPECT_EQ(t.eng->counters().n_blocks_cached, 0);
  EXPECT_NO_THROW(t.eng->check_invariants());
}

TEST(EngineCacheTtl, PinnedBlocksOutliveTheTtl) {
  TtlEngine t(60s);
  if (!t.eng) GTEST_SKIP() << "stories260K.gguf not available";
  const auto a = prompt_of(4 * kBlock, 4 * kBlock, 0);
  EXPECT_EQ(t.run(a, {engine::CachePin{2 * kBlock, 300s}}), 0);  // pins blocks 0, 1 for 300 s
  t.clock.ms += 200'000;
  EXPECT_EQ(t.run(a), 2 * kBlock) << "pinned blocks kept, unpinned ones expired";
  EXPECT_EQ(t.eng->counters().n_pinned_blocks, 2);
}

}  // namespace
}  // namespace preface::test
