// KV types through the binary: `run` with block types (on stories260K too, whose heads share blocks), rotation
// refused clearly where heads are too small, llama.cpp's -ctk/-ctv, and `preface kv` reporting
// 2 x layers x kv_heads x head_dim x 34/32 bytes per token for q8_0 and each side's bytes for a K/V pair.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "gguf/reader.h"
#include "model/base/config.h"
#include "model/synth_kv_models.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

// stories260K's heads are 8 values: its rows (4 KV heads) are one 32-value block, which the block types store;
// rotation needs heads of multiples of 64 and is a clear error when asked for (auto leaves it off).
TEST(CliKvQ8_0, HeadsInsideBlocksRunAndRotationIsRefusedClearly) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  const CliResult ok = run_preface({"run", "-m", model.string(), "-n", "4", "--kv-type", "q4_0", "--threads", "1"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.err.find("kv q4_0"), std::string::npos) << ok.err;
  const CliResult r = run_preface(
      {"run", "-m", model.string(), "-n", "4", "--kv-type", "q8_0", "--kv-rotate", "on", "--threads", "1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("multiple of 64"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// llama.cpp's spellings: -ctk / -ctv (and --cache-type-k / -v) set the two sides; the calculator sizes each.
TEST(CliKvQ8_0, SeparateKAndVTypesInTheCalculator) {
  const std::string model = q8_0_kv_model_path("llama-h64-gqa-q8_0");
  if (model.empty()) return;
  const model::Config c = model::read_config(gguf::File::open(model));
  const uint64_t row = static_cast<uint64_t>(c.n_kv_heads) * static_cast<uint64_t>(c.head_dim);
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"-ctk", "q8_0", "-ctv", "q4_0"},
                                                std::vector<std::string>{"--cache-type-k", "q8_0", "--kv-type-v", "q4_0"}}) {
    std::vector<std::string> args = {"kv", "-m", model, "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult r = run_preface(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["kv_type"], "q8_0/q4_0+r");  // head 64: auto rotates both block-type sides
    EXPECT_EQ(j["kv_type_k"], "q8_0");
    EXPECT_EQ(j["kv_type_v"], "q4_0");
    EXPECT_EQ(j["kv_bytes_per_token"].get<uint64_t>(), c.n_layers * (row / 32 * 34 + row / 32 * 18));
  }
}

TEST(CliKvQ8_0, RunGeneratesWithQ8_0Kv) {
  const std::string model = q8_0_kv_model_path("synth-gpt2-d128-q8_0-tied.gguf");  // head_dim 32
  if (model.empty()) return;
  const CliResult r = run_preface({"run", "-m", model, "-n", "12", "--temp", "0", "--kv-type", "q8_0",
                                "--threads", "1", "-p", "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kv q8_0"), std::string::npos) << r.err;
}

// Whole-model logits with q8_0 KV are the same bits on every non-scalar kernel path and at 1 or 2 threads:
// `eval` prints every last logit with round-trip precision, so equal output means equal bits. The prompt spans
// two attention chunks (32 positions).
TEST(CliKvQ8_0, EvalIdenticalOnEveryNonScalarPathAndThreadCount) {
  const std::string prompt =
      "Once upon a time there was a little dog who liked to run in the park. Every morning he ran to the big tree "
      "by the pond, barked at the ducks, and then went home to sleep in the sun until his friend came to play.";
  for (const std::string& name : {std::string("synth-gpt2-d128-q8_0-tied.gguf"), std::string("llama-h64-gqa-q8_0")}) {
    const std::string model = q8_0_kv_model_path(name);
    if (model.empty()) return;
    std::string reference;
    for (const char* path : {"", "avx2", "vnni"}) {
      for (const char* threads : {"1", "2"}) {
        const std::string env = *path != '\0' ? std::string("env PREFACE_KERNELS=") + path : "env -u PREFACE_KERNELS";
        const CliResult r = run_preface(
            {"eval", "-m", model, "--kv-type", "q8_0", "--threads", threads, "-n", "6", "-p", prompt}, env);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        ASSERT_NE(r.out.find("last_logits"), std::string::npos) << r.out;
        ASSERT_GT(nlohmann::json::parse(r.out)["tokens"].size(), 40u);
        if (reference.empty()) reference = r.out;
        EXPECT_EQ(r.out, reference) << name << " path '" << path << "' threads " << threads;
      }
    }
    // The f16-KV output differs: the type really reaches the storage.
    const CliResult f16 =
        run_preface({"eval", "-m", model, "--kv-type", "f16", "--threads", "1", "-n", "6", "-p", prompt});
    ASSERT_EQ(f16.exit_code, 0) << f16.err;
    EXPECT_NE(f16.out, reference) << name;
  }
}

TEST(CliKvQ8_0, KvCalculatorBytesPerToken) {
  for (const std::string& name : q8_0_kv_model_names()) {
    const std::string model = q8_0_kv_model_path(name);
    if (model.empty()) return;
    const model::Config c = model::read_config(gguf::File::open(model));
    ASSERT_EQ(c.head_dim % 32, 0) << name;
    const CliResult r = run_preface({"kv", "-m", model, "--kv-type", "q8_0", "--kv-rotate", "off", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["kv_type"], "q8_0");
    EXPECT_EQ(j["bytes_per_token"]["q8_0"].get<uint64_t>(),
              2ull * c.n_layers * c.n_kv_heads * static_cast<uint64_t>(c.head_dim) * 34 / 32)
        << name;
  }
}

}  // namespace
}  // namespace preface::test
