// Scalar transformer ops following ggml's CPU reference arithmetic (ggml_compute_forward_rms_norm_f32,
// ggml_rope_cache_init / rope_yarn with no scaling, ggml_vec_soft_max_f32, ggml_vec_swiglu_f32) so results track
// llama.cpp's closely. Every reduction runs left to right in a fixed order.
#include "kernels/ops.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "util/error.h"

namespace preface::kernels {

void rmsnorm(const float* x, const float* w, float* out, size_t n, float eps) {
  if (n == 0) return;
  // ggml: squares in float, summed in double, mean rounded to float, scale = 1/sqrtf(mean + eps); the weight
  // is applied afterwards (a separate ggml_mul), hence (x * scale) * w.
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (size_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * w[i];
}

void rope(float* x, size_t n_heads, size_t head_dim, size_t n_rot, int pos, float base, bool neox) {
  if (n_rot % 2 != 0 || n_rot > head_dim) {
    throw Error("rope: n_rot " + std::to_string(n_rot) + " must be even and at most head_dim " +
                std::to_string(head_dim));
  }
  const size_t n_pairs = n_rot / 2;
  if (n_pairs == 0) return;
  // cos_sin: [n_pairs][2]. As ggml: theta_0 = pos, theta_{i+1} = theta_i * base^(-2/n_rot), all in float.
  constexpr size_t kStackPairs = 256;
  float stack_buf[2 * kStackPairs];
  std::vector<float> heap_buf;
  float* cos_sin = stack_buf;
  if (n_pairs > kStackPairs) {
    heap_buf.resize(2 * n_pairs);
    cos_sin = heap_buf.data();
  }
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (size_t i = 0; i < n_pairs; ++i) {
    cos_sin[2 * i] = std::cos(theta);
    cos_sin[2 * i + 1] = std::sin(theta);
    theta *= theta_scale;
  }
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

void scalar::swiglu(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace preface::kernels
