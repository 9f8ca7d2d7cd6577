// Scalar transformer ops following ggml's CPU reference arithmetic (ggml_compute_forward_rms_norm_f32,
// ggml_rope_cache_init / rope_yarn, ggml_vec_soft_max_f32, ggml_vec_swiglu_f32) so results track
// llama.cpp's closely. Every reduction runs left to right in a fixed order.
#include "kernels/ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "util/error.h"

namespace preface::kernels {

void rmsnorm(const float* x, const float* w, float* out, size_t n, float eps) {
  if (n == 0) return;
  // As ggml: squares in float, summed in double, mean rounded to float, scale = 1/sqrtf(mean + eps); the weight
  // is applied afterwards (a separate ggml_mul), hence (x * scale) * w. The double sum runs in four interleaved
  // partial sums (value i into sum i % 4, then (s0 + s1) + (s2 + s3)) to shorten the dependency chain; the order
  // is fixed by n. Its rounding is far below the float mean's, so the mean almost always equals ggml's.
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t k = 0; k < 4; ++k) s[k] += static_cast<double>(x[i + k] * x[i + k]);
  }
  for (size_t k = 0; i < n; ++i, ++k) s[k] += static_cast<double>(x[i] * x[i]);
  const double sum = (s[0] + s[1]) + (s[2] + s[3]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (i = 0; i < n; ++i) out[i] = (x[i] * scale) * w[i];
}

namespace {

void check_rope(size_t n_rot, size_t head_dim) {
  if (n_rot % 2 != 0 || n_rot > head_dim) {
    throw Error("rope: n_rot " + std::to_string(n_rot) + " must be even and at most head_dim " +
                std::to_string(head_dim));
  }
}

}  // namespace

void rope_cos_sin(int pos, size_t n_rot, float base, float* cos_sin) {
  // As ggml: theta_0 = pos, theta_{i+1} = theta_i * base^(-2/n_rot), all in float.
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (size_t i = 0; i < n_rot / 2; ++i) {
    cos_sin[2 * i] = std::cos(theta);
    cos_sin[2 * i + 1] = std::sin(theta);
    theta *= theta_scale;
  }
}

void rope_cos_sin(int pos, size_t n_rot, float base, float freq_scale, const float* freq_factors, float* cos_sin) {
  if (freq_scale == 1.0f && freq_factors == nullptr) {
    rope_cos_sin(pos, n_rot, base, cos_sin);
    return;
  }
  // ggml's rope cache with ext_factor 0 and attn_factor 1: theta = freq_scale * (theta_base / ff).
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta_base = static_cast<float>(pos);
  for (size_t i = 0; i < n_rot / 2; ++i) {
    const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
    const float theta = freq_scale * (theta_base / ff);
    cos_sin[2 * i] = std::cos(theta);
    cos_sin[2 * i + 1] = std::sin(theta);
    theta_base *= theta_scale;
  }
}

void rope_cos_sin(int pos, size_t n_rot, float base, float freq_scale, const float* freq_factors, const RopeYarn& yarn,
                  float* cos_sin) {
  if (!yarn.active()) {
    rope_cos_sin(pos, n_rot, base, freq_scale, freq_factors, cos_sin);
    return;
  }
  // ggml_rope_yarn_corr_dims, in float as ggml.
  const auto corr_dim = [&](float beta) {
    const float n_ctx = static_cast<float>(yarn.n_ctx_orig);
    return static_cast<float>(n_rot) * std::log(n_ctx / (beta * 2 * std::numbers::pi_v<float>)) / (2 * std::log(base));
  };
  const float low = std::max(0.0f, std::floor(corr_dim(yarn.beta_fast)));
  const float high = std::min(static_cast<float>(n_rot) - 1, std::ceil(corr_dim(yarn.beta_slow)));
  float mscale = yarn.attn_factor;
  if (yarn.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta_base = static_cast<float>(pos);
  for (size_t i = 0; i < n_rot / 2; ++i) {
    const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
    const float theta_extrap = theta_base / ff;
    const float theta_interp = freq_scale * theta_extrap;
    float theta = theta_interp;
    if (yarn.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
      const float mix = (1 - std::min(1.0f, std::max(0.0f, y))) * yarn.ext_factor;
      theta = theta_interp * (1 - mix) + theta_extrap * mix;
    }
    cos_sin[2 * i] = std::cos(theta) * mscale;
    cos_sin[2 * i + 1] = std::sin(theta) * mscale;
    theta_base *= theta_scale;
  }
}

void rope_apply(float* x, size_t n_heads, size_t head_dim, size_t n_rot, const float* cos_sin, bool neox) {
  check_rope(n_rot, head_dim);
  const size_t n_pairs = n_rot / 2;
  // Pair i is (x[2i], x[2i+1]) (adjacent) or (x[i], x[i + n_rot/2]) (neox); dims >= n_rot are unchanged.
  const size_t stride = neox ? 1 : 2;
  const size_t partner = neox ? n_pairs : 1;
  for (size_t h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;  // [head_dim]
    for (size_t i = 0; i < n_pairs; ++i) {
      const float c = cos_sin[2 * i];
      const float s = cos_sin[2 * i + 1];
      float* a = head + i * stride;
      const float x0 = a[0];
      const float x1 = a[partner];
      a[0] = x0 * c - x1 * s;
      a[partner] = x0 * s + x1 * c;
    }
  }
}

void rope(float* x, size_t n_heads, size_t head_dim, size_t n_rot, int pos, float base, bool neox) {
  check_rope(n_rot, head_dim);
  if (n_rot == 0) return;
  // cos_sin: [n_rot] on the stack for the usual sizes.
  constexpr size_t kStackValues = 512;
  float stack_buf[kStackValues];
  std::vector<float> heap_buf;
  float* cos_sin = stack_buf;
  if (n_rot > kStackValues) {
    heap_buf.resize(n_rot);
    cos_sin = heap_buf.data();
  }
  rope_cos_sin(pos, n_rot, base, cos_sin);
  rope_apply(x, n_heads, head_dim, n_rot, cos_sin, neox);
}

void softmax(float* x, size_t n) {
  if (n == 0) return;
  float max = -INFINITY;
  for (size_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  // ggml: exp in float, sum in double, then one multiply by the float reciprocal.
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(float* gate, const float* up, size_t n) { kernel_table().swiglu(gate, up, n); }

LogitStats logit_stats(const float* x, size_t n) { return kernel_table().logit_stats(x, n); }

float scalar::exp_poly(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.0f) return INFINITY;
  if (x < -87.33654475f) return 0.0f;
  const float n = std::nearbyint(x * 1.44269504088896341f);  // [-126, 127], ties to even like _mm256_round_ps
  float r = std::fma(-n, 0.693359375f, x);
  r = std::fma(-n, -2.12194440e-4f, r);
  float y = 1.9875691500e-4f;
  y = std::fma(y, r, 1.3981999507e-3f);
  y = std::fma(y, r, 8.3334519073e-3f);
  y = std::fma(y, r, 4.1665795894e-2f);
  y = std::fma(y, r, 1.6666665459e-1f);
  y = std::fma(y, r, 5.0000001201e-1f);
  y = std::fma(y, r * r, r) + 1.0f;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  return y * std::bit_cast<float>(bits);
}

float softcap_tanh(float x) {
  const float t = scalar::exp_poly(-2.0f * std::fabs(x));  // in [0, 1]; -2|x| is exact
  return std::copysign((1.0f - t) / (1.0f + t), x);
}

void softcap(float* x, size_t n, float cap) { kernel_table().softcap(x, n, cap); }

void geglu(float* gate, const float* up, size_t n) { kernel_table().geglu(gate, up, n); }

void swiglu_oai(float* gate, const float* up, size_t n, float alpha, float limit) {
  for (size_t i = 0; i < n; ++i) {
    const float g = std::fmin(gate[i], limit);
    const float u = std::fmin(std::fmax(up[i], -limit), limit);
    gate[i] = g / (1.0f + std::exp(alpha * -g)) * (u + 1.0f);
  }
}

void scalar::softcap(float* x, size_t n, float cap) {
  const float inv = 1.0f / cap;
  for (size_t i = 0; i < n; ++i) x[i] = cap * softcap_tanh(x[i] * inv);
}

void scalar::geglu(float* gate, const float* up, size_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;  // as ggml's SQRT_2_OVER_PI
  constexpr float kCoefA = 0.044715f;                                  // GELU_COEF_A
  for (size_t i = 0; i < n; ++i) {
    const float v = gate[i];
    gate[i] = 0.5f * v * (1.0f + softcap_tanh(kSqrt2OverPi * v * (1.0f + kCoefA * v * v))) * up[i];
  }
}

LogitStats scalar::logit_stats(const float* x, size_t n) {
  LogitStats st;
  st.max = -INFINITY;
  for (size_t i = 0; i < n; ++i) st.max = x[i] > st.max ? x[i] : st.max;
  float lane[8] = {};
  for (size_t i = 0; i < n; ++i) lane[i % 8] += exp_poly(x[i] - st.max);
  st.sum_exp = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  return st;
}

void scalar::swiglu(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace preface::kernels
