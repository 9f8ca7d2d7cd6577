// engine::ShadowVerifier's bookkeeping without an engine: which hits are sampled, the bounded queue, the
// bit-for-bit comparison, and what happens to a shadow that finishes before or after its comparison.
#include "engine/shadow_verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace preface::engine {
namespace {

const std::vector<int32_t> kPrompt = {1, 2, 3};

TEST(ShadowVerifier, SamplesEveryKthHitAndBoundsTheQueue) {
  ShadowVerifier v(0.5, 2);
  const std::vector<float> logits = {0.5f, -1.0f};
  v.note_hit(1, kPrompt, "", 0, logits);  // not a hit: never sampled, never counted
  for (uint64_t id = 2; id <= 7; ++id) v.note_hit(id, kPrompt, "", 16, logits);  // hits 1..6: 2, 4, 6 sampled
  EXPECT_EQ(v.n_pending(), 2);
  EXPECT_EQ(v.n_dropped(), 1);  // the third sampled hit found the queue full
  EXPECT_FALSE(ShadowVerifier(0.0, 8).enabled());
}

TEST(ShadowVerifier, ComparesBitsAndRequeuesAYieldedShadow) {
  ShadowVerifier v(1.0, 8);
  std::vector<float> logits = {0.25f, 2.0f, -0.0f};
  v.note_hit(10, kPrompt, "salt", 16, logits);
  v.note_hit(11, kPrompt, "salt", 16, logits);
  ASSERT_TRUE(v.has_pending());
  const ShadowVerifier::Verification& first = v.start(100);
  EXPECT_EQ(first.request_id, 10u);
  EXPECT_EQ(first.salt, "salt");
  EXPECT_TRUE(v.is_shadow(100));
  EXPECT_FALSE(v.is_shadow(10));
  v.on_finish(/*requeue=*/true);  // yielded to live work before its first token: back to the front
  EXPECT_FALSE(v.active());
  EXPECT_EQ(v.start(101).request_id, 10u);
  v.check(logits.data());
  v.on_finish(/*requeue=*/true);  // compared already: not queued again
  EXPECT_EQ(v.n_match(), 1);
  EXPECT_EQ(v.start(102).request_id, 11u);
  logits[2] = 0.0f;  // +0 where the hit had -0: equal as floats, different bits
  v.check(logits.data());
  v.on_finish(false);
  EXPECT_EQ(v.n_mismatch(), 1);
  EXPECT_EQ(v.n_pending(), 0);
  v.note_hit(12, kPrompt, "", 16, logits);
  v.start(103);
  v.on_finish(/*requeue=*/false);  // failed before its comparison: dropped
  EXPECT_EQ(v.n_dropped(), 1);
}

}  // namespace
}  // namespace preface::engine
