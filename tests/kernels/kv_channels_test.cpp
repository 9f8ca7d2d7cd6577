// Per-channel key groups (kernels/kv_channels.h): the layout's size, each value within half a step of the channel
// (plus the f16 rounding of its minimum), a channel's bytes depending on its own column only, and non-finite
// values that never reach another value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kv_channels.h"
#include "kernels/kv_rows.h"
#include "util/fp16.h"

namespace preface::kernels {
namespace {

constexpr size_t kN = 64;  // values per row

// 32 rows of kN values; channel c has its own offset and spread (an "outlier" channel every 16).
std::vector<float> group_rows(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(32 * kN);
  for (size_t r = 0; r < 32; ++r) {
    for (size_t c = 0; c < kN; ++c) {
      const float spread = c % 16 == 3 ? 20.0f : 0.5f + 0.05f * static_cast<float>(c);
      x[r * kN + c] = static_cast<float>(c) * 0.25f - 4.0f + spread * normal(rng);
    }
  }
  return x;
}

std::vector<uint8_t> seal(KvType t, const std::vector<float>& x) {
  std::vector<uint8_t> g(32 * kv_row_bytes(t, kN), 0xAB);
  kv_seal_group(t, x.data(), kN, kN, g.data());
  return g;
}

std::vector<float> widen(KvType t, const std::vector<uint8_t>& g) {
  std::vector<float> y(32 * kN);
  kv_widen_group(t, g.data(), kN, 0, kN, 32, y.data(), kN);
  return y;
}

TEST(KvChannels, GroupBytesAreTheRowsOfThePool) {
  EXPECT_EQ(32 * kv_row_bytes(KvType::Q8_PC, kN), 4 * kN + 32 * kN);
  EXPECT_EQ(32 * kv_row_bytes(KvType::Q4_PC, kN), 4 * kN + 16 * kN);
  EXPECT_TRUE(kv_type_is_per_channel(KvType::Q4_PC));
  EXPECT_FALSE(kv_type_is_per_channel(KvType::Q4_1));
  EXPECT_EQ(parse_kv_type("Q8_PC"), KvType::Q8_PC);
}

TEST(KvChannels, EveryValueWithinHalfAStepOfItsChannel) {
  const std::vector<float> x = group_rows(1);
  for (KvType t : kChannelKvTypes) {
    const float levels = t == KvType::Q8_PC ? 255.0f : 15.0f;
    const std::vector<float> y = widen(t, seal(t, x));
    for (size_t c = 0; c < kN; ++c) {
      float lo = INFINITY, hi = -INFINITY;
      for (size_t r = 0; r < 32; ++r) {
        lo = std::min(lo, x[r * kN + c]);
        hi = std::max(hi, x[r * kN + c]);
      }
      // Half a step, the f16 rounding of the scale over 255 steps and of the minimum, and a little slack.
      const float step = (hi - lo) / levels;
      const float tol = 0.5f * step + levels * step * 1e-3f + std::fabs(lo) * 1e-3f + 1e-6f;
      for (size_t r = 0; r < 32; ++r) {
        EXPECT_NEAR(y[r * kN + c], x[r * kN + c], tol) << kv_type_name(t) << " row " << r << " channel " << c;
      }
    }
  }
}

TEST(KvChannels, PerChannelBeatsPerTokenOnAnOutlierChannel) {
  // The reason for the type: one large channel sets a per-token block's scale for every value of the row.
  const std::vector<float> x = group_rows(2);
  // Against q4_1, the per-token type of the same 20 bytes per 32 values (a scale and a minimum per block).
  const std::vector<float> y = widen(KvType::Q4_PC, seal(KvType::Q4_PC, x));
  double err_channel = 0.0, err_token = 0.0;
  std::vector<uint8_t> row(kv_row_bytes(KvType::Q4_1, kN));
  for (size_t r = 0; r < 32; ++r) {
    kv_write_row(KvType::Q4_1, x.data() + r * kN, row.data(), kN);
    for (size_t c = 0; c < kN; ++c) {
      err_channel += std::fabs(y[r * kN + c] - x[r * kN + c]);
      err_token += std::fabs(kv_value(KvType::Q4_1, row.data(), c) - x[r * kN + c]);
    }
  }
  EXPECT_LT(err_channel, 0.5 * err_token);
}

TEST(KvChannels, AChannelsBytesDependOnItsColumnOnly) {
  for (KvType t : kChannelKvTypes) {
    std::vector<float> x = group_rows(3);
    const std::vector<uint8_t> a = seal(t, x);
    for (size_t r = 0; r < 32; ++r) x[r * kN + 5] *= 3.0f;  // channel 5 only (an odd one: a high nibble)
    const std::vector<uint8_t> b = seal(t, x);
    const std::vector<float> ya = widen(t, a), yb = widen(t, b);
    for (size_t r = 0; r < 32; ++r) {
      for (size_t c = 0; c < kN; ++c) {
        if (c == 5) continue;
        ASSERT_EQ(std::memcmp(&ya[r * kN + c], &yb[r * kN + c], sizeof(float)), 0) << kv_type_name(t);
      }
    }
    EXPECT_EQ(seal(t, x), b) << kv_type_name(t) << ": sealing is a function of the values";
  }
}

TEST(KvChannels, WideningAChannelRangeMatchesTheWholeGroup) {
  const std::vector<float> x = group_rows(4);
  for (KvType t : kChannelKvTypes) {
    const std::vector<uint8_t> g = seal(t, x);
    const std::vector<float> all = widen(t, g);
    std::vector<float> part(7 * 16);
    kv_widen_group(t, g.data(), kN, 17, 16, 7, part.data(), 16);
    for (size_t r = 0; r < 7; ++r) {
      EXPECT_EQ(std::memcmp(&part[r * 16], &all[r * kN + 17], 16 * sizeof(float)), 0) << kv_type_name(t);
    }
  }
}

TEST(KvChannels, NonFiniteValuesStayInTheirPlace) {
  for (KvType t : kChannelKvTypes) {
    std::vector<float> x = group_rows(5);
    x[3 * kN + 9] = std::numeric_limits<float>::quiet_NaN();
    x[4 * kN + 9] = INFINITY;
    for (size_t r = 0; r < 32; ++r) x[r * kN + 11] = -INFINITY;  // a channel with no finite value
    const std::vector<float> y = widen(t, seal(t, x));
    for (float v : y) EXPECT_TRUE(std::isfinite(v)) << kv_type_name(t);
    std::vector<float> clean = group_rows(5);
    const std::vector<float> yc = widen(t, seal(t, clean));
    for (size_t r = 0; r < 32; ++r) {
      EXPECT_EQ(y[r * kN + 11], 0.0f);
      EXPECT_EQ(y[r * kN + 20], yc[r * kN + 20]);  // another channel: unchanged
    }
  }
}

TEST(KvChannels, OnlyPerChannelTypesSealOrWiden) {
  std::vector<float> x(32 * kN, 1.0f);
  std::vector<uint8_t> g(32 * kv_row_bytes(KvType::Q8_0, kN));
  EXPECT_THROW(kv_seal_group(KvType::Q8_0, x.data(), kN, kN, g.data()), std::logic_error);
  EXPECT_THROW(kv_widen_group(KvType::F16, g.data(), kN, 0, 1, 1, x.data(), kN), std::logic_error);
}

}  // namespace
}  // namespace preface::kernels
