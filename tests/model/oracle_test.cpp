// Agreement with llama.cpp (../shared/oracle/<model>.jsonl, computed with an F16 KV cache): token ids, argmax at
// every prompt position and the last position's logits. Prints the achieved differences, also with an F32 cache.
// Covers every weight type preface computes: F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q2_K..Q6_K (Q4_K_M, Q5_K_M, Q3_K_M
// mix them) and IQ4_XS.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "model_harness.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace preface::test {
namespace {

struct OracleCase {
  std::string prompt;
  std::vector<int32_t> tokens, argmax, greedy;
  std::vector<float> last_logits;
};

std::vector<OracleCase> read_oracle(const std::filesystem::path& path) {
  std::vector<OracleCase> cases;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    cases.push_back({j.at("prompt").get<std::string>(), j.at("tokens").get<std::vector<int32_t>>(),
                     j.at("argmax").get<std::vector<int32_t>>(), j.at("greedy").get<std::vector<int32_t>>(),
                     j.at("last_logits").get<std::vector<float>>()});
  }
  return cases;
}

int32_t argmax(const float* x, size_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

// All logits of `tokens` fed as one sequence through a KV cache of `kv_type`, [n][n_vocab].
std::vector<float> prompt_logits(model::Model& m, ThreadPool& pool, kernels::KvType kv_type,
                                 const std::vector<int32_t>& tokens) {
  constexpr int32_t kBlockSize = 16;
  const int32_t n_blocks = static_cast<int32_t>((tokens.size() + kBlockSize - 1) / kBlockSize);
  TestKv kv(m.memory(), kv_type, kBlockSize, n_blocks);
  const std::vector<int32_t> table = reversed_blocks(n_blocks);
  return run_chunked(m, pool, kv.view, table, tokens, tokens.size());
}

class Oracle : public ::testing::TestWithParam<std::string> {};

TEST_P(Oracle, MatchesLlamaCpp) {
  const std::string path = GetParam(), name = path.substr(path.rfind('/') + 1);  // models/<path>, oracle/<name>
  const auto model_path = shared_file("models/" + path + ".gguf");
  const auto oracle_path = shared_file("oracle/" + name + ".jsonl");
  if (model_path.empty() || oracle_path.empty()) return;
  const bool trained = name == "stories260K";
  auto m = model::Model::load(model_path.string(), 128);
  const auto tok = Tokenizer::from_gguf(m->file());
  const size_t n_vocab = static_cast<size_t>(m->config().n_vocab);
  ThreadPool pool(2);
  const std::vector<OracleCase> cases = read_oracle(oracle_path);
  ASSERT_FALSE(cases.empty());

  int n_compared = 0;
  for (const OracleCase& oc : cases) {
    SCOPED_TRACE("prompt: " + oc.prompt);
    const std::vector<int32_t> tokens = tok->encode(oc.prompt, tok->add_bos_default());
    ASSERT_EQ(tokens, oc.tokens);
    // The phi3 oracle applied phi3.attention.sliding_window (16); preface, as llama.cpp since mid-2025, does not,
    // so only prompts within the window compare.
    if (name == "synth-phi3-d256-f16" && tokens.size() > 16) continue;
    ++n_compared;
    ASSERT_EQ(oc.last_logits.size(), n_vocab);
    const auto [lo, hi] = std::minmax_element(oc.last_logits.begin(), oc.last_logits.end());
    const float range = *hi - *lo;
    // The quantized d256 files: llama.cpp rounds activations to 8-bit blocks before each product, so a float
    // difference far below the weights' precision can flip a rounding; two llama.cpp releases differ by up to 1%
    // of the range on these files (../shared/README.md), and preface lands within 1.8%.
    // The MXFP4 file likewise: llama.cpp's own F16 and F32 KV runs of it differ by up to 1.5% (the shared README).
    const bool quantized_d256 = (name.rfind("synth-llama-d256-", 0) == 0 && name != "synth-llama-d256-f16") ||
                                name.find("mxfp4") != std::string::npos;
    // Float weights (F16, BF16) land within 0.15% of the range; 0.5% still tells a missing RoPE scaling apart.
    const bool float_weights = name.find("-f16") != std::string::npos || name.find("-bf16") != std::string::npos;
    const float tolerance = trained ? 0.05f : (quantized_d256 ? 0.025f : float_weights ? 0.005f : 0.015f) * range;

    float diff[2] = {0.0f, 0.0f};  // max |logit - oracle| at the last position with F16, F32 KV
    int argmax_mismatches = 0;
    for (int k = 0; k < 2; ++k) {
      const std::vector<float> logits =
          prompt_logits(*m, pool, k == 0 ? kernels::KvType::F16 : kernels::KvType::F32, tokens);
      const float* last = logits.data() + (tokens.size() - 1) * n_vocab;
      for (size_t i = 0; i < n_vocab; ++i) diff[k] = std::max(diff[k], std::fabs(last[i] - oc.last_logits[i]));
      if (k != 0) continue;
      for (size_t p = 0; p < tokens.size(); ++p) {
        const int32_t got = argmax(logits.data() + p * n_vocab, n_vocab);
        if (got != oc.argmax[p]) ++argmax_mismatches;
        if (trained) {
          EXPECT_EQ(got, oc.argmax[p]) << "argmax at position " << p;
        }
      }
    }
    std::printf("[oracle] %-28s %2zu tokens  range %7.3f  max|diff| f16-kv %.5f  f32-kv %.5f  (tolerance %.4f)"
                "  argmax mismatches %d/%zu\n",
                name.c_str(), tokens.size(), range, diff[0], diff[1], tolerance, argmax_mismatches,
                tokens.size());
    EXPECT_LE(diff[0], tolerance);
  }
  EXPECT_GT(n_compared, 0);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, Oracle,
                         ::testing::Values("stories260K", "synth-spm-d128-f16", "synth-spm-d128-q8_0",
                                           "synth-spm-d128-q4_0", "synth-gpt2-d128-q8_0-tied",
                                           "synth-qwen2-d128-bf16", "synth-llama-d256-f16",
                                           "synth-llama-d256-q4_k_m", "synth-llama-d256-q5_k_m",
                                           "synth-llama-d256-q6_k", "synth-llama-d256-q3_k_m",
                                           "synth-llama-d256-q2_k", "synth-llama-d256-iq4_xs",
                                           "synth-llama-d256-q4_1", "synth-llama-d256-q5_0",
                                           "synth-llama-rope-linear-d256-f16", "synth-llama-rope-llama3-d256-f16",
                                           "synth-llama-rope-llama3-oc64-d256-f16", "synth-qwen3-d256-f16",
                                           "synth-phi3-d256-f16", "synth-gemma2-d128-f16", "synth-gemma3-d256-f16",
                                           "synth-qwen35-d128-f16", "synth-qwen3moe-d128-f16",
                                           "synth-qwen35moe-d128-f16", "synth-gpt-oss-d128-f16",
                                           "2026/synth-gpt-oss-d128-mxfp4", "synth-gemma4-d128-f16"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

// The 2026 files' long prompts (515-872 tokens: the recurrent states run hundreds of steps), fed in chunks of 100
// tokens so that every state continues across batches. Last-position logits within 0.5% of the range (the shared
// README: a correct implementation lands within about 0.4%), argmax at most 2% of positions off (near-ties); the
// MXFP4 file within 2.5% and 5%.
class LongOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(LongOracle, MatchesLlamaCppInChunks) {
  const std::string path = GetParam(), name = path.substr(path.rfind('/') + 1);  // models/<path>, oracle/<name>
  const auto model_path = shared_file("models/" + path + ".gguf");
  const auto oracle_path = shared_file("oracle/" + name + ".long.jsonl");
  ASSERT_FALSE(model_path.empty() || oracle_path.empty()) << "needs ../shared/models and oracle for " << name;
  auto m = model::Model::load(model_path.string(), 128);
  const auto tok = Tokenizer::from_gguf(m->file());
  const size_t n_vocab = static_cast<size_t>(m->config().n_vocab);
  ThreadPool pool(2);
  for (const OracleCase& oc : read_oracle(oracle_path)) {
    const std::vector<int32_t> tokens = tok->encode(oc.prompt, tok->add_bos_default());
    ASSERT_EQ(tokens, oc.tokens);
    constexpr int32_t kBlockSize = 16;
    const int32_t n_blocks = static_cast<int32_t>((tokens.size() + kBlockSize - 1) / kBlockSize);
    TestKv kv(m->memory(), kernels::KvType::F16, kBlockSize, n_blocks);
    const std::vector<float> logits = run_chunked(*m, pool, kv.view, reversed_blocks(n_blocks), tokens, 100);
    const float* last = logits.data() + (tokens.size() - 1) * n_vocab;
    const auto [lo, hi] = std::minmax_element(oc.last_logits.begin(), oc.last_logits.end());
    float diff = 0.0f;
    for (size_t i = 0; i < n_vocab; ++i) diff = std::max(diff, std::fabs(last[i] - oc.last_logits[i]));
    int mismatches = 0;
    for (size_t p = 0; p < tokens.size(); ++p) mismatches += argmax(logits.data() + p * n_vocab, n_vocab) != oc.argmax[p];
    std::printf("[oracle-long] %-24s %3zu tokens  range %7.3f  max|diff| %.5f  argmax mismatches %d/%zu\n",
                name.c_str(), tokens.size(), *hi - *lo, diff, mismatches, tokens.size());
    // MXFP4: llama.cpp rounds activations to Q8_0 before every MXFP4 and Q8_0 product, as preface does, and its own
    // F16 and F32 KV runs differ by up to 1.6% of the range with 95.5-97% of argmax agreeing (the shared README).
    const bool mxfp4 = name.find("mxfp4") != std::string::npos;
    EXPECT_LE(diff, (mxfp4 ? 0.025f : 0.005f) * (*hi - *lo));
    EXPECT_LE(mismatches, static_cast<int>(tokens.size() / (mxfp4 ? 20 : 50)));
  }
}

INSTANTIATE_TEST_SUITE_P(Models2026, LongOracle,
                         ::testing::Values("synth-qwen35-d128-f16", "synth-qwen3moe-d128-f16",
                                           "synth-qwen35moe-d128-f16", "synth-gpt-oss-d128-f16",
                                           "2026/synth-gpt-oss-d128-mxfp4", "synth-gemma4-d128-f16"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace preface::test
