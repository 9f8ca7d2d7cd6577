// Elementwise and normalisation operations of the transformer, one token row at a time.
#pragma once
#include <cstddef>
#include <cstdint>

namespace preface::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; x, w, out: [n]. out may alias x.
void rmsnorm(const float* x, const float* w, float* out, size_t n, float eps);

// Rotary position embedding applied in place to x: [n_heads][head_dim] at position `pos`.
// Only the first n_rot dims of each head rotate; pair i (i < n_rot/2) uses theta = pos * base^(-2i/n_rot).
// neox == false: pairs are adjacent (x[2i], x[2i+1]) — llama. neox == true: pairs are (x[i], x[i + n_rot/2])
// — qwen2.
void rope(float* x, size_t n_heads, size_t head_dim, size_t n_rot, int pos, float base, bool neox);

// rope in two steps, for applying one position's rotation to several rows (q and k, every layer):
// cos_sin[2i], cos_sin[2i + 1] = cos, sin of pair i's angle at `pos` (cos_sin: [n_rot]); then rope_apply with them
// gives exactly rope()'s result. With scaling (RoPE scaling of Llama 3.1 and linear), as ggml's rope cache:
// theta_i = freq_scale * ((pos * base^(-2i/n_rot)) / freq_factors[i]) (freq_factors: [n_rot / 2], or nullptr).
void rope_cos_sin(int pos, size_t n_rot, float base, float* cos_sin);
void rope_cos_sin(int pos, size_t n_rot, float base, float freq_scale, const float* freq_factors, float* cos_sin);
// YaRN, as ggml's rope_yarn (ext_factor 0 and attn_factor 1: the function above, bit for bit). Pair i's angle mixes
// the interpolated theta_interp = freq_scale * theta_extrap and the extrapolated theta_extrap = theta_base / ff:
//   ramp_i  = 1 - clamp((i - low) / max(0.001, high - low), 0, 1),   mix = ramp_i * ext_factor
//   theta   = theta_interp * (1 - mix) + theta_extrap * mix
//   cos, sin of theta, each times mscale = attn_factor * (ext_factor != 0 ? 1 + 0.1 ln(1 / freq_scale) : 1)
// with low = max(0, floor(d(beta_fast))), high = min(n_rot - 1, ceil(d(beta_slow))),
// d(b) = n_rot * ln(n_ctx_orig / (2 pi b)) / (2 ln base) (ggml_rope_yarn_corr_dims).
struct RopeYarn {
  float ext_factor = 0.0f;   // 0: no extrapolation mix (linear or no scaling)
  float attn_factor = 1.0f;  // multiplies cos and sin
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;    // the context the model was trained on (rope.scaling.original_context_length)
  bool active() const { return ext_factor != 0.0f || attn_factor != 1.0f; }
};
void rope_cos_sin(int pos, size_t n_rot, float base, float freq_scale, const float* freq_factors, const RopeYarn& yarn,
                  float* cos_sin);
void rope_apply(float* x, size_t n_heads, size_t head_dim, size_t n_rot, const float* cos_sin, bool neox);

// In place softmax over x[n].
void softmax(float* x, size_t n);

// The two numbers a log-softmax over x[n] needs: max = the largest non-NaN x (-inf when none), sum_exp =
// sum_i exp(x[i] - max). Dispatched; every path gives the same bits: the exponential is exp_x8's Cephes
// polynomial (simd_avx2.h; scalar::exp_poly lane by lane), summed into 8 float lanes (value i into lane i % 8, in
// index order) and the lanes added by the fixed tree ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
// log p(x[i]) = x[i] - (max + log(sum_exp)).
struct LogitStats {
  float max = 0;
  float sum_exp = 0;
};
LogitStats logit_stats(const float* x, size_t n);

// gate[i] = silu(gate[i]) * up[i]; silu(v) = v / (1 + exp(-v)). Dispatched: the AVX2 version uses a
// vectorized exp (within a few ulps of std::exp), so the two paths may differ in the last bits.
void swiglu(float* gate, const float* up, size_t n);

// gpt-oss's clamped SwiGLU, as ggml_swiglu_oai: g = min(gate[i], limit), u = clamp(up[i], -limit, limit),
// gate[i] = g / (1 + exp(-alpha g)) * (u + 1). One path (std::exp), so the same bits everywhere on one machine.
void swiglu_oai(float* gate, const float* up, size_t n, float alpha, float limit);

// tanh(x) = sign(x) (1 - t) / (1 + t), t = scalar::exp_poly(-2 |x|): only correctly rounded float operations and
// std::fma, so every path (avx2::tanh_x8 is this lane by lane) and every machine gives the same bits; libm's tanhf
// is not used, since it differs between libm versions. Absolute error below 1e-7; NaN stays NaN. Used by the
// soft-capping of attention scores and logits and by GELU.
float softcap_tanh(float x);

// x[i] = cap * softcap_tanh(x[i] * (1 / cap)) (gemma's logit soft-capping); cap > 0. Dispatched; every path gives
// the same bits (the AVX2 one runs the same operations 8 lanes at a time, through avx2::tanh_x8).
void softcap(float* x, size_t n, float cap);

// gate[i] = gelu(gate[i]) * up[i], GELU in its tanh form as ggml:
// gelu(v) = 0.5 v (1 + softcap_tanh(sqrt(2 / pi) v (1 + 0.044715 v^2))). Dispatched; every path the same bits.
void geglu(float* gate, const float* up, size_t n);

namespace scalar {
void swiglu(float* gate, const float* up, size_t n);
void geglu(float* gate, const float* up, size_t n);
void softcap(float* x, size_t n, float cap);
LogitStats logit_stats(const float* x, size_t n);
// One lane of avx2::exp_x8, bit for bit (std::fma for its fused steps).
float exp_poly(float x);
}  // namespace scalar

namespace avx2 {
void swiglu(float* gate, const float* up, size_t n);
void geglu(float* gate, const float* up, size_t n);
void softcap(float* x, size_t n, float cap);
LogitStats logit_stats(const float* x, size_t n);
}  // namespace avx2

}  // namespace preface::kernels
