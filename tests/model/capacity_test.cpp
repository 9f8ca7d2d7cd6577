// KV capacity arithmetic: the reference numbers (Llama-3-8B in bf16: 128 KiB per token, a 6,100-token prefix =
// 762.5 MiB and ~9.8e13 FLOPs), every built-in shape's bytes per token and parameter count against published
// figures, shapes read from the shared GGUFs.
#include "model/capacity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "gguf/reader.h"
#include "kernels/kv_type.h"
#include "model/base/config.h"
#include "model/synth_kv_models.h"
#include "support/shared_data.h"
#include "util/bytes.h"
#include "util/error.h"

namespace preface::model {
namespace {

KvShape shape(const std::string& name) {
  const auto s = builtin_shape(name);
  EXPECT_TRUE(s.has_value()) << name;
  return s.value_or(KvShape{});
}

TEST(KvCapacity, Llama3_8bReferenceNumbers) {
  const KvShape s = shape("llama3-8b");
  EXPECT_EQ(kv_bytes_per_token(s, kernels::KvType::BF16), 128u * 1024);
  EXPECT_EQ(format_bytes(kv_bytes_per_token(s, kernels::KvType::BF16)), "128 KiB");

  const PrefixCost c = prefix_cost(s, kernels::KvType::BF16, 16, 6100);
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
      {"stories260k", {2 * 5 * 4 * 8 * 4, 2 * 5 * 4 * 8 * 2, 2 * 5 * 34}},  // q8_0: a row of 4 heads of 8 is one block
      // 50 sliding layers of 16 x 256 and 10 global of 4 x 512: 880 KiB f16
      {"gemma4-31b", {2 * (50 * 16 * 256 + 10 * 4 * 512) * 4, 2 * (50 * 16 * 256 + 10 * 4 * 512) * 2,
                      2 * (50 * 16 * 8 + 10 * 4 * 16) * 34}},
  };
  ASSERT_EQ(builtin_shape_names().size(), expected.size());
  for (const std::string& name : builtin_shape_names()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(expected.count(name));
    const KvShape s = shape(name);
    const Expect& e = expected.at(name);
    EXPECT_EQ(kv_bytes_per_token(s, kernels::KvType::F32), e.f32);
    EXPECT_EQ(kv_bytes_per_token(s, kernels::KvType::F16), e.f16);
    EXPECT_EQ(kv_bytes_per_token(s, kernels::KvType::BF16), e.f16);
    EXPECT_EQ(kv_bytes_per_token(s, kernels::KvType::Q8_0), e.q8_0);
    if (s.params_source == ParamSource::Published) continue;  // gemma's head size is not dim / heads
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
    EXPECT_EQ(kv_bytes_per_token(s, kernels::KvType::F16), 2ull * c.n_layers * c.kv_row_values() * 2);
  }
}

// The calculator (`preface kv`) and the model's own config agree on bytes per token for every type, q8_0 included
// (2 x layers x kv_heads x head_dim x 34/32), on the shared models whose head_dim q8_0 can store: the row formula
// of kernels::kv_row_bytes, which kv::KvStorage is tested to allocate (tests/kv/kv_storage_test.cpp).
TEST(KvCapacity, CalculatorMatchesKvStorage) {
  if (test::shared_dir().empty()) return;
  for (const std::string& name : test::q8_0_kv_model_names()) {
    SCOPED_TRACE(name);
    const gguf::File file = gguf::File::open(test::q8_0_kv_model_path(name));
    const KvShape s = shape_from_gguf(file);
    const Config c = read_config(file);
    ASSERT_EQ(c.head_dim % 32, 0);
    for (kernels::KvType t : kernels::kAllKvTypes) {
      EXPECT_EQ(kv_bytes_per_token(s, t),
                2ull * c.n_layers * kernels::kv_row_bytes(t, static_cast<size_t>(c.kv_row_values())))
          << kernels::kv_type_name(t);
    }
    EXPECT_EQ(kv_bytes_per_token(s, kernels::KvType::Q8_0), 2ull * c.n_layers * c.n_kv_heads * c.head_dim / 32 * 34);
  }
}

TEST(KvCapacity, FitBudget) {
  const KvShape s = shape("llama3-8b");
  const KvBudget b = fit_budget(s, kernels::KvType::BF16, 16, parse_bytes("2GiB"));
  EXPECT_EQ(b.block_bytes, 2u << 20);
  EXPECT_EQ(b.n_blocks, 1024u);
  EXPECT_EQ(b.n_tokens, 16384u);
  // One byte short of 1,024 blocks holds 1,023 (only whole blocks).
  EXPECT_EQ(fit_budget(s, kernels::KvType::BF16, 16, (2ull << 30) - 1).n_blocks, 1023u);
  EXPECT_EQ(fit_budget(s, kernels::KvType::BF16, 16, 100).n_tokens, 0u);
  EXPECT_THROW(fit_budget(s, kernels::KvType::BF16, 0, 1 << 30), Error);
  EXPECT_THROW(fit_budget(s, kernels::KvType::BF16, -16, 1 << 30), Error);
}

TEST(KvCapacity, PrefixEdgeCases) {
  const KvShape s = shape("llama3-8b");
  EXPECT_EQ(prefix_cost(s, kernels::KvType::F16, 16, 0).n_blocks, 0u);
  EXPECT_EQ(prefix_cost(s, kernels::KvType::F16, 16, 16).n_blocks, 1u);
  EXPECT_EQ(prefix_cost(s, kernels::KvType::F16, 16, 17).n_blocks, 2u);
  EXPECT_THROW(prefix_cost(s, kernels::KvType::F16, 16, UINT64_MAX / 1000), Error);  // bytes overflow
}

TEST(KvCapacity, InvalidShapesThrow) {
  KvShape s = shape("llama3-8b");
  s.n_kv_heads = 0;
  EXPECT_THROW(kv_bytes_per_token(s, kernels::KvType::F16), Error);
  s = shape("llama3-8b");
  s.n_layers = -1;
  EXPECT_THROW(kv_bytes_per_token(s, kernels::KvType::F16), Error);
  s = shape("llama3-8b");
  s.head_dim = 1 << 30;
  EXPECT_THROW(kv_bytes_per_token(s, kernels::KvType::F16), Error);
  s = shape("llama3-8b");
  s.n_kv_heads = 7;  // 32 heads are not a multiple of 7
  EXPECT_THROW(kv_bytes_per_token(s, kernels::KvType::F16), Error);
}

TEST(KvCapacity, TypeNamesAndRowBytes) {
  for (kernels::KvType t : kernels::kAllKvTypes) EXPECT_EQ(kernels::parse_kv_type(kernels::kv_type_name(t)), t);
  EXPECT_EQ(kernels::parse_kv_type("Q8_0"), kernels::KvType::Q8_0);
  EXPECT_EQ(kernels::parse_kv_type("IQ4_NL"), kernels::KvType::IQ4_NL);
  EXPECT_THROW(kernels::parse_kv_type("q4_k"), Error);
  EXPECT_THROW(kernels::parse_kv_type(""), Error);
  EXPECT_DOUBLE_EQ(kernels::kv_bytes_per_value(kernels::KvType::Q8_0), 1.0625);
  EXPECT_DOUBLE_EQ(kernels::kv_bytes_per_value(kernels::KvType::BF16), 2.0);
  EXPECT_DOUBLE_EQ(kernels::kv_bytes_per_value(kernels::KvType::Q4_0), 18.0 / 32);
  EXPECT_DOUBLE_EQ(kernels::kv_bytes_per_value(kernels::KvType::Q5_1), 24.0 / 32);
  // Format names: what namespaces and tier records carry (at most 15 characters).
  using kernels::KvFormat;
  using kernels::KvType;
  EXPECT_EQ(KvFormat(KvType::Q8_0).name(), "q8_0");
  EXPECT_EQ(KvFormat(KvType::Q8_0, KvType::Q4_0).name(), "q8_0/q4_0");
  EXPECT_EQ(KvFormat(KvType::Q4_0, KvType::Q4_0, true, true).name(), "q4_0+r");
  EXPECT_EQ(KvFormat(KvType::Q8_0, KvType::F16, true, false).name(), "q8_0/f16+rk");
  for (KvType k : kernels::kAllKvTypes) {
    for (KvType v : kernels::kAllKvTypes) EXPECT_LE(KvFormat(k, v, true, false).name().size(), 15u);
  }
  // --kv-rotate auto rotates the block-type sides whose heads fit; on refuses heads that do not.
  EXPECT_EQ(kernels::resolve_kv_format(KvType::Q8_0, KvType::F16, kernels::KvRotate::Auto, true, true),
            KvFormat(KvType::Q8_0, KvType::F16, true, false));
  EXPECT_EQ(kernels::resolve_kv_format(KvType::Q8_0, KvType::Q4_0, kernels::KvRotate::Auto, false, false),
            KvFormat(KvType::Q8_0, KvType::Q4_0));
  EXPECT_EQ(kernels::resolve_kv_format(KvType::F16, KvType::F16, kernels::KvRotate::On, true, true),
            KvFormat(KvType::F16, KvType::F16, true, true));
  EXPECT_THROW(kernels::resolve_kv_format(KvType::Q4_0, KvType::Q4_0, kernels::KvRotate::On, false, true), Error);
  EXPECT_EQ(kv_head_row_bytes(kernels::KvType::Q8_0, 128), 136u);
  EXPECT_EQ(kv_head_row_bytes(kernels::KvType::Q8_0, 33), 68u);
  EXPECT_EQ(kv_head_row_bytes(kernels::KvType::F32, 33), 132u);
}

}  // namespace
}  // namespace preface::model

namespace preface::model {
namespace {

// One sequence's memory per group with the windowed layers in their own pool: the global group keeps every block,
// the windowed one the blocks from the first its next query may load (kv/window_pool.h).
TEST(KvCapacity, SequenceHoldReclaimsTheWindowOfAGemma4_31bShape) {
  const KvShape s = *builtin_shape("gemma4-31b");
  EXPECT_EQ(s.params_source, ParamSource::Published);
  const MemoryLayout m = memory_layout(s);
  ASSERT_EQ(m.groups().size(), 2u);
  ASSERT_TRUE(m.can_split_windows());
  EXPECT_EQ(m.groups()[0].layers.size(), 50u);
  EXPECT_EQ(m.groups()[0].spec.window, 1024);
  EXPECT_EQ(m.groups()[1].layers.size(), 10u);
  const std::vector<GroupHold> h = sequence_hold(m, kernels::KvType::F16, 16, 32768);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].n_blocks_kept, 2048u);
  // The next query (32768) sees 31745 ..: attention loads from 31744 = block 1984.
  EXPECT_EQ(h[0].n_blocks_reclaim, 64u);
  EXPECT_EQ(h[1].n_blocks_kept, 2048u);
  EXPECT_EQ(h[1].n_blocks_reclaim, 2048u);
  EXPECT_EQ(h[0].bytes_kept, uint64_t{2048} * 16 * 50 * 16 * 256 * 2 * 2);
  const double kept = static_cast<double>(h[0].bytes_kept + h[1].bytes_kept);
  const double reclaim = static_cast<double>(h[0].bytes_reclaim + h[1].bytes_reclaim);
  EXPECT_LT(reclaim / kept, 0.2);  // the "~1/5"; 11.9% for this shape
  // Short sequences keep everything: the window still reaches position 0.
  const std::vector<GroupHold> short_seq = sequence_hold(m, kernels::KvType::F16, 16, 1000);
  EXPECT_EQ(short_seq[0].n_blocks_reclaim, short_seq[0].n_blocks_kept);
  // A layout with one kind of layer never splits.
  const std::vector<GroupHold> llama = sequence_hold(memory_layout(*builtin_shape("llama3-8b")),
                                                     kernels::KvType::F16, 16, 32768);
  EXPECT_EQ(llama[0].n_blocks_reclaim, llama[0].n_blocks_kept);
  EXPECT_EQ(window_reserve_blocks(1024, 16), 68);  // 1024 + 32 positions: 66 blocks, + 2
}

}  // namespace
}  // namespace preface::model
