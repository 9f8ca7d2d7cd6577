#include "model/layers/delta_net.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/delta_rule.h"
#include "kernels/ops.h"
#include "model/layers/weights.h"

namespace preface::model {
namespace {

constexpr size_t kHeaderBytes = 16;  // int64 next position, int64 0
constexpr float kL2Eps = 1e-6f;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }
// log(1 + e^x), without overflow for large x (where it is x to float precision).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / sqrt(sum x^2 + eps), summed in index order.
void l2_normalize(float* x, size_t n) {
  float ss = 0.0f;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + kL2Eps);
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

uint64_t DeltaNetLayer::state_bytes(const Config& c) {
  const auto conv = static_cast<uint64_t>(c.ssm.conv_kernel - 1) * static_cast<uint64_t>(c.ssm.conv_dim());
  const auto s = static_cast<uint64_t>(c.ssm.n_v_heads) * static_cast<uint64_t>(c.ssm.head_dim) *
                 static_cast<uint64_t>(c.ssm.head_dim);
  return kHeaderBytes + sizeof(float) * (conv + s);
}

DeltaNetLayer::DeltaNetLayer(const gguf::File& file, const Config& c, int32_t il) {
  const int64_t dim = c.dim, conv_dim = c.ssm.conv_dim(), v_dim = c.ssm.v_dim(), nv = c.ssm.n_v_heads;
  const std::string p = "blk." + std::to_string(il) + ".";
  norm_ = load_vector(file, p + "attn_norm.weight", dim);
  w_qkv_ = load_matrix(file, p + "attn_qkv.weight", conv_dim, dim);
  w_z_ = load_matrix(file, p + "attn_gate.weight", v_dim, dim);
  w_alpha_ = load_matrix(file, p + "ssm_alpha.weight", nv, dim);
  w_beta_ = load_matrix(file, p + "ssm_beta.weight", nv, dim);
  w_out_ = load_matrix(file, p + "ssm_out.weight", dim, v_dim);
  conv_ = load_values(file, p + "ssm_conv1d.weight",
                      {static_cast<uint64_t>(c.ssm.conv_kernel), static_cast<uint64_t>(conv_dim)});
  a_ = load_vector(file, p + "ssm_a", nv);
  dt_bias_ = load_vector(file, p + "ssm_dt.bias", nv);
  out_norm_ = load_vector(file, p + "ssm_norm.weight", c.ssm.head_dim);
}

void DeltaNetLayer::collect_matrices(std::vector<kernels::Matrix*>& out) {
  for (kernels::Matrix* w : {&w_qkv_, &w_z_, &w_alpha_, &w_beta_, &w_out_}) out.push_back(w);
}

void DeltaNetLayer::forward(const Step& s, int32_t il) const {
  Activations& a = s.act;
  const ForwardBatch& b = s.batch;
  const int64_t nt = static_cast<int64_t>(b.size());
  norm_input(s, norm_);
  kernels::matmul_multi(s.pool, {&w_qkv_, &w_z_, &w_alpha_, &w_beta_}, a.xb.data(), nt,
                        {a.ssm_qkv.data(), a.ssm_z.data(), a.ssm_alpha.data(), a.ssm_beta.data()}, a.quant_scratch);
  // Each sequence's run of tokens through its own state (Model::forward checked that a sequence's tokens are one run
  // of consecutive positions, continuing its state): first the conv window, one thread per run; then the delta
  // rule, one thread per (run, V head), each head's tokens in position order.
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t t = 0; t < b.size();) {
    size_t end = t + 1;
    while (end < b.size() && b.seq[end] == b.seq[t]) ++end;
    runs.emplace_back(t, end);
    t = end;
  }
  auto state_of = [&](size_t r) { return s.kv.state(il, b.state_slots[static_cast<size_t>(b.seq[runs[r].first])]); };
  s.pool.parallel_for(static_cast<int64_t>(runs.size()), [&](int64_t r0, int64_t r1) {
    for (auto r = static_cast<size_t>(r0); r < static_cast<size_t>(r1); ++r) {
      conv_sequence(s, state_of(r), runs[r].first, runs[r].second);
    }
  });
  const auto nv = static_cast<size_t>(s.config.ssm.n_v_heads);
  s.pool.parallel_for(static_cast<int64_t>(runs.size() * nv), [&](int64_t i0, int64_t i1) {
    std::vector<float> scratch(static_cast<size_t>(s.config.ssm.head_dim));
    for (auto i = static_cast<size_t>(i0); i < static_cast<size_t>(i1); ++i) {
      const size_t r = i / nv;
      delta_head(s, state_of(r), runs[r].first, runs[r].second, i % nv, scratch.data());
    }
  });
  kernels::matmul(s.pool, w_out_, a.ssm_out.data(), nt, a.xb.data(), a.quant_scratch);
  add_output(s, a.xb.data(), {});
}

void DeltaNetLayer::conv_sequence(const Step& s, uint8_t* state, size_t t0, size_t t1) const {
  const Config& c = s.config;
  Activations& a = s.act;
  const size_t K = static_cast<size_t>(c.ssm.conv_kernel), conv_dim = static_cast<size_t>(c.ssm.conv_dim());
  const size_t d = static_cast<size_t>(c.ssm.head_dim), nk = static_cast<size_t>(c.ssm.n_k_heads);
  const size_t qk_dim = static_cast<size_t>(c.ssm.qk_dim());
  if (s.batch.pos[t0] == 0) std::memset(state, 0, state_bytes(c));  // a sequence starts from zeros
  float* window = reinterpret_cast<float*>(state + kHeaderBytes);  // [K - 1][conv_dim], oldest first
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> conv_out(conv_dim);
  for (size_t t = t0; t < t1; ++t) {
    float* in = a.ssm_qkv.data() + t * conv_dim;
    // Causal depthwise conv over the window and this input, then SiLU; the window then slides by one, and the
    // output replaces the input in ssm_qkv.
    for (size_t ch = 0; ch < conv_dim; ++ch) {
      const float* w = conv_.data() + ch * K;
      float sum = 0.0f;
      for (size_t j = 0; j + 1 < K; ++j) sum += w[j] * window[j * conv_dim + ch];
      sum += w[K - 1] * in[ch];
      conv_out[ch] = silu(sum);
    }
    if (K > 1) {
      std::memmove(window, window + conv_dim, (K - 2) * conv_dim * sizeof(float));
      std::memcpy(window + (K - 2) * conv_dim, in, conv_dim * sizeof(float));
    }
    std::memcpy(in, conv_out.data(), conv_dim * sizeof(float));
    float* q = in;           // [nk][d]
    float* k = in + qk_dim;  // [nk][d]
    for (size_t h = 0; h < nk; ++h) {
      l2_normalize(q + h * d, d);
      l2_normalize(k + h * d, d);
      for (size_t i = 0; i < d; ++i) q[h * d + i] *= q_scale;
    }
  }
  const int64_t next = s.batch.pos[t1 - 1] + 1;
  std::memcpy(state, &next, sizeof next);
}

void DeltaNetLayer::delta_head(const Step& s, uint8_t* state, size_t t0, size_t t1, size_t j, float* scratch) const {
  const Config& c = s.config;
  Activations& a = s.act;
  const size_t K = static_cast<size_t>(c.ssm.conv_kernel), conv_dim = static_cast<size_t>(c.ssm.conv_dim());
  const size_t d = static_cast<size_t>(c.ssm.head_dim), nk = static_cast<size_t>(c.ssm.n_k_heads);
  const size_t nv = static_cast<size_t>(c.ssm.n_v_heads), qk_dim = static_cast<size_t>(c.ssm.qk_dim());
  const size_t v_dim = static_cast<size_t>(c.ssm.v_dim());
  float* Sj = reinterpret_cast<float*>(state + kHeaderBytes) + (K - 1) * conv_dim + j * d * d;  // [d][d]
  for (size_t t = t0; t < t1; ++t) {
    const float* qkv = a.ssm_qkv.data() + t * conv_dim;  // the conv's output (conv_sequence)
    const float beta = sigmoid(a.ssm_beta[t * nv + j]);
    const float decay = std::exp(a_[j] * softplus(a.ssm_alpha[t * nv + j] + dt_bias_[j]));
    float* oh = a.ssm_out.data() + t * v_dim + j * d;
    kernels::delta_rule(Sj, qkv + (j % nk) * d, qkv + qk_dim + (j % nk) * d, qkv + 2 * qk_dim + j * d, beta, decay,
                        oh, scratch, d);
    kernels::rmsnorm(oh, out_norm_.data(), oh, d, c.rms_eps);
    const float* z = a.ssm_z.data() + t * v_dim + j * d;
    for (size_t m = 0; m < d; ++m) oh[m] *= silu(z[m]);
  }
}

}  // namespace preface::model
