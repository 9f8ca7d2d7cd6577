// YaRN RoPE scaling (rope.scaling.type yarn): the settings read from a file, their place in the cache namespace's
// RoPE description, the refusals, and the logits of a YaRN copy of ../shared's synth-llama-d256-f16 (factor 4,
// original context 64, so the ramp and the magnitude scale change every position) against llama.cpp's
// (tests/model/data/synth-llama-d256-f16-yarn.json, whose "source" says how it was made). ../shared has no YaRN
// file: the copy is written here, from the shared file plus the three keys, the way the oracle's was.
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

std::string copy_with(const std::string& name, const std::function<void(gguf::Writer&)>& extra) {
  return shared_model_copy("synth-llama-d256-f16.gguf", "yarn-" + name, extra);
}

void yarn_keys(gguf::Writer& w) {
  w.set_string("llama.rope.scaling.type", "yarn");
  w.set_f32("llama.rope.scaling.factor", 4.0f);
  w.set_u32("llama.rope.scaling.original_context_length", 64);
}

std::string config_error(const std::function<void(gguf::Writer&)>& extra) {
  const std::string path = copy_with("bad", extra);
  try {
    model::read_config(gguf::File::open(path));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RopeYarn, SettingsAreReadAndDescribed) {
  const std::string yarn = copy_with("yarn", yarn_keys);
  if (yarn.empty()) GTEST_FAIL() << "needs ../shared/models/synth-llama-d256-f16.gguf";
  const model::Config c = model::read_config(gguf::File::open(yarn));
  EXPECT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.rope_yarn.ext_factor, 1.0f);
  EXPECT_EQ(c.rope_yarn.attn_factor, 1.0f);
  EXPECT_EQ(c.rope_yarn.beta_fast, 32.0f);
  EXPECT_EQ(c.rope_yarn.beta_slow, 1.0f);
  EXPECT_EQ(c.rope_yarn.n_ctx_orig, 64);

  // The same factor as linear scaling rotates differently, so it is another namespace; so is any YaRN setting.
  const model::Config linear = model::read_config(gguf::File::open(copy_with("linear", [](gguf::Writer& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
  })));
  EXPECT_FALSE(linear.rope_yarn.active());
  EXPECT_EQ(linear.rope_freq_scale, 0.25f);
  EXPECT_NE(model::rope_description(c), model::rope_description(linear));
  model::Config other = c;
  other.rope_yarn.n_ctx_orig = 128;
  EXPECT_NE(model::rope_description(c), model::rope_description(other));
  other = c;
  other.rope_yarn.beta_fast = 16.0f;
  EXPECT_NE(model::rope_description(c), model::rope_description(other));

  // Optional keys: the original context defaults to context_length; the others are read when present.
  const model::Config tuned = model::read_config(gguf::File::open(copy_with("tuned", [](gguf::Writer& w) {
    w.set_string("llama.rope.scaling.type", "yarn");
    w.set_f32("llama.rope.scaling.factor", 2.0f);
    w.set_f32("llama.rope.scaling.attn_factor", 0.5f);
    w.set_f32("llama.rope.scaling.yarn_beta_fast", 16.0f);
    w.set_f32("llama.rope.scaling.yarn_beta_slow", 2.0f);
  })));
  EXPECT_EQ(tuned.rope_yarn.n_ctx_orig, tuned.ctx_len);
  EXPECT_EQ(tuned.rope_yarn.attn_factor, 0.5f);
  EXPECT_EQ(tuned.rope_yarn.beta_fast, 16.0f);
  EXPECT_EQ(tuned.rope_yarn.beta_slow, 2.0f);
}

TEST(RopeYarn, BadSettingsAreRefusedByName) {
  if (shared_file("models/synth-llama-d256-f16.gguf").empty()) GTEST_FAIL() << "needs ../shared";
  EXPECT_NE(config_error([](gguf::Writer& w) { w.set_string("llama.rope.scaling.type", "yarn"); })
                .find("llama.rope.scaling.type is yarn but llama.rope.scaling.factor is missing"),
            std::string::npos);
  EXPECT_NE(config_error([](gguf::Writer& w) {
              yarn_keys(w);
              w.set_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f);
            }).find("yarn_log_multiplier"),
            std::string::npos);
  EXPECT_NE(config_error([](gguf::Writer& w) {
              yarn_keys(w);
              w.set_f32("llama.rope.scaling.yarn_beta_fast", NAN);
            }).find("llama.rope.scaling.yarn_beta_fast"),
            std::string::npos);
  EXPECT_NE(config_error([](gguf::Writer& w) {
              w.set_string("llama.rope.scaling.type", "yarn");
              w.set_f32("llama.rope.scaling.factor", 4.0f);
              w.set_u32("llama.rope.scaling.original_context_length", 0);
            }).find("original_context_length"),
            std::string::npos);
  EXPECT_NE(config_error([](gguf::Writer& w) { w.set_string("llama.rope.scaling.type", "dynamic"); })
                .find("unsupported rope scaling type 'dynamic' (preface runs none, linear, yarn and longrope)"),
            std::string::npos);
  EXPECT_NE(config_error([](gguf::Writer& w) { w.set_string("llama.rope.scaling.type", "longrope"); })
                .find("longrope but the file has no rope_factors_long.weight"),
            std::string::npos);
}

// The last position's logits of the oracle's tokens, with an F16 KV cache as llama.cpp's, within 0.5% of the
// logit range (the shared F16 files land within 0.15%); without YaRN (linear scaling of the same factor) they are
// far outside it, so the check tells YaRN's ramp and magnitude scale apart from plain interpolation.
TEST(RopeYarn, MatchesLlamaCpp) {
  const std::string yarn = copy_with("yarn", yarn_keys);
  if (yarn.empty()) GTEST_FAIL() << "needs ../shared/models/synth-llama-d256-f16.gguf";
  std::ifstream in(std::filesystem::path(PREFACE_SOURCE_DIR) / "tests/model/data/synth-llama-d256-f16-yarn.json");
  ASSERT_TRUE(in) << "tests/model/data/synth-llama-d256-f16-yarn.json";
  const auto oracle = nlohmann::json::parse(in);
  const auto tokens = oracle.at("tokens").get<std::vector<int32_t>>();
  const auto expected = oracle.at("logits").get<std::vector<float>>();
  ThreadPool pool(2);

  const auto last_logits = [&](const std::string& path) { return last_position_logits(path, tokens, pool); };
  const auto max_diff = [&](const std::vector<float>& got) {
    float d = 0.0f;
    for (size_t i = 0; i < expected.size(); ++i) d = std::max(d, std::fabs(got[i] - expected[i]));
    return d;
  };
  const auto [lo, hi] = std::minmax_element(expected.begin(), expected.end());
  const float range = *hi - *lo;
  const std::vector<float> got = last_logits(yarn);
  ASSERT_EQ(got.size(), expected.size());
  const std::vector<float> linear = last_logits(copy_with("linear4", [](gguf::Writer& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
  }));
  std::printf("[yarn] %zu tokens  range %.3f  max|diff| yarn %.5f  linear %.5f\n", tokens.size(), range,
              max_diff(got), max_diff(linear));
  EXPECT_LE(max_diff(got), 0.005f * range);
  EXPECT_GT(max_diff(linear), 0.05f * range);
  EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
            std::max_element(expected.begin(), expected.end()) - expected.begin());
}

}  // namespace
}  // namespace preface::test
