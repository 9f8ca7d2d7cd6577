// Reads every GGUF in ../shared (models and vocabularies) and checks facts known about them (../shared/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "gguf/reader.h"
#include "support/shared_data.h"
#include "util/error.h"

namespace preface::gguf {
namespace {

namespace fs = std::filesystem;

TEST(SharedModels, EveryModelAndVocabParses) {
  const fs::path dir = test::shared_dir();
  if (dir.empty()) return;
  int n_files = 0;
  for (const char* sub : {"models", "vocab"}) {
    for (const auto& entry : fs::directory_iterator(dir / sub)) {
      if (entry.path().extension() != ".gguf") continue;
      SCOPED_TRACE(entry.path().string());
      const File f = File::open(entry.path().string());
      ++n_files;
      EXPECT_TRUE(f.version() == 2 || f.version() == 3);
      EXPECT_FALSE(f.get_string("general.architecture").empty());
      const Value* tokens = f.find("tokenizer.ggml.tokens");
      ASSERT_NE(tokens, nullptr);
      EXPECT_EQ(tokens->elem_type, ValueType::STRING);
      EXPECT_GT(tokens->array_size(), 100u);
      const uint8_t* file_begin = f.mapping().data();
      const uint8_t* file_end = file_begin + f.mapping().size_bytes();
      for (const TensorInfo& t : f.tensors()) {
        EXPECT_GE(t.data, file_begin) << t.name;
        EXPECT_LE(t.data + t.size_bytes, file_end) << t.name;
        EXPECT_EQ((t.data - file_begin) % f.alignment(), 0) << t.name;
      }
    }
  }
  EXPECT_GE(n_files, 12);
}

TEST(SharedModels, Stories260K) {
  const fs::path path = test::shared_file("models/stories260K.gguf");
  if (path.empty()) return;
  const File f = File::open(path.string());
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->array_size(), 512u);
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->nums.size(), 512u);
  const TensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(emb.type, TensorType::F32);
  EXPECT_EQ(emb.size_bytes, 64u * 512u * 4u);
  EXPECT_EQ(emb.n_rows(), 512u);
  for (int layer = 0; layer < 5; ++layer) {
    const std::string prefix = "blk." + std::to_string(layer) + ".";
    for (const char* name : {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                             "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                             "ffn_down.weight"}) {
      EXPECT_NE(f.find_tensor(prefix + name), nullptr) << prefix + name;
    }
  }
  EXPECT_EQ(f.find_tensor("blk.5.attn_q.weight"), nullptr);
  // GQA: K projects 64 -> 4 heads x 8.
  EXPECT_EQ(f.tensor("blk.0.attn_k.weight").dims, (std::vector<uint64_t>{64, 32}));
  // A value from the weights: finite and not all zero.
  const float* w = reinterpret_cast<const float*>(emb.data);
  double sum_abs = 0;
  for (size_t i = 0; i < 64; ++i) sum_abs += std::abs(w[i]);
  EXPECT_GT(sum_abs, 0.0);
  EXPECT_THROW(f.tensor("no.such.tensor"), Error);
  EXPECT_THROW(f.get_int("general.architecture"), Error);
  EXPECT_THROW(f.get_string("no.such.key"), Error);
  EXPECT_FALSE(f.try_int("no.such.key").has_value());
}

TEST(SharedModels, QuantizedAndBiasedSynths) {
  const fs::path dir = test::shared_dir();
  if (dir.empty()) return;
  {
    const File f = File::open((dir / "models/synth-spm-d128-q8_0.gguf").string());
    EXPECT_EQ(f.tensor("blk.0.attn_q.weight").type, TensorType::Q8_0);
    EXPECT_EQ(f.tensor("blk.0.attn_norm.weight").type, TensorType::F32);
    EXPECT_EQ(f.tensor("blk.0.ffn_up.weight").dims, (std::vector<uint64_t>{128, 352}));
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->array_size(), 32000u);
  }
  {
    const File f = File::open((dir / "models/synth-spm-d128-q4_0.gguf").string());
    EXPECT_EQ(f.tensor("blk.2.ffn_down.weight").type, TensorType::Q4_0);
    EXPECT_EQ(f.tensor("blk.2.ffn_down.weight").dims, (std::vector<uint64_t>{352, 128}));
  }
  {
    const File f = File::open((dir / "models/synth-spm-d128-f16.gguf").string());
    EXPECT_EQ(f.tensor("output.weight").type, TensorType::F16);
  }
  {
    const File f = File::open((dir / "models/synth-gpt2-d128-q8_0-tied.gguf").string());
    EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->array_size(), 50257u);
  }
  {
    const File f = File::open((dir / "models/synth-qwen2-d128-bf16.gguf").string());
    EXPECT_EQ(f.get_string("general.architecture"), "qwen2");
    EXPECT_EQ(f.tensor("blk.0.attn_q.weight").type, TensorType::BF16);
    for (const char* bias : {"blk.1.attn_q.bias", "blk.1.attn_k.bias", "blk.1.attn_v.bias"}) {
      const TensorInfo& t = f.tensor(bias);
      EXPECT_EQ(t.type, TensorType::F32) << bias;
      EXPECT_EQ(t.dims.size(), 1u) << bias;
    }
    EXPECT_EQ(f.tensor("blk.1.attn_k.bias").dims[0], 32u);  // 2 KV heads x 16
    EXPECT_DOUBLE_EQ(f.get_float("qwen2.rope.freq_base"), 1e6);
  }
}

}  // namespace
}  // namespace preface::gguf
