// `write_synth_model`: metadata and shapes read back through gguf::File, determinism, weight statistics.
#include "model/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/quant.h"
#include "model_harness.h"
#include "support/shared_data.h"
#include "util/error.h"

namespace preface::model {
namespace {

using gguf::TensorType;
using Dims = std::vector<uint64_t>;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

SynthSpec small_spec() {
  SynthSpec s;
  s.dim = 64;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.ffn_dim = 96;
  s.type = TensorType::Q8_0;
  s.seed = 7;
  s.vocab_from = test::shared_file("vocab/ggml-vocab-llama-spm.gguf").string();
  return s;
}

// A tensor's values as f32, through the codec or the type's traits row (K-quants, IQ4_XS).
void decode_tensor(const gguf::TensorInfo& t, float* out) {
  if (gguf::type_has_codec(t.type)) {
    gguf::decode_values(t.type, t.data, t.n_values, out);
  } else {
    kernels::quant_traits(t.type)->dequantize(t.data, out, t.n_values);
  }
}

// Mean and RMS of a tensor's decoded values.
std::pair<double, double> stats(const gguf::TensorInfo& t) {
  std::vector<float> v(t.n_values);  // [n_values]
  decode_tensor(t, v.data());
  double sum = 0, sum_sq = 0;
  for (float x : v) {
    sum += x;
    sum_sq += static_cast<double>(x) * x;
  }
  return {sum / static_cast<double>(v.size()), std::sqrt(sum_sq / static_cast<double>(v.size()))};
}

std::vector<float> decoded(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo& t = f.tensor(name);
  std::vector<float> v(t.n_values);  // [n_rows][n_cols]
  decode_tensor(t, v.data());
  return v;
}

// y[n_rows] = W[n_rows][n_cols] x[n_cols]
std::vector<float> matvec(const std::vector<float>& w, const std::vector<float>& x) {
  std::vector<float> y(w.size() / x.size(), 0.0f);  // [n_rows]
  for (size_t r = 0; r < y.size(); ++r) {
    double acc = 0;
    for (size_t c = 0; c < x.size(); ++c) acc += static_cast<double>(w[r * x.size() + c]) * x[c];
    y[r] = static_cast<float>(acc);
  }
  return y;
}

std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w, float eps) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(x.size())) + eps);
  std::vector<float> y(x.size());  // [dim]
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

// Logits for `token` alone at position 0, where attention reduces to each head reading its own V (RoPE at
// position 0 is the identity): a small independent forward pass to show the weights give usable logits.
std::vector<float> first_token_logits(const gguf::File& f, int32_t token) {
  const std::string arch = f.get_string("general.architecture");
  const size_t dim = static_cast<size_t>(f.get_int(arch + ".embedding_length"));
  const size_t group = static_cast<size_t>(f.get_int(arch + ".attention.head_count") /
                                           f.get_int(arch + ".attention.head_count_kv"));
  const size_t head_dim = dim / static_cast<size_t>(f.get_int(arch + ".attention.head_count"));
  const float eps = static_cast<float>(f.get_float(arch + ".attention.layer_norm_rms_epsilon"));
  const std::vector<float> embd = decoded(f, "token_embd.weight");
  std::vector<float> x(embd.begin() + token * dim, embd.begin() + (token + 1) * dim);  // [dim]
  for (int64_t l = 0; l < f.get_int(arch + ".block_count"); ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const std::vector<float> h = rms_norm(x, decoded(f, p + "attn_norm.weight"), eps);
    std::vector<float> v = matvec(decoded(f, p + "attn_v.weight"), h);  // [kv_dim]
    if (f.find_tensor(p + "attn_v.bias") != nullptr) {
      const std::vector<float> b = decoded(f, p + "attn_v.bias");
      for (size_t i = 0; i < v.size(); ++i) v[i] += b[i];
    }
    std::vector<float> heads(dim);  // [n_heads][head_dim]: head i reads kv head i / group
    for (size_t i = 0; i < dim; ++i) heads[i] = v[(i / head_dim / group) * head_dim + i % head_dim];
    const std::vector<float> o = matvec(decoded(f, p + "attn_output.weight"), heads);
    for (size_t i = 0; i < dim; ++i) x[i] += o[i];
    const std::vector<float> h2 = rms_norm(x, decoded(f, p + "ffn_norm.weight"), eps);
    std::vector<float> gate = matvec(decoded(f, p + "ffn_gate.weight"), h2);  // [ffn]
    const std::vector<float> up = matvec(decoded(f, p + "ffn_up.weight"), h2);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    const std::vector<float> down = matvec(decoded(f, p + "ffn_down.weight"), gate);
    for (size_t i = 0; i < dim; ++i) x[i] += down[i];
  }
  const std::vector<float> out = rms_norm(x, decoded(f, "output_norm.weight"), eps);
  return matvec(decoded(f, f.find_tensor("output.weight") ? "output.weight" : "token_embd.weight"), out);
}

// Logits are finite, spread out (std well above zero, no single runaway value) and depend on the input.
void expect_usable_logits(const gguf::File& f) {
  std::vector<size_t> argmaxes;
  for (int32_t token : {1, 100, 5000}) {
    const std::vector<float> logits = first_token_logits(f, token);
    double sum = 0, sum_sq = 0;
    size_t argmax = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      ASSERT_TRUE(std::isfinite(logits[i])) << "token " << token << " logit " << i;
      sum += logits[i];
      sum_sq += static_cast<double>(logits[i]) * logits[i];
      if (logits[i] > logits[argmax]) argmax = i;
    }
    const double mean = sum / static_cast<double>(logits.size());
    const double stddev = std::sqrt(sum_sq / static_cast<double>(logits.size()) - mean * mean);
    EXPECT_GT(stddev, 0.3) << "token " << token;
    EXPECT_LT(stddev, 10.0) << "token " << token;
    EXPECT_LT(logits[argmax] - mean, 10.0 * stddev) << "token " << token;
    argmaxes.push_back(argmax);
  }
  EXPECT_FALSE(argmaxes[0] == argmaxes[1] && argmaxes[1] == argmaxes[2]) << "same argmax for every input";
}

TEST(Synth, LlamaMetadataAndShapes) {
  const SynthSpec spec = small_spec();
  if (spec.vocab_from.empty()) return;
  const std::string path = (test::temp_dir("synth") / "llama.gguf").string();
  write_synth_model(spec, path);
  const gguf::File f = gguf::File::open(path);
  const gguf::File vocab = gguf::File::open(spec.vocab_from);

  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "synthetic-llama-d64-l2-Q8_0");
  EXPECT_EQ(f.get_int("general.alignment"), 32);
  EXPECT_EQ(f.get_int("general.file_type"), 7);
  EXPECT_EQ(f.get_int("llama.context_length"), 2048);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 96);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 16);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.rope.freq_base")), 10000.0f);
  // Every tokenizer key is copied unchanged.
  size_t n_tokenizer_keys = 0;
  for (const auto& [key, value] : vocab.metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    ++n_tokenizer_keys;
    const gguf::Value* copy = f.find(key);
    ASSERT_NE(copy, nullptr) << key;
    EXPECT_EQ(copy->type, value.type) << key;
    EXPECT_EQ(copy->elem_type, value.elem_type) << key;
    EXPECT_EQ(copy->str, value.str) << key;
    EXPECT_EQ(copy->strs, value.strs) << key;
    EXPECT_EQ(copy->nums, value.nums) << key;
    EXPECT_EQ(copy->i, value.i) << key;
  }
  EXPECT_GE(n_tokenizer_keys, 8u);

  const uint64_t n_vocab = 32000;
  EXPECT_EQ(f.tensors().size(), 3u + 2u * 9u);
  EXPECT_EQ(f.tensor("token_embd.weight").dims, (Dims{64, n_vocab}));
  EXPECT_EQ(f.tensor("token_embd.weight").type, TensorType::Q8_0);
  EXPECT_EQ(f.tensor("output.weight").dims, (Dims{64, n_vocab}));
  EXPECT_EQ(f.tensor("output_norm.weight").dims, (Dims{64}));
  EXPECT_EQ(f.tensor("output_norm.weight").type, TensorType::F32);
  for (const std::string p : {"blk.0.", "blk.1."}) {
    EXPECT_EQ(f.tensor(p + "attn_norm.weight").dims, (Dims{64}));
    EXPECT_EQ(f.tensor(p + "attn_norm.weight").type, TensorType::F32);
    EXPECT_EQ(f.tensor(p + "attn_q.weight").dims, (Dims{64, 64}));
    EXPECT_EQ(f.tensor(p + "attn_k.weight").dims, (Dims{64, 32}));
    EXPECT_EQ(f.tensor(p + "attn_v.weight").dims, (Dims{64, 32}));
    EXPECT_EQ(f.tensor(p + "attn_output.weight").dims, (Dims{64, 64}));
    EXPECT_EQ(f.tensor(p + "ffn_norm.weight").dims, (Dims{64}));
    EXPECT_EQ(f.tensor(p + "ffn_gate.weight").dims, (Dims{64, 96}));
    EXPECT_EQ(f.tensor(p + "ffn_up.weight").dims, (Dims{64, 96}));
    EXPECT_EQ(f.tensor(p + "ffn_down.weight").dims, (Dims{96, 64}));
    EXPECT_EQ(f.tensor(p + "ffn_down.weight").type, TensorType::Q8_0);
    EXPECT_EQ(f.find_tensor(p + "attn_q.bias"), nullptr);
  }
  EXPECT_EQ(f.find_tensor("blk.2.attn_q.weight"), nullptr);

  // Weights ~ N(0, 1/fan_in); norms ~ 1.
  const auto [q_mean, q_rms] = stats(f.tensor("blk.0.attn_q.weight"));
  EXPECT_NEAR(q_mean, 0.0, 0.01);
  EXPECT_NEAR(q_rms, 1.0 / 8.0, 0.01);
  const auto [d_mean, d_rms] = stats(f.tensor("blk.1.ffn_down.weight"));
  EXPECT_NEAR(d_rms, 1.0 / std::sqrt(96.0), 0.01);
  const auto [n_mean, n_rms] = stats(f.tensor("blk.1.ffn_norm.weight"));
  EXPECT_NEAR(n_mean, 1.0, 0.05);
  EXPECT_GT(n_rms - n_mean, 0.0);  // not all exactly 1
  expect_usable_logits(f);
}

TEST(Synth, Qwen2TiedWithBiases) {
  SynthSpec spec = small_spec();
  if (spec.vocab_from.empty()) return;
  spec.arch = "qwen2";
  spec.tied = true;
  spec.type = TensorType::BF16;
  spec.rope_base = 1e6f;
  spec.ffn_dim = 0;
  spec.name = "tiny";
  const std::string path = (test::temp_dir("synth-qwen2") / "qwen2.gguf").string();
  write_synth_model(spec, path);
  const gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(f.get_string("general.name"), "tiny");
  EXPECT_EQ(f.get_int("general.file_type"), 32);
  EXPECT_EQ(f.get_int("qwen2.feed_forward_length"), 192);  // 8/3 * 64 = 170.7 -> 192
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("qwen2.rope.freq_base")), 1e6f);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.tensor("token_embd.weight").type, TensorType::BF16);
  EXPECT_EQ(f.tensor("blk.1.attn_q.bias").dims, (Dims{64}));
  EXPECT_EQ(f.tensor("blk.1.attn_k.bias").dims, (Dims{32}));
  EXPECT_EQ(f.tensor("blk.1.attn_v.bias").type, TensorType::F32);
  EXPECT_EQ(f.tensors().size(), 2u + 2u * 12u);
  expect_usable_logits(f);
}

// A mixture-of-experts file in llama.cpp's qwen3moe layout, which preface loads and runs (the benchmark files of
// docs/performance.md are made this way).
TEST(Synth, Qwen3MoeExpertsLoadAndRun) {
  SynthSpec spec = small_spec();
  if (spec.vocab_from.empty()) return;
  spec.arch = "qwen3moe";
  spec.type = TensorType::Q8_0;
  spec.n_experts = 8;
  spec.n_experts_used = 2;
  spec.expert_ffn = 0;  // ffn / 4 rounded up to 32
  const std::string path = (test::temp_dir("synth-qwen3moe") / "moe.gguf").string();
  write_synth_model(spec, path);
  const gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.get_int("qwen3moe.expert_count"), 8);
  EXPECT_EQ(f.get_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(f.get_int("qwen3moe.expert_feed_forward_length"), 32);  // 96 / 4 = 24 -> 32
  EXPECT_EQ(f.tensor("blk.1.ffn_gate_exps.weight").dims, (Dims{64, 32, 8}));
  EXPECT_EQ(f.tensor("blk.1.ffn_down_exps.weight").dims, (Dims{32, 64, 8}));
  EXPECT_EQ(f.tensor("blk.1.ffn_down_exps.weight").type, TensorType::Q8_0);
  EXPECT_EQ(f.tensor("blk.1.ffn_gate_inp.weight").type, TensorType::F32);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_gate.weight"), nullptr);
  auto m = model::Model::load(path, 8);
  EXPECT_EQ(m->config().moe.n_experts, 8);
  const auto n_vocab = static_cast<size_t>(m->config().n_vocab);
  ThreadPool pool(1);
  test::TestKv kv(m->config(), kernels::KvType::F16, 16, 1);
  const std::vector<float> logits = test::run_chunked(*m, pool, kv.view, {0}, {1, 5, 9}, 3);
  ASSERT_EQ(logits.size(), 3 * n_vocab);
  for (const float v : logits) ASSERT_TRUE(std::isfinite(v));
}

// qwen35's hybrid layout as llama.cpp reads it: DeltaNet blocks with a full-attention block every interval, a head
// size of its own, partial RoPE; preface loads it with the state and KV groups it declares and runs it, and a
// prompt fed in chunks of 1 and 5 gives the bits of one chunk.
TEST(Synth, Qwen35HybridLoadsAndRuns) {
  SynthSpec spec = small_spec();
  if (spec.vocab_from.empty()) return;
  spec.arch = "qwen35";
  spec.n_layers = 4;
  spec.head_dim = 32;  // 4 heads of 32 = 128 wide, twice dim
  spec.ssm_k_heads = 2;
  spec.ssm_v_heads = 4;
  spec.ssm_head_dim = 16;
  const std::string path = (test::temp_dir("synth-qwen35") / "q35.gguf").string();
  write_synth_model(spec, path);
  const gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.get_int("qwen35.full_attention_interval"), 4);
  EXPECT_EQ(f.get_int("qwen35.rope.dimension_count"), 8);
  EXPECT_EQ(f.get_int("qwen35.ssm.inner_size"), 64);
  EXPECT_EQ(f.tensor("blk.0.attn_qkv.weight").dims, (Dims{64, 128}));  // q 32, k 32, v 64
  EXPECT_EQ(f.tensor("blk.0.ssm_conv1d.weight").dims, (Dims{4, 128}));
  EXPECT_EQ(f.tensor("blk.0.ssm_conv1d.weight").type, TensorType::F32);
  EXPECT_EQ(f.tensor("blk.3.attn_q.weight").dims, (Dims{64, 256}));  // query and gate rows per head
  EXPECT_EQ(f.tensor("blk.3.attn_output.weight").dims, (Dims{128, 64}));
  EXPECT_EQ(f.find_tensor("blk.3.attn_qkv.weight"), nullptr);
  auto m = model::Model::load(path, 8);
  EXPECT_TRUE(m->memory().has_state());
  // 3 DeltaNet layers: a 16-byte header, the conv window (3 x 128) and 4 states of 16 x 16, in f32.
  EXPECT_EQ(m->memory().state_bytes_per_sequence(), 3u * (16 + (3 * 128 + 4 * 16 * 16) * sizeof(float)));
  const auto n_vocab = static_cast<size_t>(m->config().n_vocab);
  ThreadPool pool(1);
  const std::vector<int32_t> tokens = {1, 5, 9, 14, 3, 7, 11};
  std::vector<std::vector<float>> runs;
  for (const size_t chunk : {size_t{1}, size_t{5}, size_t{7}}) {
    test::TestKv kv(m->config(), kernels::KvType::F16, 16, 1);
    runs.push_back(test::run_chunked(*m, pool, kv.view, {0}, tokens, chunk));
  }
  ASSERT_EQ(runs[0].size(), tokens.size() * n_vocab);
  for (const float v : runs[0]) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(0, std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(runs[0].data(), runs[2].data(), runs[0].size() * sizeof(float)));
}

// gpt-oss's layout: biases, sinks, post_attention_norm, a router with a bias, MXFP4 experts with biases; preface
// loads and runs it (and llama.cpp does: the gpt-oss benchmark of docs/performance.md).
TEST(Synth, GptOssMxfp4ExpertsLoadAndRun) {
  SynthSpec spec = small_spec();
  if (spec.vocab_from.empty()) return;
  spec.arch = "gpt-oss";
  spec.type = TensorType::Q8_0;
  spec.n_experts = 8;
  spec.n_experts_used = 2;
  spec.sliding_window = 4;
  const std::string path = (test::temp_dir("synth-gpt-oss") / "gpt-oss.gguf").string();
  write_synth_model(spec, path);
  const gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.get_int("gpt-oss.attention.sliding_window"), 4);
  EXPECT_EQ(f.get_int("general.file_type"), 38);
  EXPECT_EQ(f.tensor("blk.1.ffn_gate_exps.weight").dims, (Dims{64, 32, 8}));
  EXPECT_EQ(f.tensor("blk.1.ffn_gate_exps.weight").type, TensorType::MXFP4);
  EXPECT_EQ(f.tensor("blk.1.ffn_down_exps.bias").dims, (Dims{64, 8}));
  EXPECT_EQ(f.tensor("blk.1.attn_sinks.weight").dims, (Dims{static_cast<uint64_t>(spec.n_heads)}));
  EXPECT_EQ(f.tensor("blk.1.attn_q.weight").type, TensorType::Q8_0);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_norm.weight"), nullptr);
  auto m = model::Model::load(path, 8);
  EXPECT_EQ(m->config().moe.n_experts, 8);
  EXPECT_EQ(m->config().sliding_window, 4);
  const auto n_vocab = static_cast<size_t>(m->config().n_vocab);
  ThreadPool pool(1);
  test::TestKv kv(m->config(), kernels::KvType::F16, 16, 1);
  const std::vector<float> logits = test::run_chunked(*m, pool, kv.view, {0}, {1, 5, 9, 2, 7, 3}, 2);
  ASSERT_EQ(logits.size(), 6 * n_vocab);
  for (const float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(Synth, SameSeedSameBytesOtherSeedDifferent) {
  SynthSpec spec = small_spec();
  if (spec.vocab_from.empty()) return;
  spec.n_layers = 1;
  spec.type = TensorType::Q4_0;
  const auto dir = test::temp_dir("synth-seed");
  write_synth_model(spec, (dir / "a.gguf").string());
  write_synth_model(spec, (dir / "b.gguf").string());
  spec.seed = 8;
  write_synth_model(spec, (dir / "c.gguf").string());
  const std::vector<uint8_t> a = read_all((dir / "a.gguf").string());
  const std::vector<uint8_t> c = read_all((dir / "c.gguf").string());
  EXPECT_EQ(a, read_all((dir / "b.gguf").string()));
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
  // Tensors differ, but each tensor's values do not depend on the others: the seed changes them all.
  const gguf::File fa = gguf::File::open((dir / "a.gguf").string());
  const gguf::File fc = gguf::File::open((dir / "c.gguf").string());
  for (const gguf::TensorInfo& t : fa.tensors()) {
    EXPECT_NE(std::memcmp(t.data, fc.tensor(t.name).data, t.size_bytes), 0) << t.name;
  }
}

// llama-quantize's Q4_K_M layout: Q6_K output, Q6_K attn_v / ffn_down on use_more_bits layers (0, 3, 6, 7 of 8).
TEST(Synth, Q4KMMixHasLlamaQuantizesLayout) {
  SynthSpec spec = small_spec();
  if (spec.vocab_from.empty()) return;
  spec.dim = 256;
  spec.n_heads = 4;
  spec.ffn_dim = 512;
  spec.n_layers = 8;
  spec.type = TensorType::Q4_K;
  spec.k_mix = true;
  const std::string path = (test::temp_dir("synth-q4km") / "q4km.gguf").string();
  write_synth_model(spec, path);
  const gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.get_int("general.file_type"), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(f.tensor("token_embd.weight").type, TensorType::Q4_K);
  EXPECT_EQ(f.tensor("output.weight").type, TensorType::Q6_K);
  for (int layer = 0; layer < 8; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    const bool more = layer == 0 || layer == 3 || layer == 6 || layer == 7;
    const TensorType expected = more ? TensorType::Q6_K : TensorType::Q4_K;
    EXPECT_EQ(f.tensor(p + "attn_v.weight").type, expected) << layer;
    EXPECT_EQ(f.tensor(p + "ffn_down.weight").type, expected) << layer;
    EXPECT_EQ(f.tensor(p + "attn_q.weight").type, TensorType::Q4_K) << layer;
    EXPECT_EQ(f.tensor(p + "ffn_up.weight").type, TensorType::Q4_K) << layer;
  }
  const auto [q_mean, q_rms] = stats(f.tensor("blk.2.attn_q.weight"));
  EXPECT_NEAR(q_mean, 0.0, 0.01);
  EXPECT_NEAR(q_rms, 1.0 / 16.0, 0.006);
  const auto [d_mean, d_rms] = stats(f.tensor("blk.3.ffn_down.weight"));  // Q6_K
  EXPECT_NEAR(d_rms, 1.0 / std::sqrt(512.0), 0.003);
  expect_usable_logits(f);
}

TEST(Synth, IQ4XSAndQ6KFiles) {
  SynthSpec spec = small_spec();
  if (spec.vocab_from.empty()) return;
  spec.dim = 256;
  spec.ffn_dim = 256;
  for (const TensorType type : {TensorType::IQ4_XS, TensorType::Q6_K, TensorType::Q5_K}) {
    spec.type = type;
    const std::string path = (test::temp_dir("synth-kq") / "m.gguf").string();
    write_synth_model(spec, path);
    const gguf::File f = gguf::File::open(path);
    EXPECT_EQ(f.tensor("blk.1.ffn_down.weight").type, type);
    EXPECT_EQ(f.tensor("output.weight").type, TensorType::Q6_K);
    const auto [mean, rms] = stats(f.tensor("blk.0.attn_k.weight"));
    EXPECT_NEAR(rms, 1.0 / 16.0, 0.006) << gguf::tensor_type_name(type);
    expect_usable_logits(f);
  }
}

TEST(Synth, RejectsBadSpecs) {
  const SynthSpec good = small_spec();
  if (good.vocab_from.empty()) return;
  const std::string path = (test::temp_dir("synth-bad") / "x.gguf").string();
  auto expect_error = [&](SynthSpec s, const std::string& part) {
    try {
      write_synth_model(s, path);
      ADD_FAILURE() << "no error for: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  SynthSpec s = good;
  s.arch = "gpt2";
  expect_error(s, "unsupported arch 'gpt2'");
  s = good;
  s.n_heads = 5;
  expect_error(s, "not a multiple of heads");
  s = good;
  s.n_kv_heads = 3;
  expect_error(s, "multiple of kv-heads");
  s = good;
  s.ffn_dim = 100;
  expect_error(s, "multiples of 32 for Q8_0");
  s = good;
  s.type = TensorType::Q4_K;
  expect_error(s, "multiples of 256 for Q4_K");
  s = good;
  s.type = TensorType::Q2_K;
  expect_error(s, "no quantizer for Q2_K");
  s = good;
  s.k_mix = true;
  expect_error(s, "_M mix needs Q4_K or Q5_K");
  s = good;
  s.n_layers = 0;
  expect_error(s, "must be positive");
  s = good;
  s.vocab_from = "/nonexistent.gguf";
  expect_error(s, "/nonexistent.gguf");
  s = good;
  s.vocab_from.clear();
  expect_error(s, "vocab");
}

}  // namespace
}  // namespace preface::model
