// Sampler: greedy, each filter on a crafted distribution, penalties, seeding, and empirical frequencies.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "util/error.h"

namespace preface::test {
namespace {

using engine::Sampler;
using engine::SamplingParams;

// logits = log(p) for p = {0.05, 0.4, 0.1, 0.3, 0.15}: sorted ids by probability 1, 3, 4, 2, 0.
const std::vector<float> kLogits = {std::log(0.05f), std::log(0.4f), std::log(0.1f), std::log(0.3f),
                                    std::log(0.15f)};

// The set of ids drawn in n samples.
std::set<int32_t> drawn(SamplingParams p, int n = 2000, std::vector<float> logits = kLogits) {
  Sampler s(p);
  std::set<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.insert(s.sample(logits.data(), static_cast<int32_t>(logits.size()), {}));
  return ids;
}

SamplingParams at_temperature(float t) {
  SamplingParams p;
  p.temperature = t;
  p.seed = 42;
  return p;
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s(SamplingParams{});
  EXPECT_EQ(s.sample(kLogits.data(), 5, {}), 1);
  const std::vector<float> tied = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(tied.data(), 4, {}), 1);
}

// Greedy without penalties takes the argmax straight from the logits; with a penalty that touches nothing (empty
// history) it goes through the (logit, id) pairs. Both pick the same id, ties and NaNs included.
TEST(Sampler, GreedyFastPathEqualsPairPath) {
  SamplingParams penalised;
  penalised.repeat_penalty = 1.5f;
  Sampler fast(SamplingParams{}), pairs(penalised);
  std::vector<float> logits(1000);
  for (int round = 0; round < 50; ++round) {
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7919 + round * 104729) % 97);
    if (round % 3 == 1) logits[(round * 31) % logits.size() + 1 - (round % 2)] = NAN;
    if (round % 5 == 2) logits[0] = NAN;
    const int32_t n = static_cast<int32_t>(logits.size()) - round;
    EXPECT_EQ(fast.sample(logits.data(), n, {}), pairs.sample(logits.data(), n, {})) << "round " << round;
  }
  const std::vector<float> nan_first = {NAN, 3.0f, 5.0f, 5.0f};
  EXPECT_EQ(fast.sample(nan_first.data(), 4, {}), pairs.sample(nan_first.data(), 4, {}));
  const std::vector<float> nan_later = {1.0f, NAN, 5.0f, 2.0f, 5.0f};
  EXPECT_EQ(fast.sample(nan_later.data(), 5, {}), 2);
}

TEST(Sampler, Temperature1DrawsEveryToken) { EXPECT_EQ(drawn(at_temperature(1.0f)).size(), 5u); }

TEST(Sampler, TopK) {
  SamplingParams p = at_temperature(1.0f);
  p.top_k = 2;
  EXPECT_EQ(drawn(p), (std::set<int32_t>{1, 3}));
  p.top_k = 1;
  EXPECT_EQ(drawn(p), (std::set<int32_t>{1}));
}

TEST(Sampler, TopP) {
  SamplingParams p = at_temperature(1.0f);
  p.top_p = 0.69f;  // 0.4 + 0.3 = 0.7 reaches it
  EXPECT_EQ(drawn(p), (std::set<int32_t>{1, 3}));
  p.top_p = 0.71f;  // needs the 0.15 too
  EXPECT_EQ(drawn(p), (std::set<int32_t>{1, 3, 4}));
}

TEST(Sampler, MinP) {
  SamplingParams p = at_temperature(1.0f);
  p.min_p = 0.3f;  // keeps p >= 0.12
  EXPECT_EQ(drawn(p), (std::set<int32_t>{1, 3, 4}));
  p.min_p = 0.9f;
  EXPECT_EQ(drawn(p), (std::set<int32_t>{1}));
}

TEST(Sampler, LowTemperatureConcentratesOnTheBest) {
  Sampler s(at_temperature(0.05f));
  int best = 0;
  for (int i = 0; i < 1000; ++i) best += s.sample(kLogits.data(), 5, {}) == 1;
  EXPECT_GT(best, 990);
}

TEST(Sampler, RepetitionPenaltyLlamaCppSemantics) {
  // Positive logits are divided, negative ones multiplied: 2.0 / 4 = 0.5 < 1.0, so id 0 loses its lead; a
  // negative logit gets more negative.
  SamplingParams p;
  p.repeat_penalty = 4.0f;
  Sampler s(p);
  const std::vector<float> logits = {2.0f, 1.0f, -0.1f};
  const std::vector<int32_t> history = {0, 0, 2};
  EXPECT_EQ(s.sample(logits.data(), 3, history), 1);
  const std::vector<float> neg = {-0.1f, -0.3f};
  const std::vector<int32_t> h0 = {0};
  EXPECT_EQ(s.sample(neg.data(), 2, h0), 1);  // -0.4 < -0.3
  // Only the last repeat_last_n tokens count.
  p.repeat_last_n = 1;
  Sampler window(p);
  const std::vector<int32_t> old = {0, 2};
  EXPECT_EQ(window.sample(logits.data(), 3, old), 0);
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
  const std::vector<float> logits = {1.0f, 0.8f, 0.0f};
  const std::vector<int32_t> history = {0, 1, 1, 1};
  SamplingParams p;
  p.presence_penalty = 0.5f;  // 0.5, 0.3
  EXPECT_EQ(Sampler(p).sample(logits.data(), 3, history), 0);
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.3f;  // 0.7, -0.1
  EXPECT_EQ(Sampler(p).sample(logits.data(), 3, history), 0);
  p.frequency_penalty = 1.0f;  // 0.0, -2.2, 0.0: tie of ids 0 and 2 -> 0
  EXPECT_EQ(Sampler(p).sample(logits.data(), 3, history), 0);
  p.presence_penalty = 0.1f;  // -0.1, -2.3, 0.0
  EXPECT_EQ(Sampler(p).sample(logits.data(), 3, history), 2);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedsDiffer) {
  std::vector<float> logits(100);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  auto sequence = [&](uint64_t seed) {
    SamplingParams p = at_temperature(1.0f);
    p.seed = seed;
    p.top_k = 50;
    p.top_p = 0.95f;
    Sampler s(p);
    std::vector<int32_t> ids;
    for (int i = 0; i < 64; ++i) ids.push_back(s.sample(logits.data(), 100, ids));
    return ids;
  };
  EXPECT_EQ(sequence(7), sequence(7));
  EXPECT_NE(sequence(7), sequence(8));
}

TEST(Sampler, FrequenciesFollowTheSoftmaxAtTemperature1) {
  constexpr int kDraws = 20000;
  Sampler s(at_temperature(1.0f));
  std::vector<int> counts(5, 0);
  for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(s.sample(kLogits.data(), 5, {}))];
  const double expected[5] = {0.05, 0.4, 0.1, 0.3, 0.15};
  for (size_t i = 0; i < 5; ++i) {
    // ~5 standard deviations of a binomial proportion at these counts.
    const double sd = std::sqrt(expected[i] * (1 - expected[i]) / kDraws);
    EXPECT_NEAR(static_cast<double>(counts[i]) / kDraws, expected[i], 5 * sd) << "id " << i;
  }
}

TEST(Sampler, BadParametersAreErrors) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace
}  // namespace preface::test
