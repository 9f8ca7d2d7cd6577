// --kv-type q8_0 through the binary: `run` works on a model whose head_dim is a multiple of 32 and is a clear
// error (non-zero exit, the head size named) on stories260K (head_dim 8); `preface kv` reports
// 2 x layers x kv_heads x head_dim x 34/32 bytes per token for such models.
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

TEST(CliKvQ8_0, RunRefusesAHeadDimThatIsNotAMultipleOf32) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  const CliResult r = run_preface({"run", "-m", model.string(), "-n", "4", "--kv-type", "q8_0", "--threads", "1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("head_dim is 8"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("q8_0"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
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
    const CliResult r = run_preface({"kv", "-m", model, "--kv-type", "q8_0", "--json"});
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
