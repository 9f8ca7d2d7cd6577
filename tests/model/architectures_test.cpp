// The architecture readers (model/arch/registry.h: llama.cpp, gemma.cpp, ...): what the shared gemma files say reaches
// Config (scales, caps, windows, which layers are local, the local RoPE), the keys that change it (window pattern,
// query_pre_attn_scalar, a present final cap), Mistral's window on a llama file, phi3's window left unapplied, and
// clear errors naming a missing key or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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

// Metadata of a 7-layer model of `arch` (dim 64, 2 heads of 32) with one token_embd tensor (all read_config needs);
// `extra` adds keys.
model::Config config_of(const std::string& arch, const std::function<void(gguf::Writer&)>& extra) {
  gguf::Writer w;
  w.set_string("general.architecture", arch);
  w.set_u32(arch + ".context_length", 256);
  w.set_u32(arch + ".embedding_length", 64);
  w.set_u32(arch + ".block_count", 7);
  w.set_u32(arch + ".feed_forward_length", 128);
  w.set_u32(arch + ".attention.head_count", 2);
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
  extra(w);
  w.add_tensor_f32("token_embd.weight", gguf::TensorType::F32, {64, 8}, std::vector<float>(64 * 8, 0.0f));
  const auto path = (temp_dir("arch-config") / (arch + ".gguf")).string();
  w.write(path);
  return model::read_config(gguf::File::open(path));
}

std::vector<int> local_layers(const model::Config& c) {
  std::vector<int> out;
  for (int32_t il = 0; il < c.n_layers; ++il) {
    if (c.is_local(il)) out.push_back(il);
  }
  return out;
}

TEST(Architectures, Gemma2SharedFile) {
  const auto path = shared_file("models/synth-gemma2-d128-f16.gguf");
  if (path.empty()) GTEST_FAIL() << "needs ../shared/models/synth-gemma2-d128-f16.gguf";
  const model::Config c = model::read_config(gguf::File::open(path.string()));
  EXPECT_EQ(c.embd_scale, std::sqrt(128.0f));
  EXPECT_TRUE(c.post_norms && c.ffn_gelu && c.rope_neox && !c.qk_norm);
  EXPECT_EQ(c.attn_softcap, 2.0f);
  EXPECT_EQ(c.final_softcap, 1.0f);
  EXPECT_EQ(c.attn_scale(), 0.125f);  // 1 / sqrt(key_length 64)
  EXPECT_EQ(c.sliding_window, 16);
  for (int32_t il = 0; il < c.n_layers; ++il) EXPECT_EQ(c.layer_window(il), il % 2 == 0 ? 16 : 0) << il;
  EXPECT_FALSE(c.local_rope_differs());
}

// The start-up line names the architecture and says which layers are local.
TEST(Architectures, SummaryNamesGemmaAndItsWindow) {
  const auto path = shared_file("models/synth-gemma2-d128-f16.gguf");
  if (path.empty()) GTEST_FAIL() << "needs ../shared/models/synth-gemma2-d128-f16.gguf";
  const auto m = model::Model::load(path.string(), 8);
  const std::string summary = model::model_summary(*m);
  EXPECT_NE(summary.find("gemma2: 26 layers, dim 128, 4 heads / 2 KV heads of 64, ffn 384"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("; sliding window 16 on 13 of 26 layers;"), std::string::npos) << summary;
}

TEST(Architectures, Gemma3SharedFile) {
  const auto path = shared_file("models/synth-gemma3-d256-f16.gguf");
  if (path.empty()) GTEST_FAIL() << "needs ../shared/models/synth-gemma3-d256-f16.gguf";
  const model::Config c = model::read_config(gguf::File::open(path.string()));
  EXPECT_EQ(c.embd_scale, 16.0f);
  EXPECT_TRUE(c.post_norms && c.ffn_gelu && c.qk_norm);
  EXPECT_EQ(c.attn_softcap, 0.0f);
  EXPECT_EQ(c.final_softcap, 0.0f);  // no final_logit_softcapping key
  EXPECT_EQ(local_layers(c), (std::vector<int>{0, 1, 2, 3, 4, 6}));
  EXPECT_EQ(c.rope_base, 1e6f);
  EXPECT_EQ(c.rope_freq_scale, 0.125f);
  EXPECT_EQ(c.rope_base_local, 1e4f);
  EXPECT_EQ(c.rope_freq_scale_local, 1.0f);
  // The local rope is part of the cache namespace's RoPE description.
  model::Config other = c;
  other.rope_base_local = 2e4f;
  EXPECT_NE(model::rope_description(c), model::rope_description(other));
}

TEST(Architectures, Gemma3KeysChangeTheLayer) {
  const model::Config c = config_of("gemma3", [](gguf::Writer& w) {
    w.set_u32("gemma3.attention.sliding_window", 8);
    w.set_u32("gemma3.attention.sliding_window_pattern", 3);
    w.set_f32("gemma3.attention.query_pre_attn_scalar", 144.0f);
    w.set_f32("gemma3.final_logit_softcapping", 30.0f);
  });
  EXPECT_EQ(local_layers(c), (std::vector<int>{0, 1, 3, 4, 6}));  // il % 3 == 2 global
  EXPECT_EQ(c.attn_scale(), 1.0f / 12.0f);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.rope_base_local, 1e4f);  // no rope.freq_base_swa: the default
}

TEST(Architectures, Gemma2DefaultsAreLlamaCpps) {
  const model::Config c = config_of("gemma2", [](gguf::Writer&) {});
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.attn_softcap, 50.0f);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(local_layers(c), (std::vector<int>{0, 2, 4, 6}));
}

TEST(Architectures, BadGemmaKeysAreNamed) {
  const auto error_of = [](const std::string& arch, const std::function<void(gguf::Writer&)>& extra) {
    try {
      config_of(arch, extra);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("gemma3", [](gguf::Writer&) {}).find("gemma3.attention.sliding_window is missing"),
            std::string::npos);
  EXPECT_NE(error_of("gemma2", [](gguf::Writer& w) { w.set_f32("gemma2.attn_logit_softcapping", -1.0f); })
                .find("gemma2.attn_logit_softcapping must be a finite value > 0"),
            std::string::npos);
  EXPECT_NE(error_of("gemma3", [](gguf::Writer& w) {
              w.set_u32("gemma3.attention.sliding_window", 8);
              w.set_u32("gemma3.attention.sliding_window_pattern", 0);
            }).find("gemma3.attention.sliding_window_pattern = 0 is out of range"),
            std::string::npos);
}

// Mistral: a llama file with attention.sliding_window has it on every layer; without, none. phi3's is not applied.
TEST(Architectures, LlamaWindowAppliedPhi3Not) {
  const model::Config mistral =
      config_of("llama", [](gguf::Writer& w) { w.set_u32("llama.attention.sliding_window", 4096); });
  EXPECT_EQ(local_layers(mistral), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(mistral.layer_window(3), 4096);
  EXPECT_FALSE(mistral.local_rope_differs());
  EXPECT_TRUE(local_layers(config_of("llama", [](gguf::Writer&) {})).empty());
  const model::Config phi3 = config_of("phi3", [](gguf::Writer& w) { w.set_u32("phi3.attention.sliding_window", 16); });
  EXPECT_TRUE(local_layers(phi3).empty());
}

// A layer's attention scale follows its own head size (gemma4's local and global layers differ) unless the file
// sets one for all.
TEST(Architectures, AttentionScaleFollowsTheLayersHeadSize) {
  model::Config c;
  c.n_layers = 2;
  c.head_dim = 128;
  c.head_dim_local = 64;
  c.layer_local = {1, 0};
  EXPECT_EQ(c.attn_scale(0), 0.125f);
  EXPECT_EQ(c.attn_scale(1), 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(c.attn_scale(), 1.0f / std::sqrt(128.0f));
  c.query_scale = 1.0f;
  EXPECT_EQ(c.attn_scale(0), 1.0f);
  EXPECT_EQ(c.attn_scale(1), 1.0f);
}

// The unsupported-architecture message lists every architecture by name.
TEST(Architectures, UnsupportedListsNames) {
  try {
    config_of("mamba", [](gguf::Writer&) {});
    FAIL() << "mamba loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported architecture 'mamba' (supported: llama, qwen2, qwen3, qwen3moe, "
                                         "qwen35, qwen35moe, phi3, gemma2, gemma3, gemma4, gpt-oss)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace preface::test
