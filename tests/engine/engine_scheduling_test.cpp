// Scheduling behaviour of the engine on stories260K: waiting for an in-flight prefix, namespace isolation,
// preemption under memory pressure, rejection of requests that cannot fit, cancellation, and a randomized run of
// thousands of requests whose outputs must equal their cold references with invariants holding after every step.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine_harness.h"
#include "util/error.h"

namespace preface::test {
namespace {

constexpr int32_t kBlock = 16;

engine::EngineConfig small_config(int32_t n_blocks, int32_t max_batch_tokens, int32_t max_running = 64) {
  engine::EngineConfig cfg;
  cfg.block_size = kBlock;
  cfg.max_batch_tokens = max_batch_tokens;
  cfg.max_running = max_running;
  cfg.n_threads = 1;
  // stories260K: 5 layers x 4 KV heads x 8 dims x 2 (K, V) x 2 bytes (f16) = 640 bytes per token.
  cfg.kv_cache_bytes = static_cast<uint64_t>(n_blocks) * kBlock * 640;
  return cfg;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, size_t n, int32_t n_vocab) {
  std::vector<int32_t> out(n);
  for (auto& t : out) t = 3 + static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab - 3));
  return out;
}

class EngineScheduling : public ::testing::Test {
 protected:
  void SetUp() override {
    lm_ = load_shared_model("stories260K.gguf");
    ASSERT_TRUE(lm_.model);
  }
  // Output of `prompt` alone on a cold engine without caching.
  Outcome reference(const std::vector<int32_t>& prompt, int32_t n_new) {
    const auto key = std::make_pair(prompt, n_new);
    if (auto it = refs_.find(key); it != refs_.end()) return it->second;
    auto cfg = small_config(256, 512);
    cfg.prefix_cache = false;
    engine::Engine eng(*lm_.model, engine::with_eog(cfg, *lm_.tokenizer));
    auto s = eng.submit(greedy_request(prompt, n_new));
    eng.run_until_idle();
    return refs_[key] = collect(*s);
  }
  LoadedModel lm_;
  std::map<std::pair<std::vector<int32_t>, int32_t>, Outcome> refs_;
};

TEST_F(EngineScheduling, SecondRequestWaitsForInFlightPrefix) {
  std::mt19937_64 rng(1);
  const auto prompt = random_tokens(rng, 200, lm_.model->config().n_vocab);
  engine::Engine eng(*lm_.model, engine::with_eog(small_config(64, 32), *lm_.tokenizer));
  auto s1 = eng.submit(greedy_request(prompt, 4));
  auto s2 = eng.submit(greedy_request(prompt, 4));
  while (eng.step()) eng.check_invariants();
  const Outcome o1 = collect(*s1), o2 = collect(*s2);
  EXPECT_EQ(o1.stats.n_cached_tokens, 0);
  EXPECT_EQ(o1.stats.n_written_tokens, 192);  // 12 full prompt blocks
  // The second waited for the first's blocks instead of computing them again: all full blocks are hits.
  EXPECT_GE(o2.stats.n_cached_tokens, 192);
  EXPECT_EQ(o2.stats.n_written_tokens, 0);
  expect_identical(o1, reference(prompt, 4), "first");
  expect_identical(o2, reference(prompt, 4), "second");
}

TEST_F(EngineScheduling, SaltsIsolateNamespaces) {
  std::mt19937_64 rng(2);
  const auto prompt = random_tokens(rng, 100, lm_.model->config().n_vocab);
  engine::Engine eng(*lm_.model, engine::with_eog(small_config(64, 512), *lm_.tokenizer));
  auto run = [&](const std::string& salt) {
    auto p = greedy_request(prompt, 2);
    p.cache_salt = salt;
    auto s = eng.submit(p);
    eng.run_until_idle();
    return collect(*s);
  };
  EXPECT_EQ(run("tenant-a").stats.n_cached_tokens, 0);
  EXPECT_EQ(run("tenant-b").stats.n_cached_tokens, 0);
  EXPECT_EQ(run("").stats.n_cached_tokens, 0);
  EXPECT_EQ(run("tenant-a").stats.n_cached_tokens, 96);
  EXPECT_EQ(run("tenant-b").stats.n_cached_tokens, 96);
  eng.check_invariants();
}

TEST_F(EngineScheduling, RejectsWhatCannotFit) {
  engine::Engine eng(*lm_.model, engine::with_eog(small_config(4, 64), *lm_.tokenizer));
  std::mt19937_64 rng(3);
  EXPECT_THROW(eng.submit(greedy_request({}, 1)), Error);
  EXPECT_THROW(eng.submit(greedy_request(random_tokens(rng, 64, 512), 1)), Error);  // pool holds 64 tokens
  EXPECT_THROW(eng.submit(greedy_request({1, 999999}, 1)), Error);
  try {
    engine::Engine big(*lm_.model, engine::with_eog(small_config(1024, 64), *lm_.tokenizer));
    big.submit(greedy_request(random_tokens(rng, 5000, 512), 1));
    FAIL() << "a prompt longer than the context was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2048"), std::string::npos) << e.what();
  }
  // Generation stops at the pool's capacity instead of failing.
  auto s = eng.submit(greedy_request(random_tokens(rng, 40, 512), 100));
  eng.run_until_idle();
  const Outcome o = collect(*s);
  EXPECT_EQ(o.stats.finish, engine::FinishReason::Length);
  EXPECT_EQ(o.tokens.size(), 24u);
  eng.check_invariants();
  EXPECT_EQ(eng.counters().n_blocks_in_use, 0);
}

TEST_F(EngineScheduling, PreemptionUnderPressureKeepsOutputsExact) {
  std::mt19937_64 rng(4);
  // Four requests of ~100 tokens + 40 generated each in a pool of 20 blocks (320 tokens).
  engine::Engine eng(*lm_.model, engine::with_eog(small_config(20, 64), *lm_.tokenizer));
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(random_tokens(rng, 90 + 5 * static_cast<size_t>(i), 512));
    streams.push_back(eng.submit(greedy_request(prompts.back(), 40)));
  }
  while (eng.step()) eng.check_invariants();
  EXPECT_GT(eng.counters().n_preemptions, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    expect_identical(collect(*streams[i]), reference(prompts[i], 40), "request " + std::to_string(i));
  }
  EXPECT_EQ(eng.counters().n_blocks_in_use, 0);
}

TEST_F(EngineScheduling, CancellationFreesBlocksAtOnce) {
  std::mt19937_64 rng(5);
  engine::Engine eng(*lm_.model, engine::with_eog(small_config(64, 32), *lm_.tokenizer));
  auto s = eng.submit(greedy_request(random_tokens(rng, 150, 512), 50));
  eng.step();
  eng.step();
  EXPECT_GT(eng.counters().n_blocks_in_use, 0);
  s->cancel();
  eng.step();
  eng.check_invariants();
  EXPECT_EQ(eng.counters().n_blocks_in_use, 0);
  EXPECT_EQ(collect(*s).stats.finish, engine::FinishReason::Cancelled);
}

// Thousands of requests with random shared prefixes, lengths and cancellations in a pool small enough to force
// eviction and preemption. Every finished output equals its cold reference; invariants hold after every step.
TEST_F(EngineScheduling, RandomizedTrafficMatchesColdReferences) {
  std::mt19937_64 rng(6);
  const int32_t n_vocab = lm_.model->config().n_vocab;
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 6; ++i) prefixes.push_back(random_tokens(rng, 20 + rng() % 60, n_vocab));
  // A fixed menu of prompts (prefix + suffix) so cold references are computed once per prompt.
  std::vector<std::vector<int32_t>> menu;
  for (int i = 0; i < 60; ++i) {
    auto p = prefixes[rng() % prefixes.size()];
    const auto suffix = random_tokens(rng, 1 + rng() % 40, n_vocab);
    p.insert(p.end(), suffix.begin(), suffix.end());
    menu.push_back(p);
  }
  engine::Engine eng(*lm_.model, engine::with_eog(small_config(24, 48, 6), *lm_.tokenizer));
  struct Live {
    size_t prompt;
    int32_t n_new;
    std::shared_ptr<engine::RequestStream> stream;
  };
  std::vector<Live> live;
  int n_done = 0, n_cancelled = 0;
  int64_t n_cached_total = 0;
  constexpr int kRequests = 2000;
  int n_submitted = 0;
  while (n_submitted < kRequests || !live.empty()) {
    while (n_submitted < kRequests && live.size() < 8) {
      const size_t idx = rng() % menu.size();
      const int32_t n_new = 1 + static_cast<int32_t>(rng() % 4);
      live.push_back({idx, n_new, eng.submit(greedy_request(menu[idx], n_new))});
      ++n_submitted;
    }
    if (rng() % 10 == 0 && !live.empty()) live[rng() % live.size()].stream->cancel();
    eng.step();
    eng.check_invariants();
    for (size_t i = 0; i < live.size();) {
      if (!live[i].stream->finished()) {
        ++i;
        continue;
      }
      const Outcome o = collect(*live[i].stream);
      if (o.stats.finish == engine::FinishReason::Cancelled) {
        ++n_cancelled;
      } else {
        ASSERT_EQ(o.stats.finish, engine::FinishReason::Length);
        const Outcome ref = reference(menu[live[i].prompt], live[i].n_new);
        ASSERT_EQ(o.tokens, ref.tokens) << "request for prompt " << live[i].prompt;
        ASSERT_EQ(0, std::memcmp(o.logits.data(), ref.logits.data(), ref.logits.size() * sizeof(float)));
        n_cached_total += o.stats.n_cached_tokens;
        ++n_done;
      }
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  const auto c = eng.counters();
  EXPECT_EQ(c.n_blocks_in_use, 0);
  EXPECT_EQ(c.n_blocks_free + c.n_blocks_cached, c.n_blocks_total);
  EXPECT_GT(c.n_evictions, 0);
  EXPECT_GT(c.n_preemptions, 0);
  EXPECT_GT(n_cached_total, 0);
  EXPECT_GT(n_cancelled, 0);
  std::printf("[randomized] %d served, %d cancelled, %lld cached tokens, %lld evictions, %lld preemptions\n", n_done,
              n_cancelled, static_cast<long long>(n_cached_total), static_cast<long long>(c.n_evictions),
              static_cast<long long>(c.n_preemptions));
}

}  // namespace
}  // namespace preface::test

namespace preface::test {
namespace {

// Explicit caching: a pinned prefix survives pressure that evicts everything else, until its TTL passes
// (a fake clock drives time); a hit refreshes the TTL.
TEST_F(EngineScheduling, PinnedPrefixSurvivesEvictionUntilTtl) {
  std::mt19937_64 rng(7);
  auto fake_now = std::chrono::steady_clock::time_point{};
  auto cfg = small_config(16, 64);
  cfg.clock = [&] { return fake_now; };
  engine::Engine eng(*lm_.model, engine::with_eog(cfg, *lm_.tokenizer));
  const auto system = random_tokens(rng, 64, 512);
  auto pinned = greedy_request(system, 1);
  pinned.cache_pins.push_back({64, std::chrono::seconds(300)});
  auto s = eng.submit(pinned);
  eng.run_until_idle();
  EXPECT_EQ(collect(*s).stats.n_written_tokens, 64);
  EXPECT_EQ(eng.counters().n_pinned_blocks, 4);
  auto flood = [&] {  // fill the rest of the pool twice over with unrelated prompts
    for (int i = 0; i < 6; ++i) {
      auto f = eng.submit(greedy_request(random_tokens(rng, 100, 512), 1));
      eng.run_until_idle();
      collect(*f);
    }
  };
  auto hit_count = [&] {
    auto again = system;
    again.push_back(7);
    auto h = eng.submit(greedy_request(again, 1));
    eng.run_until_idle();
    return collect(*h).stats.n_cached_tokens;
  };
  flood();
  EXPECT_EQ(hit_count(), 64);  // survived the flood; this hit refreshes the TTL to t=200s+300s
  fake_now += std::chrono::seconds(200);
  EXPECT_EQ(hit_count(), 64);
  fake_now += std::chrono::seconds(250);  // 450 s: alive only because the hit at 200 s refreshed it
  flood();
  EXPECT_EQ(hit_count(), 64);
  fake_now += std::chrono::seconds(301);
  eng.step();  // expiry happens at a step
  EXPECT_EQ(eng.counters().n_pinned_blocks, 0);
  flood();
  EXPECT_EQ(hit_count(), 0);
  eng.check_invariants();
}

}  // namespace
}  // namespace preface::test
