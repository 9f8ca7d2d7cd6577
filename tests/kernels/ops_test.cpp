// rmsnorm, rope, softmax, swiglu against straightforward double-precision references.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include <cstring>

#include "kernels/kernel_test_util.h"
#include "util/error.h"

namespace preface::kernels {
namespace {

using test::random_floats;

TEST(RmsNorm, MatchesReference) {
  for (size_t n : {1, 7, 64, 4096}) {
    const auto x = random_floats(n, 1, 3.0f);
    const auto w = random_floats(n, 2);
    const float eps = 1e-5f;
    std::vector<float> out(n);
    rmsnorm(x.data(), w.data(), out.data(), n, eps);
    double ss = 0;
    for (float v : x) ss += double{v} * v;
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (size_t i = 0; i < n; ++i) {
      const double ref = x[i] * scale * w[i];
      EXPECT_NEAR(out[i], ref, 4e-7 * std::fabs(ref) + 1e-12) << "n " << n << " i " << i;
    }
    auto inplace = x;  // out may alias x
    rmsnorm(inplace.data(), w.data(), inplace.data(), n, eps);
    EXPECT_EQ(std::memcmp(inplace.data(), out.data(), n * sizeof(float)), 0);
  }
}

TEST(RmsNorm, ZeroInputStaysFinite) {
  std::vector<float> x(16, 0.0f), w(16, 1.0f), out(16);
  rmsnorm(x.data(), w.data(), out.data(), 16, 1e-6f);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

// Rotates pairs in double with theta_i = pos * base^(-2i/n_rot).
std::vector<float> rope_reference(const std::vector<float>& x, size_t n_heads, size_t head_dim, size_t n_rot,
                                  int pos, double base, bool neox) {
  std::vector<float> out = x;  // [n_heads][head_dim]
  for (size_t h = 0; h < n_heads; ++h) {
    for (size_t i = 0; i < n_rot / 2; ++i) {
      const double theta = pos * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
      const size_t a = h * head_dim + (neox ? i : 2 * i);
      const size_t b = neox ? a + n_rot / 2 : a + 1;
      const double x0 = x[a], x1 = x[b];
      out[a] = static_cast<float>(x0 * std::cos(theta) - x1 * std::sin(theta));
      out[b] = static_cast<float>(x0 * std::sin(theta) + x1 * std::cos(theta));
    }
  }
  return out;
}

TEST(Rope, MatchesDoubleReferenceBothModes) {
  struct Shape {
    size_t n_heads, head_dim, n_rot;
  };
  for (const Shape s : {Shape{4, 64, 64}, Shape{3, 64, 32}, Shape{2, 128, 96}, Shape{1, 10, 2}}) {
    for (bool neox : {false, true}) {
      for (int pos : {0, 1, 17, 500, 3000}) {
        for (float base : {10000.0f, 1e6f}) {
          SCOPED_TRACE("heads " + std::to_string(s.n_heads) + " dim " + std::to_string(s.head_dim) + " rot " +
                       std::to_string(s.n_rot) + (neox ? " neox" : " adjacent") + " pos " + std::to_string(pos) +
                       " base " + std::to_string(base));
          const auto x = random_floats(s.n_heads * s.head_dim, 3 + pos);
          auto got = x;
          rope(got.data(), s.n_heads, s.head_dim, s.n_rot, pos, base, neox);
          const auto ref = rope_reference(x, s.n_heads, s.head_dim, s.n_rot, pos, base, neox);
          // theta is built by repeated float multiplication (as ggml does): its error grows with pos.
          const double tol = 2e-6 + 3e-7 * pos;
          for (size_t h = 0; h < s.n_heads; ++h) {
            for (size_t d = 0; d < s.head_dim; ++d) {
              const size_t i = h * s.head_dim + d;
              if (d >= s.n_rot) {
                ASSERT_EQ(got[i], x[i]) << "unrotated dim " << d << " changed";
              } else {
                ASSERT_NEAR(got[i], ref[i], tol) << "head " << h << " dim " << d;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Rope, ModesPairDifferentDims) {
  // One head, x = e_1: adjacent mode rotates it with e_0 (theta_0 = pos), neox with e_{1 + n_rot/2}.
  std::vector<float> adj(8, 0.0f), neox(8, 0.0f);
  adj[1] = neox[1] = 1.0f;
  rope(adj.data(), 1, 8, 8, 1, 10000.0f, false);
  rope(neox.data(), 1, 8, 8, 1, 10000.0f, true);
  EXPECT_NEAR(adj[0], -std::sin(1.0), 1e-6);
  EXPECT_NEAR(adj[1], std::cos(1.0), 1e-6);
  const double theta1 = std::pow(10000.0, -2.0 / 8);
  EXPECT_NEAR(neox[1], std::cos(theta1), 1e-6);
  EXPECT_NEAR(neox[5], std::sin(theta1), 1e-6);
  EXPECT_EQ(neox[0], 0.0f);
}

TEST(Rope, RejectsBadRotationCount) {
  std::vector<float> x(16);
  EXPECT_THROW(rope(x.data(), 1, 16, 7, 0, 10000.0f, false), Error);
  EXPECT_THROW(rope(x.data(), 1, 16, 18, 0, 10000.0f, true), Error);
}

// YaRN against the formula in double precision (ggml_rope_yarn_corr_dims, rope_yarn_ramp, rope_yarn); inactive
// settings give the plain scaled rotation bit for bit.
TEST(Rope, YarnMatchesReference) {
  constexpr size_t kRot = 64;
  const float base = 10000.0f, freq_scale = 0.25f;
  RopeYarn yarn;
  std::vector<float> plain(kRot), got(kRot);
  for (int pos : {0, 1, 17, 63, 500}) {
    rope_cos_sin(pos, kRot, base, freq_scale, nullptr, plain.data());
    rope_cos_sin(pos, kRot, base, freq_scale, nullptr, yarn, got.data());
    EXPECT_EQ(std::memcmp(plain.data(), got.data(), kRot * sizeof(float)), 0) << "inactive yarn, pos " << pos;
  }
  yarn.ext_factor = 1.0f;
  yarn.n_ctx_orig = 64;
  const auto corr = [&](double beta) { return kRot * std::log(64.0 / (2 * M_PI * beta)) / (2 * std::log(double(base))); };
  const double low = std::max(0.0, std::floor(corr(32.0))), high = std::min(kRot - 1.0, std::ceil(corr(1.0)));
  ASSERT_EQ(low, 0.0);
  ASSERT_EQ(high, 9.0);  // pairs 0..8 ramp from extrapolated to interpolated; 9 and above interpolate
  const double mscale = 1.0 + 0.1 * std::log(4.0);
  for (int pos : {1, 17, 63, 500}) {
    rope_cos_sin(pos, kRot, base, freq_scale, nullptr, yarn, got.data());
    for (size_t i = 0; i < kRot / 2; ++i) {
      const double extrap = pos * std::pow(double(base), -2.0 * i / kRot), interp = freq_scale * extrap;
      const double mix = 1.0 - std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double theta = interp * (1 - mix) + extrap * mix;
      EXPECT_NEAR(got[2 * i], std::cos(theta) * mscale, 2e-5 * (1 + std::fabs(theta))) << pos << " " << i;
      EXPECT_NEAR(got[2 * i + 1], std::sin(theta) * mscale, 2e-5 * (1 + std::fabs(theta))) << pos << " " << i;
    }
  }
}

TEST(Softmax, MatchesReference) {
  for (size_t n : {1, 5, 100, 4096}) {
    auto x = random_floats(n, 4, 20.0f);
    x[0] = 1000.0f;  // large values must not overflow
    auto got = x;
    softmax(got.data(), n);
    double max = -INFINITY, sum = 0, total = 0;
    for (float v : x) max = std::fmax(max, v);
    for (float v : x) sum += std::exp(v - max);
    for (size_t i = 0; i < n; ++i) {
      const double ref = std::exp(x[i] - max) / sum;
      EXPECT_NEAR(got[i], ref, 1e-6 * ref + 1e-30) << "n " << n << " i " << i;
      total += got[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  std::vector<float> masked = {0.0f, -INFINITY, 0.0f};
  softmax(masked.data(), 3);
  EXPECT_EQ(masked, (std::vector<float>{0.5f, 0.0f, 0.5f}));
}

TEST(Swiglu, MatchesReference) {
  const size_t n = 1001;
  const auto gate0 = random_floats(n, 5, 8.0f);
  const auto up = random_floats(n, 6, 2.0f);
  auto gate = gate0;
  swiglu(gate.data(), up.data(), n);
  for (size_t i = 0; i < n; ++i) {
    const double g = gate0[i];
    const double ref = g / (1.0 + std::exp(-g)) * up[i];
    EXPECT_NEAR(gate[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << i;
  }
}

// exp(-g) underflows to 0 for g > 87.34 and overflows for g < -88.73: silu(g) * u is then exactly g * u, or zero.
// The vectorized exp computes such lanes from a stand-in value and masks them: a lane leaking through would not
// be exact here.
TEST(Swiglu, SaturatesExactly) {
  std::vector<const char*> paths = {"scalar"};
  if (avx2::available()) paths.push_back("avx2");
  for (const char* path : paths) {
    for (const float sign : {1.0f, -1.0f}) {
      std::vector<float> gate = {89.0f, 90.0f, 95.0f, 100.0f, 200.0f, 1e3f, 1e4f, 3e38f};  // one 8-lane step
      if (sign > 0) gate[0] = 87.5f;
      for (float& g : gate) g *= sign;
      const std::vector<float> up(gate.size(), -1.5f);
      auto out = gate;
      if (std::strcmp(path, "avx2") == 0) {
        avx2::swiglu(out.data(), up.data(), out.size());
      } else {
        scalar::swiglu(out.data(), up.data(), out.size());
      }
      for (size_t i = 0; i < gate.size(); ++i) {
        if (sign > 0) {
          EXPECT_EQ(out[i], gate[i] * up[i]) << path << " g=" << gate[i];
        } else {
          EXPECT_EQ(out[i], 0.0f) << path << " g=" << gate[i];
        }
      }
    }
  }
}

// Every path gives the same bits (lengths around the 8-lane step, -inf and huge gaps, a NaN), and the result is
// a log-softmax's normaliser to float precision.
TEST(LogitStats, PathsBitIdenticalAndAccurate) {
  std::vector<std::vector<float>> inputs;
  for (size_t n : {1u, 7u, 8u, 9u, 31u, 1000u, 32000u, 49153u}) inputs.push_back(random_floats(n, 1234 + n, 12.0f));
  inputs.push_back({-INFINITY, 3.0f, -INFINITY, -200.0f, 1e30f, -1e30f, 0.0f, 88.5f, -90.0f});
  inputs.push_back({-INFINITY, -INFINITY, -INFINITY});
  inputs.push_back({1.0f, NAN, 2.0f, 0.5f, -1.0f, 4.0f, 3.0f, 2.0f, 1.0f, NAN});
  for (const auto& x : inputs) {
    const LogitStats s = scalar::logit_stats(x.data(), x.size());
    if (avx2::available()) {
      const LogitStats v = avx2::logit_stats(x.data(), x.size());
      EXPECT_EQ(0, std::memcmp(&s.max, &v.max, sizeof(float))) << x.size() << ": " << s.max << " vs " << v.max;
      EXPECT_EQ(0, std::memcmp(&s.sum_exp, &v.sum_exp, sizeof(float)))
          << x.size() << ": " << s.sum_exp << " vs " << v.sum_exp;
    }
    double max = -INFINITY, sum = 0;
    bool any_nan = false;
    for (float v : x) max = v > max ? v : max;
    for (float v : x) any_nan = any_nan || std::isnan(v);
    for (float v : x) sum += std::isnan(v) ? 0.0 : std::exp(static_cast<double>(v) - max);
    EXPECT_EQ(s.max, max) << x.size();  // NaN never wins the max
    if (any_nan) {
      EXPECT_TRUE(std::isnan(s.sum_exp)) << "a NaN logit makes every log-probability NaN";
    } else if (std::isfinite(max)) {
      EXPECT_NEAR(s.sum_exp, sum, 1e-5 * sum + 1e-30) << x.size();
    }
  }
}

TEST(LogitStats, ExpPolyMatchesStdExp) {
  for (float x = -87.0f; x < 88.0f; x += 0.37f) {
    EXPECT_NEAR(scalar::exp_poly(x), std::exp(x), 4e-7 * std::exp(x)) << x;
  }
  EXPECT_EQ(scalar::exp_poly(0.0f), 1.0f);
  EXPECT_EQ(scalar::exp_poly(-INFINITY), 0.0f);
  EXPECT_EQ(scalar::exp_poly(89.0f), INFINITY);
}

}  // namespace
}  // namespace preface::kernels
