// Whole-model logits are the same bits on every non-scalar kernel path (PREFACE_KERNELS: the default, which on a
// CPU with AMX and AVX-512 runs the AMX GEMM and the AVX-512 decode GEMV; avx512; vnni; avx2) and at 1 or 2
// threads, for each quantized weight type (the K-quants, IQ4_XS, Q4_1 and Q5_0 included) and for gemma2. `eval
// --logits-digest` hashes the bits of every logit of the prompt (a batched prefill) and of each greedy step
// (one-token decode), so equal output means equal bits on both.
// Paths the CPU lacks fall back to narrower ones (then the comparison is trivially true for them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

TEST(CliKernelPaths, EvalIdenticalOnEveryNonScalarPathAndThreadCount) {
  const std::string prompt =
      "Once upon a time there was a little dog who liked to run in the park. Every morning he ran to the big tree "
      "by the pond, barked at the ducks, and then went home to sleep in the sun.";
  // gemma2: windowed, soft-capped attention tiles, GeGLU and the final soft-cap on every path. Q4_K_M (Q4_K and
  // Q6_K tensors), Q5_K_M, Q3_K_M, Q2_K and IQ4_XS: the AVX2 K-quant tiles and, with AVX-512, the packed row-group
  // kernels. Q4_1 and Q5_0: the 32-value block tiles (the AVX-512 token-lane tiles for the prompt).
  for (const char* name : {"models/synth-spm-d128-q4_0.gguf", "models/synth-spm-d128-q8_0.gguf",
                           "models/synth-gemma2-d128-f16.gguf", "models/synth-llama-d256-q4_k_m.gguf",
                           "models/synth-llama-d256-q5_k_m.gguf", "models/synth-llama-d256-iq4_xs.gguf",
                           "models/synth-llama-d256-q4_1.gguf", "models/synth-llama-d256-q5_0.gguf",
                           "models/synth-llama-d256-q3_k_m.gguf", "models/synth-llama-d256-q2_k.gguf"}) {
    const auto model = shared_file(name);
    ASSERT_FALSE(model.empty()) << name << " not found: this test needs ../shared (see ../shared/README.md)";
    std::string reference;
    for (const char* path : {"", "avx512", "vnni", "avx2"}) {
      for (const char* threads : {"1", "2"}) {
        const std::string env = *path != '\0' ? std::string("env PREFACE_KERNELS=") + path : "env -u PREFACE_KERNELS";
        const CliResult r = run_preface(
            {"eval", "-m", model.string(), "--threads", threads, "-n", "8", "--logits-digest", "-p", prompt}, env);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const auto j = nlohmann::json::parse(r.out);
        ASSERT_GT(j["tokens"].size(), 30u);
        ASSERT_EQ(j["greedy"].size(), 8u);
        ASSERT_EQ(j["logits_sha256"].get<std::string>().size(), 64u);
        if (reference.empty()) reference = r.out;
        EXPECT_EQ(r.out, reference) << name << " path '" << path << "' threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace preface::test
