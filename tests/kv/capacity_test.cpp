// KV capacity arithmetic: the reference numbers (Llama-3-8B in bf16: 128 KiB per token, a 6,100-token prefix =
// 762.5 MiB and ~9.8e13 FLOPs), every built-in shape's bytes per token and parameter count against published
// figures, shapes read from the shared GGUFs, parse_bytes and format_bytes.
#include "kv/capacity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "gguf/reader.h"
#include "kv/kv_storage.h"
#include "model/config.h"
#include "model/synth_kv_models.h"
#include "support/shared_data.h"
#include "util/error.h"

namespace preface::kv {
namespace {

KvShape shape(const std::string& name) {
  const auto s = builtin_shape(name);
  EXPECT_TRUE(s.has_value()) << name;
  return s.value_or(KvShape{});
}

TEST(KvCapacity, Llama3_8bReferenceNumbers) {
  const KvShape s = shape("llama3-8b");
  EXPECT_EQ(kv_bytes_per_token(s, KvDtype::BF16), 128u * 1024);
  EXPECT_EQ(format_bytes(kv_bytes_per_token(s, KvDtype::BF16)), "128 KiB");

  const PrefixCost c = prefix_cost(s, KvDtype::BF16, 16, 6100);
  EXPECT_EQ(c.exact_bytes, 6100ull * 128 * 1024);
  EXPECT_EQ(c.exact_bytes, 762ull * 1024 * 1024 + 512 * 1024);  // 762.5 MiB
  EXPECT_EQ(format_bytes(c.exact_bytes), "762.5 MiB");
  EXPECT_EQ(c.n_blocks, 382u);  // 6100 / 16 = 381.25, rounded up
  EXPECT_EQ(c.block_bytes, 382ull * 16 * 128 * 1024);
  EXPECT_EQ(format_bytes(c.block_bytes), "764 MiB");
  EXPECT_NEAR(c.prefill_flops, 9.8e13, 0.05e13);
  EXPECT_DOUBLE_EQ(c.prefill_flops, 2.0 * 8030261248.0 * 6100.0);
}

// Bytes per token for every built-in shape and dtype, worked out by hand from the published configs:
// 2 x layers x kv_heads x head_dim x {4, 2, 2, 34/32}.
TEST(KvCapacity, BuiltinBytesPerToken) {
  struct Expect {
    uint64_t f32, f16, q8_0;
  };
  const std::map<std::string, Expect> expected = {
      {"llama2-7b", {2 * 32 * 32 * 128 * 4, 2 * 32 * 32 * 128 * 2, 2 * 32 * 32 * 4 * 34}},   // 512 KiB f16
      {"llama2-13b", {2 * 40 * 40 * 128 * 4, 2 * 40 * 40 * 128 * 2, 2 * 40 * 40 * 4 * 34}},  // 800 KiB f16
      {"llama3-8b", {256 * 1024, 128 * 1024, 68 * 1024}},
      {"llama3-70b", {640 * 1024, 320 * 1024, 170 * 1024}},
      {"mistral-7b", {256 * 1024, 128 * 1024, 68 * 1024}},
      {"qwen2-7b", {2 * 28 * 4 * 128 * 4, 56 * 1024, 2 * 28 * 4 * 4 * 34}},
      {"qwen2.5-0.5b", {2 * 24 * 2 * 64 * 4, 12 * 1024, 2 * 24 * 2 * 2 * 34}},
      {"tinyllama-1.1b", {2 * 22 * 4 * 64 * 4, 22 * 1024, 2 * 22 * 4 * 2 * 34}},
      {"smollm-135m", {2 * 30 * 3 * 64 * 4, 2 * 30 * 3 * 64 * 2, 2 * 30 * 3 * 2 * 34}},
      {"stories260k", {2 * 5 * 4 * 8 * 4, 2 * 5 * 4 * 8 * 2, 2 * 5 * 4 * 34}},  // q8_0 pads head_dim 8 to 32
  };
  ASSERT_EQ(builtin_shape_names().size(), expected.size());
  for (const std::string& name : builtin_shape_names()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(expected.count(name));
    const KvShape s = shape(name);
    const Expect& e = expected.at(name);
    EXPECT_EQ(kv_bytes_per_token(s, KvDtype::F32), e.f32);
    EXPECT_EQ(kv_bytes_per_token(s, KvDtype::F16), e.f16);
    EXPECT_EQ(kv_bytes_per_token(s, KvDtype::BF16), e.f16);
    EXPECT_EQ(kv_bytes_per_token(s, KvDtype::Q8_0), e.q8_0);
    EXPECT_EQ(s.dim % s.n_heads, 0);
    EXPECT_EQ(s.dim / s.n_heads, s.head_dim);
  }
}

// The parameter count computed from each shape equals the model's published exact count (the safetensors total
// on its Hugging Face page); stories260K is published as "260K".
TEST(KvCapacity, BuiltinParamsMatchPublished) {
  const std::map<std::string, uint64_t> published = {
      {"llama2-7b", 6738415616ull},    {"llama2-13b", 13015864320ull}, {"llama3-8b", 8030261248ull},
      {"llama3-70b", 70553706496ull},  {"mistral-7b", 7241732096ull},  {"qwen2-7b", 7615616512ull},
      {"qwen2.5-0.5b", 494032768ull},  {"tinyllama-1.1b", 1100048384ull}, {"smollm-135m", 134515008ull},
  };
  for (const auto& [name, n_params] : published) {
    EXPECT_EQ(shape(name).n_params, n_params) << name;
    EXPECT_EQ(shape(name).params_source, ParamSource::ComputedFromShape);
  }
  EXPECT_NEAR(static_cast<double>(shape("stories260k").n_params), 260e3, 5e3);
}

TEST(KvCapacity, BuiltinLookup) {
  EXPECT_TRUE(builtin_shape("Llama3-8B").has_value());
  EXPECT_FALSE(builtin_shape("llama3-9b").has_value());
  EXPECT_FALSE(builtin_shape("").has_value());
}

// stories260K's file agrees with the built-in shape (but for the tied output head); every shared model's shape
// agrees with model::read_config.
TEST(KvCapacity, ShapeFromSharedGguf) {
  const auto dir = test::shared_dir();
  if (dir.empty()) return;
  const gguf::File stories = gguf::File::open(test::shared_file("models/stories260K.gguf").string());
  const KvShape from_file = shape_from_gguf(stories);
  const KvShape builtin = shape("stories260k");
  EXPECT_EQ(from_file.n_layers, builtin.n_layers);
  EXPECT_EQ(from_file.n_heads, builtin.n_heads);
  EXPECT_EQ(from_file.n_kv_heads, builtin.n_kv_heads);
  EXPECT_EQ(from_file.head_dim, builtin.head_dim);
  EXPECT_EQ(from_file.dim, builtin.dim);
  EXPECT_EQ(from_file.ffn_dim, builtin.ffn_dim);
  EXPECT_EQ(from_file.n_vocab, builtin.n_vocab);
  // llama2.c ties the classifier to the embeddings (260K parameters); the GGUF conversion stores output.weight
  // as a separate copy, so the file counts dim x vocab more.
  EXPECT_TRUE(builtin.tied_embeddings);
  EXPECT_FALSE(from_file.tied_embeddings);
  EXPECT_EQ(from_file.n_params, builtin.n_params + 64 * 512);
  EXPECT_EQ(from_file.params_source, ParamSource::CountedFromTensors);

  for (const char* rel : {"models/synth-spm-d128-f16.gguf", "models/synth-spm-d128-q4_0.gguf",
                          "models/synth-gpt2-d128-q8_0-tied.gguf", "models/synth-qwen2-d128-bf16.gguf"}) {
    SCOPED_TRACE(rel);
    const gguf::File file = gguf::File::open(test::shared_file(rel).string());
    const KvShape s = shape_from_gguf(file);
    const model::Config c = model::read_config(file);
    EXPECT_EQ(s.n_layers, c.n_layers);
    EXPECT_EQ(s.n_heads, c.n_heads);
    EXPECT_EQ(s.n_kv_heads, c.n_kv_heads);
    EXPECT_EQ(s.head_dim, c.head_dim);
    EXPECT_EQ(s.ffn_dim, c.ffn_dim);
    EXPECT_EQ(s.n_vocab, c.n_vocab);
    EXPECT_EQ(s.tied_embeddings, c.tied_embeddings);
    EXPECT_EQ(s.qkv_bias, c.qkv_bias);
    // The synthetic models are Llama/Qwen2 shapes, so counting tensors and the shape formula agree.
    EXPECT_EQ(s.n_params, shape_param_count(s));
    EXPECT_EQ(kv_bytes_per_token(s, KvDtype::F16), 2ull * c.n_layers * c.kv_row_values() * 2);
  }
}

// The calculator (`preface kv`) and the storage an engine allocates agree on bytes per token for every dtype,
// q8_0 included (2 x layers x kv_heads x head_dim x 34/32), on the shared models whose head_dim q8_0 can store.
TEST(KvCapacity, CalculatorMatchesKvStorage) {
  if (test::shared_dir().empty()) return;
  const std::pair<KvDtype, model::KvType> types[] = {{KvDtype::F32, model::KvType::F32},
                                                     {KvDtype::F16, model::KvType::F16},
                                                     {KvDtype::BF16, model::KvType::BF16},
                                                     {KvDtype::Q8_0, model::KvType::Q8_0}};
  for (const std::string& name : test::q8_0_kv_model_names()) {
    SCOPED_TRACE(name);
    const gguf::File file = gguf::File::open(test::q8_0_kv_model_path(name));
    const KvShape s = shape_from_gguf(file);
    const model::Config c = model::read_config(file);
    ASSERT_EQ(c.head_dim % 32, 0);
    for (const auto& [dtype, type] : types) {
      EXPECT_EQ(kv_dtype_name(dtype), model::kv_type_name(type));
      EXPECT_EQ(kv_bytes_per_token(s, dtype), KvStorage(c, type, 16, 1).bytes_per_token()) << kv_dtype_name(dtype);
    }
    EXPECT_EQ(kv_bytes_per_token(s, KvDtype::Q8_0), 2ull * c.n_layers * c.n_kv_heads * c.head_dim / 32 * 34);
  }
}

TEST(KvCapacity, FitBudget) {
  const KvShape s = shape("llama3-8b");
  const KvBudget b = fit_budget(s, KvDtype::BF16, 16, parse_bytes("2GiB"));
  EXPECT_EQ(b.block_bytes, 2u << 20);
  EXPECT_EQ(b.n_blocks, 1024u);
  EXPECT_EQ(b.n_tokens, 16384u);
  // One byte short of 1,024 blocks holds 1,023 (only whole blocks).
  EXPECT_EQ(fit_budget(s, KvDtype::BF16, 16, (2ull << 30) - 1).n_blocks, 1023u);
  EXPECT_EQ(fit_budget(s, KvDtype::BF16, 16, 100).n_tokens, 0u);
  EXPECT_THROW(fit_budget(s, KvDtype::BF16, 0, 1 << 30), Error);
  EXPECT_THROW(fit_budget(s, KvDtype::BF16, -16, 1 << 30), Error);
}

TEST(KvCapacity, PrefixEdgeCases) {
  const KvShape s = shape("llama3-8b");
  EXPECT_EQ(prefix_cost(s, KvDtype::F16, 16, 0).n_blocks, 0u);
  EXPECT_EQ(prefix_cost(s, KvDtype::F16, 16, 16).n_blocks, 1u);
  EXPECT_EQ(prefix_cost(s, KvDtype::F16, 16, 17).n_blocks, 2u);
  EXPECT_THROW(prefix_cost(s, KvDtype::F16, 16, UINT64_MAX / 1000), Error);  // bytes overflow
}

TEST(KvCapacity, InvalidShapesThrow) {
  KvShape s = shape("llama3-8b");
  s.n_kv_heads = 0;
  EXPECT_THROW(kv_bytes_per_token(s, KvDtype::F16), Error);
  s = shape("llama3-8b");
  s.n_layers = -1;
  EXPECT_THROW(kv_bytes_per_token(s, KvDtype::F16), Error);
  s = shape("llama3-8b");
  s.head_dim = 1 << 30;
  EXPECT_THROW(kv_bytes_per_token(s, KvDtype::F16), Error);
  s = shape("llama3-8b");
  s.n_kv_heads = 7;  // 32 heads are not a multiple of 7
  EXPECT_THROW(kv_bytes_per_token(s, KvDtype::F16), Error);
}

TEST(KvCapacity, DtypeNames) {
  for (KvDtype t : kAllKvDtypes) EXPECT_EQ(parse_kv_dtype(kv_dtype_name(t)), t);
  EXPECT_EQ(parse_kv_dtype("Q8_0"), KvDtype::Q8_0);
  EXPECT_THROW(parse_kv_dtype("q4_0"), Error);
  EXPECT_THROW(parse_kv_dtype(""), Error);
  EXPECT_DOUBLE_EQ(kv_bytes_per_value(KvDtype::Q8_0), 1.0625);
  EXPECT_EQ(kv_bytes_per_head_row(KvDtype::Q8_0, 128), 136u);
  EXPECT_EQ(kv_bytes_per_head_row(KvDtype::Q8_0, 33), 68u);
}

TEST(ParseBytes, Accepts) {
  EXPECT_EQ(parse_bytes("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_bytes("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_bytes("512 mib"), 512ull << 20);
  EXPECT_EQ(parse_bytes("  4KiB "), 4096u);
  EXPECT_EQ(parse_bytes("1TiB"), 1ull << 40);
  EXPECT_EQ(parse_bytes("2PiB"), 2ull << 50);
  EXPECT_EQ(parse_bytes("8GB"), 8000000000ull);
  EXPECT_EQ(parse_bytes("3kb"), 3000u);
  EXPECT_EQ(parse_bytes("7MB"), 7000000u);
  EXPECT_EQ(parse_bytes("1TB"), 1000000000000ull);
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("4096B"), 4096u);
  EXPECT_EQ(parse_bytes("0"), 0u);
  EXPECT_EQ(parse_bytes("0GiB"), 0u);
  EXPECT_EQ(parse_bytes("1e9"), 1000000000u);
  EXPECT_EQ(parse_bytes("2.5e3KiB"), 2500u * 1024);
  EXPECT_EQ(parse_bytes("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_bytes(".5KiB"), 512u);
  EXPECT_EQ(parse_bytes("0.1KiB"), 102u);  // 102.4 rounds down
  EXPECT_EQ(parse_bytes("1e-3KB"), 1u);
  EXPECT_EQ(parse_bytes("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_bytes("0000000000000000000000001KiB"), 1024u);
  EXPECT_EQ(parse_bytes("1.000000000000000000000000GiB"), 1ull << 30);
  EXPECT_EQ(parse_bytes("15PiB"), 15ull << 50);
}

TEST(ParseBytes, Rejects) {
  for (const char* bad : {"", "   ", "-1", "-1GiB", "- 5", "+5", "GiB", "abc", "2 GiBs", "2G", "2k", "1,000",
                          "0x10", "1e", "1e+", "1.2.3", "nan", "inf", "2 Gi B", "1EiB", "5 bytes"}) {
    EXPECT_THROW(parse_bytes(bad), Error) << "'" << bad << "'";
  }
}

TEST(ParseBytes, Overflow) {
  EXPECT_THROW(parse_bytes("18446744073709551616"), Error);  // 2^64
  EXPECT_THROW(parse_bytes("16384PiB"), Error);              // 2^64
  EXPECT_EQ(parse_bytes("16383PiB"), 16383ull << 50);
  EXPECT_THROW(parse_bytes("1e20"), Error);
  EXPECT_THROW(parse_bytes("1e999999999999"), Error);
  EXPECT_EQ(parse_bytes("1e-999999999999"), 0u);
  EXPECT_THROW(parse_bytes("123456789012345678901"), Error);  // 21 significant digits
  EXPECT_THROW(parse_bytes(std::string(100000, '9')), Error);
}

TEST(FormatBytes, Units) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(128 * 1024), "128 KiB");
  EXPECT_EQ(format_bytes(2ull << 30), "2 GiB");
  EXPECT_EQ(format_bytes(1000000000), "953.67 MiB");
  EXPECT_EQ(format_bytes((1ull << 20) - 1), "1 MiB");  // 1023.999 KiB rounds to the next unit
  EXPECT_EQ(format_bytes(UINT64_MAX), "16 EiB");
  // Round trip through parse_bytes for exact values.
  for (uint64_t n : {1ull << 10, 3ull << 29, 762ull * 1024 * 1024 + 512 * 1024, 5ull << 40}) {
    EXPECT_EQ(parse_bytes(format_bytes(n)), n) << format_bytes(n);
  }
}

TEST(MemAvailable, ReadsProcMeminfo) {
  const uint64_t n = mem_available_bytes();
  EXPECT_GT(n, 16ull << 20) << "MemAvailable of /proc/meminfo";
  EXPECT_EQ(n % 1024, 0u) << "reported in KiB";
}

}  // namespace
}  // namespace preface::kv
