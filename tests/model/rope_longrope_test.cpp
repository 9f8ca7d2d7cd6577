// LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini: rope_factors_long.weight / rope_factors_short.weight and
// rope.scaling.attn_factor): which factor set a file gets, its place in the cache namespace's RoPE description, the
// refusals, and the logits of LongRoPE copies of ../shared's synth-phi3-d256-f16 against llama.cpp's
// (tests/model/data/synth-phi3-d256-f16-longrope-{long,short}.json, whose "source" says how they were made).
// ../shared has no LongRoPE file: the copies are written here, from the shared file plus the keys and tensors
// below, the way the oracles' were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/base/config.h"
#include "model/model.h"
#include "model_harness.h"
#include "support/shared_data.h"
#include "util/error.h"

namespace preface::test {
namespace {

constexpr int kPairs = 32;  // synth-phi3-d256: head_dim 64, every dimension rotated

// Pair i: long factors 1 + i / 4 (up to 8.75), short ones 1 + i / 50.
std::vector<float> long_factors() {
  std::vector<float> f(kPairs);
  for (int i = 0; i < kPairs; ++i) f[static_cast<size_t>(i)] = 1.0f + 0.25f * static_cast<float>(i);
  return f;
}
std::vector<float> short_factors() {
  std::vector<float> f(kPairs);
  for (int i = 0; i < kPairs; ++i) f[static_cast<size_t>(i)] = 1.0f + 0.02f * static_cast<float>(i);
  return f;
}

std::string copy_with(const std::string& name, const std::function<void(gguf::Writer&)>& extra) {
  return shared_model_copy("synth-phi3-d256-f16.gguf", "longrope-" + name, extra);
}

// Both factor sets and Phi-4-mini's attention factor; original context 64 (long factors: 4096 > 64) or 8192
// (short factors).
std::function<void(gguf::Writer&)> longrope(uint32_t original_ctx) {
  return [original_ctx](gguf::Writer& w) {
    w.set_f32("phi3.rope.scaling.attn_factor", 1.1902f);
    w.set_u32("phi3.rope.scaling.original_context_length", original_ctx);
    w.add_tensor_f32("rope_factors_long.weight", gguf::TensorType::F32, {kPairs}, long_factors());
    w.add_tensor_f32("rope_factors_short.weight", gguf::TensorType::F32, {kPairs}, short_factors());
  };
}

model::Config config_of(const std::string& path) { return model::read_config(gguf::File::open(path)); }

std::string config_error(const std::function<void(gguf::Writer&)>& extra) {
  try {
    config_of(copy_with("bad", extra));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RopeLongrope, TheContextChoosesTheFactorsOncePerFile) {
  const std::string long_path = copy_with("long", longrope(64));
  if (long_path.empty()) GTEST_FAIL() << "needs ../shared/models/synth-phi3-d256-f16.gguf";
  const model::Config lng = config_of(long_path);
  const model::Config shrt = config_of(copy_with("short", longrope(8192)));
  const model::Config plain = config_of(shared_file("models/synth-phi3-d256-f16.gguf").string());
  EXPECT_EQ(lng.rope_freq_factors, long_factors());
  EXPECT_EQ(shrt.rope_freq_factors, short_factors());
  EXPECT_TRUE(plain.rope_freq_factors.empty());
  EXPECT_EQ(lng.rope_yarn.attn_factor, 1.1902f);
  EXPECT_EQ(lng.rope_yarn.ext_factor, 0.0f);  // no YaRN ramp: only the factors and the magnitude
  EXPECT_EQ(lng.rope_freq_scale, 1.0f);
  // Each choice, and the attention factor, is its own cache namespace; plain phi3's description is unchanged by
  // the keys it does not have.
  EXPECT_NE(model::rope_description(lng), model::rope_description(shrt));
  EXPECT_NE(model::rope_description(lng), model::rope_description(plain));
  model::Config no_attn = lng;
  no_attn.rope_yarn.attn_factor = 1.0f;
  EXPECT_NE(model::rope_description(lng), model::rope_description(no_attn));
  EXPECT_EQ(model::rope_description(plain).find("yarn"), std::string::npos);

  // rope.scaling.type longrope is accepted with the tensors; rope_freqs.weight wins over them, as in llama.cpp.
  const model::Config typed = config_of(copy_with("typed", [](gguf::Writer& w) {
    longrope(64)(w);
    w.set_string("phi3.rope.scaling.type", "longrope");
  }));
  EXPECT_EQ(typed.rope_freq_factors, long_factors());
  const model::Config freqs = config_of(copy_with("freqs", [](gguf::Writer& w) {
    longrope(64)(w);
    w.add_tensor_f32("rope_freqs.weight", gguf::TensorType::F32, {kPairs}, std::vector<float>(kPairs, 2.0f));
  }));
  EXPECT_EQ(freqs.rope_freq_factors, std::vector<float>(kPairs, 2.0f));
}

TEST(RopeLongrope, BadFilesAreRefusedByName) {
  if (shared_file("models/synth-phi3-d256-f16.gguf").empty()) GTEST_FAIL() << "needs ../shared";
  EXPECT_NE(config_error([](gguf::Writer& w) {
              w.set_u32("phi3.rope.scaling.original_context_length", 64);
              w.add_tensor_f32("rope_factors_short.weight", gguf::TensorType::F32, {kPairs}, short_factors());
            }).find("context_length 4096 exceeds rope.scaling.original_context_length 64, which needs "
                    "rope_factors_long.weight, missing from the file"),
            std::string::npos);
  EXPECT_NE(config_error([](gguf::Writer& w) {
              w.set_u32("phi3.rope.scaling.original_context_length", 64);
              w.add_tensor_f32("rope_factors_long.weight", gguf::TensorType::F32, {kPairs - 1},
                               std::vector<float>(kPairs - 1, 1.0f));
            }).find("rope_factors_long.weight must be 32 values"),
            std::string::npos);
  EXPECT_NE(config_error([](gguf::Writer& w) {
              std::vector<float> f = long_factors();
              f[3] = -1.0f;
              w.set_u32("phi3.rope.scaling.original_context_length", 64);
              w.add_tensor_f32("rope_factors_long.weight", gguf::TensorType::F32, {kPairs}, f);
            }).find("rope_factors_long.weight holds a factor that is not finite and > 0"),
            std::string::npos);
  EXPECT_NE(config_error([](gguf::Writer& w) {
              longrope(64)(w);
              w.set_f32("phi3.rope.scaling.attn_factor", NAN);
            }).find("phi3.rope.scaling.attn_factor"),
            std::string::npos);
}

// The last position's logits of the oracle's tokens (100, so positions past the original context of 64), with an
// F16 KV cache as llama.cpp's, within 0.5% of the logit range (every 8th logit of the 32,064, as the oracles keep);
// the other factor set, or none, is far outside it.
TEST(RopeLongrope, MatchesLlamaCpp) {
  const std::string long_path = copy_with("long", longrope(64));
  if (long_path.empty()) GTEST_FAIL() << "needs ../shared/models/synth-phi3-d256-f16.gguf";
  const std::string short_path = copy_with("short", longrope(8192));
  ThreadPool pool(2);
  for (const char* which : {"long", "short"}) {
    const std::string name = std::string("synth-phi3-d256-f16-longrope-") + which + ".json";
    std::ifstream in(std::filesystem::path(PREFACE_SOURCE_DIR) / "tests/model/data" / name);
    ASSERT_TRUE(in) << "tests/model/data/" << name;
    const auto oracle = nlohmann::json::parse(in);
    const auto tokens = oracle.at("tokens").get<std::vector<int32_t>>();
    const auto expected = oracle.at("logits").get<std::vector<float>>();  // ids 0, stride, 2 stride, ...
    const auto stride = oracle.at("stride").get<size_t>();
    const auto sampled = [&](const std::vector<float>& all) {
      std::vector<float> s;
      for (size_t i = 0; i < all.size(); i += stride) s.push_back(all[i]);
      return s;
    };
    const auto max_diff = [&](const std::vector<float>& got) {
      float d = 0.0f;
      for (size_t i = 0; i < expected.size(); ++i) d = std::max(d, std::fabs(got[i] - expected[i]));
      return d;
    };
    const auto [lo, hi] = std::minmax_element(expected.begin(), expected.end());
    const float range = *hi - *lo;
    const bool is_long = std::string(which) == "long";
    const auto last_logits = [&](const std::string& path) {
      return sampled(last_position_logits(path, tokens, pool));
    };
    const std::vector<float> got = last_logits(is_long ? long_path : short_path);
    const std::vector<float> other = last_logits(is_long ? short_path : long_path);
    const std::vector<float> plain = last_logits(shared_file("models/synth-phi3-d256-f16.gguf").string());
    ASSERT_EQ(got.size(), expected.size());
    std::printf("[longrope %s] %zu tokens  range %.3f  max|diff| %.5f  other set %.5f  none %.5f\n", which,
                tokens.size(), range, max_diff(got), max_diff(other), max_diff(plain));
    EXPECT_LE(max_diff(got), 0.005f * range) << which;
    EXPECT_GT(max_diff(other), 0.05f * range) << which;
    EXPECT_GT(max_diff(plain), 0.05f * range) << which;
    EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
              std::max_element(expected.begin(), expected.end()) - expected.begin())
        << which;
  }
}

}  // namespace
}  // namespace preface::test
