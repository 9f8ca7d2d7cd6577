// Config reading and Model::load validation: the shared models' hyper-parameters, and clear errors for an
// unsupported architecture, a missing tensor, a tensor of the wrong shape and a malformed batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/base/config.h"
#include "model/model.h"
#include "model_harness.h"
#include "support/shared_data.h"
#include "util/error.h"

namespace preface::test {
namespace {

// A tiny llama (dim 32, 1 layer, 2 heads, 1 KV head, ffn 64, vocab 16), F32 weights with small values.
// `omit` drops a tensor; `reshape` gives that tensor one extra row.
// nan_tensor: a tensor with one NaN value; uncomputed: a tensor written as zero bytes of IQ2_XXS (a type preface parses but does not compute); dim: the
// embedding length (IQ2_XXS rows need 256).
void write_tiny_llama(const std::string& path, const std::string& arch = "llama", const std::string& omit = "",
                      const std::string& reshape = "", const std::string& uncomputed = "", uint64_t dim = 32,
                      const std::string& nan_tensor = "") {
  gguf::Writer w;
  w.set_string("general.architecture", arch);
  w.set_u32(arch + ".context_length", 64);
  w.set_u32(arch + ".embedding_length", static_cast<uint32_t>(dim));
  w.set_u32(arch + ".block_count", 1);
  w.set_u32(arch + ".feed_forward_length", 64);
  w.set_u32(arch + ".attention.head_count", 2);
  w.set_u32(arch + ".attention.head_count_kv", 1);
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  auto add = [&](const std::string& name, uint64_t n_cols, uint64_t n_rows) {
    if (name == omit) return;
    if (name == reshape) ++n_rows;
    if (n_cols == 32) n_cols = dim;
    if (n_rows == 32) n_rows = dim;
    if (name == uncomputed) {
      w.add_tensor(name, gguf::TensorType::IQ2_XXS, {n_cols, n_rows},
                   std::vector<uint8_t>(gguf::row_bytes(gguf::TensorType::IQ2_XXS, n_cols) * n_rows));
      return;
    }
    std::vector<float> values(n_cols * n_rows);
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>((i * 37) % 19) - 0.09f;
    if (name == nan_tensor) values[values.size() / 2] = std::nanf("");
    std::vector<uint64_t> dims = {n_cols};
    if (n_rows > 1 || name.find("norm") == std::string::npos) dims.push_back(n_rows);
    w.add_tensor_f32(name, gguf::TensorType::F32, dims, values);
  };
  add("token_embd.weight", 32, 16);
  add("output_norm.weight", 32, 1);
  add("blk.0.attn_norm.weight", 32, 1);
  add("blk.0.attn_q.weight", 32, 32);
  add("blk.0.attn_k.weight", 32, 16);
  add("blk.0.attn_v.weight", 32, 16);
  add("blk.0.attn_output.weight", 32, 32);
  add("blk.0.ffn_norm.weight", 32, 1);
  add("blk.0.ffn_gate.weight", 32, 64);
  add("blk.0.ffn_up.weight", 32, 64);
  add("blk.0.ffn_down.weight", 64, 32);
  w.write(path);
}

std::string load_error(const std::string& path) {
  try {
    model::Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, Stories260K) {
  const auto path = shared_file("models/stories260K.gguf");
  if (path.empty()) return;
  const model::Config c = model::read_config(gguf::File::open(path.string()));
  EXPECT_EQ(c.arch_name, "llama");
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_rot, 8);
  EXPECT_EQ(c.ffn_dim, 172);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.ctx_len, 2048);
  EXPECT_FLOAT_EQ(c.rope_base, 10000.0f);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tied_embeddings);
}

TEST(Config, Qwen2AndTied) {
  const auto qwen = shared_file("models/synth-qwen2-d128-bf16.gguf");
  const auto tied = shared_file("models/synth-gpt2-d128-q8_0-tied.gguf");
  if (qwen.empty() || tied.empty()) return;
  const model::Config q = model::read_config(gguf::File::open(qwen.string()));
  EXPECT_EQ(q.arch_name, "qwen2");
  EXPECT_TRUE(q.rope_neox);
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_FLOAT_EQ(q.rope_base, 1e6f);
  EXPECT_EQ(q.n_kv_heads, 2);
  EXPECT_EQ(q.n_vocab, 50257);
  const model::Config t = model::read_config(gguf::File::open(tied.string()));
  EXPECT_TRUE(t.tied_embeddings);
  EXPECT_FALSE(t.rope_neox);
  EXPECT_NO_THROW(model::Model::load(tied.string()));
}

TEST(ModelLoad, TinyModelLoadsAndRuns) {
  const auto path = (temp_dir("model-load") / "tiny.gguf").string();
  write_tiny_llama(path);
  auto m = model::Model::load(path, 8);
  EXPECT_EQ(m->config().n_vocab, 16);
  EXPECT_EQ(m->config().kv_row_values(), 16);
  ThreadPool pool(1);
  TestKv kv(m->config(), kernels::KvType::F32, 4, 2);
  const std::vector<float> logits = run_chunked(*m, pool, kv.view, {0, 1}, {1, 2, 3, 4, 5}, 5);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(ModelLoad, UnsupportedArchitectureIsAClearError) {
  const auto path = (temp_dir("model-arch") / "gptneox.gguf").string();
  write_tiny_llama(path, "gptneox");
  EXPECT_NE(load_error(path).find("unsupported architecture 'gptneox'"), std::string::npos) << load_error(path);
}

// A file of types preface parses but cannot compute yet (Q4_K_M holds Q4_K, Q6_K and F32 tensors) is refused at
// load with the type's name and the tensor, never with a bare type id.
TEST(ModelLoad, UncomputedTypeIsNamed) {
  const auto path = (temp_dir("model-iq2") / "iq2.gguf").string();
  write_tiny_llama(path, "llama", "", "", "blk.0.attn_q.weight", 256);
  const std::string e = load_error(path);
  EXPECT_NE(e.find("tensor blk.0.attn_q.weight is IQ2_XXS, which preface cannot compute yet (it computes F32, F16, "
                   "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16, MXFP4)"),
            std::string::npos)
      << e;
}

// A file mixing types loads: Q4_K_M holds Q4_K, Q6_K and F32 tensors.
TEST(ModelLoad, MixedKQuantFileLoads) {
  const auto path = shared_file("models/synth-llama-d256-q4_k_m.gguf");
  if (path.empty()) GTEST_FAIL() << "needs ../shared/models/synth-llama-d256-q4_k_m.gguf";
  auto m = model::Model::load(path.string(), 8);
  EXPECT_EQ(m->config().n_vocab, 512);
  // The start-up line names the architecture and counts each type (../shared/README.md lists this file's mix).
  const std::string summary = model::model_summary(*m);
  EXPECT_NE(summary.find("llama: 2 layers, dim 256, 4 heads / 2 KV heads of 64, ffn 768, vocab 512"),
            std::string::npos) << summary;
  EXPECT_NE(summary.find("21 tensors (F32 5, Q4_K 13, Q6_K 3)"), std::string::npos) << summary;
}

TEST(ModelLoad, MissingTensorIsNamed) {
  const auto path = (temp_dir("model-missing") / "missing.gguf").string();
  write_tiny_llama(path, "llama", "blk.0.ffn_up.weight");
  EXPECT_NE(load_error(path).find("blk.0.ffn_up.weight"), std::string::npos) << load_error(path);
}

TEST(ModelLoad, WrongShapeIsNamed) {
  const auto path = (temp_dir("model-shape") / "shape.gguf").string();
  write_tiny_llama(path, "llama", "", "blk.0.attn_k.weight");
  const std::string err = load_error(path);
  EXPECT_NE(err.find("blk.0.attn_k.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("shape"), std::string::npos) << err;
}

TEST(ModelLoad, MissingBiasForQwen2IsNamed) {
  const auto path = (temp_dir("model-qwen") / "qwen.gguf").string();
  write_tiny_llama(path, "qwen2");
  EXPECT_NE(load_error(path).find("blk.0.attn_q.bias"), std::string::npos) << load_error(path);
}

TEST(ModelLoad, MissingFileIsNamed) {
  EXPECT_NE(load_error("/nonexistent/model.gguf").find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(Forward, MalformedBatchesAreErrors) {
  const auto path = (temp_dir("model-batch") / "tiny.gguf").string();
  write_tiny_llama(path);
  auto m = model::Model::load(path, 4);
  ThreadPool pool(1);
  TestKv kv(m->config(), kernels::KvType::F16, 4, 2);
  const std::vector<int32_t> table = {1, 0};
  std::vector<float> logits(8 * 16);
  auto forward_error = [&](const model::ForwardBatch& b) -> std::string {
    try {
      m->forward(b, kv.view, pool, logits.data());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  model::ForwardBatch b;
  b.block_tables = {&table};
  EXPECT_NE(forward_error(b), "");  // empty
  b.add(16, 0, 0, true);
  EXPECT_NE(forward_error(b).find("token id 16"), std::string::npos);
  b.clear();
  b.add(1, 8, 0, true);
  EXPECT_NE(forward_error(b).find("beyond its block table"), std::string::npos);
  b.clear();
  b.add(1, 0, 1, true);
  EXPECT_NE(forward_error(b).find("sequence index 1"), std::string::npos);
  b.clear();
  b.add(1, 64, 0, true);
  EXPECT_NE(forward_error(b).find("context"), std::string::npos);
  b.clear();
  for (int i = 0; i < 5; ++i) b.add(1, i, 0, true);
  EXPECT_NE(forward_error(b).find("batch of 5"), std::string::npos);
  const std::vector<int32_t> bad_table = {7};
  b.clear();
  b.block_tables = {&bad_table};
  b.add(1, 0, 0, true);
  EXPECT_NE(forward_error(b).find("block id 7"), std::string::npos);
}

}  // namespace
}  // namespace preface::test

namespace preface::test {
namespace {

// A norm weight that is NaN is refused at load, by tensor name (issue 28 item 11).
TEST(ModelLoad, NonFiniteNormIsRefused) {
  const auto path = (temp_dir("model-nan") / "nan.gguf").string();
  write_tiny_llama(path, "llama", "", "", "", 32, "blk.0.ffn_norm.weight");
  EXPECT_NE(load_error(path).find("tensor blk.0.ffn_norm.weight holds a NaN or infinite value"), std::string::npos)
      << load_error(path);
}

// Llama 3.1-style frequency factors and linear scaling are read, and both reach the RoPE description that roots
// cache namespaces (two files that rotate differently never share a block).
TEST(ModelLoad, RopeScalingIsReadAndDescribed) {
  const auto oc64 = shared_file("models/synth-llama-rope-llama3-oc64-d256-f16.gguf");
  const auto linear = shared_file("models/synth-llama-rope-linear-d256-f16.gguf");
  const auto plain = shared_file("models/synth-llama-d256-f16.gguf");
  if (oc64.empty() || linear.empty() || plain.empty()) GTEST_FAIL() << "needs the shared rope files";
  const model::Config a = model::read_config(gguf::File::open(oc64.string()));
  const model::Config b = model::read_config(gguf::File::open(linear.string()));
  const model::Config c = model::read_config(gguf::File::open(plain.string()));
  ASSERT_EQ(a.rope_freq_factors.size(), 32u);  // head_dim 64: 32 rotated pairs
  EXPECT_EQ(a.rope_freq_factors[0], 1.0f);
  EXPECT_EQ(a.rope_freq_factors[31], 8.0f);
  EXPECT_EQ(a.rope_freq_scale, 1.0f);
  EXPECT_TRUE(b.rope_freq_factors.empty());
  EXPECT_EQ(b.rope_freq_scale, 0.25f);
  EXPECT_TRUE(c.rope_freq_factors.empty());
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_NE(model::rope_description(a), model::rope_description(c));
  EXPECT_NE(model::rope_description(b), model::rope_description(c));
  model::Config a2 = a;
  a2.rope_freq_factors[5] = std::nextafter(a2.rope_freq_factors[5], 100.0f);
  EXPECT_NE(model::rope_description(a), model::rope_description(a2));
}

}  // namespace
}  // namespace preface::test

namespace preface::test {
namespace {

// Heads wider than dim / n_heads (Qwen3 0.6B: 16 heads of 128 on a 1024 embedding): attn_q has n_heads x
// key_length rows and attn_output as many columns; the model runs, and chunking never changes a logit.
TEST(ModelLoad, WideHeadsQwen3Runs) {
  const auto path = (temp_dir("model-wide") / "wide.gguf").string();
  gguf::Writer w;
  w.set_string("general.architecture", "qwen3");
  w.set_u32("qwen3.context_length", 64);
  w.set_u32("qwen3.embedding_length", 32);
  w.set_u32("qwen3.block_count", 1);
  w.set_u32("qwen3.feed_forward_length", 64);
  w.set_u32("qwen3.attention.head_count", 2);
  w.set_u32("qwen3.attention.head_count_kv", 1);
  w.set_u32("qwen3.attention.key_length", 32);
  w.set_u32("qwen3.attention.value_length", 32);
  w.set_f32("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
  uint32_t seed = 1;
  auto add = [&](const std::string& name, std::vector<uint64_t> dims) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    std::vector<float> values(n);
    for (float& v : values) v = 0.02f * static_cast<float>((seed = seed * 1103515245u + 12345u) >> 24) / 255.0f - 0.01f;
    if (name.find("norm") != std::string::npos) {
      for (float& v : values) v += 1.0f;
    }
    w.add_tensor_f32(name, gguf::TensorType::F32, dims, values);
  };
  add("token_embd.weight", {32, 16});
  add("output_norm.weight", {32});
  add("blk.0.attn_norm.weight", {32});
  add("blk.0.attn_q.weight", {32, 64});       // 2 heads x 32
  add("blk.0.attn_k.weight", {32, 32});
  add("blk.0.attn_v.weight", {32, 32});
  add("blk.0.attn_q_norm.weight", {32});
  add("blk.0.attn_k_norm.weight", {32});
  add("blk.0.attn_output.weight", {64, 32});  // 64 columns back to the 32-wide embedding
  add("blk.0.ffn_norm.weight", {32});
  add("blk.0.ffn_gate.weight", {32, 64});
  add("blk.0.ffn_up.weight", {32, 64});
  add("blk.0.ffn_down.weight", {64, 32});
  w.write(path);

  auto m = model::Model::load(path, 8);
  EXPECT_EQ(m->config().head_dim, 32);
  EXPECT_EQ(m->config().q_dim(), 64);
  EXPECT_TRUE(m->config().qk_norm);
  ThreadPool pool(2);
  TestKv kv(m->config(), kernels::KvType::F32, 4, 2);
  const std::vector<int32_t> tokens = {1, 5, 9, 3, 7, 2};
  const std::vector<float> whole = run_chunked(*m, pool, kv.view, {0, 1}, tokens, tokens.size());
  TestKv kv2(m->config(), kernels::KvType::F32, 4, 2);
  const std::vector<float> one_by_one = run_chunked(*m, pool, kv2.view, {1, 0}, tokens, 1);
  for (float x : whole) ASSERT_TRUE(std::isfinite(x));
  ASSERT_EQ(std::memcmp(whole.data(), one_by_one.data(), whole.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace preface::test
