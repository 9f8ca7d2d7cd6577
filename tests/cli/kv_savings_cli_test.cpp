// `preface kv --prefix N`: beside the bytes a cached prefix holds and the FLOPs a hit saves, the seconds of prefill
// a hit saves, at a given rate or one measured by loading the model (-m).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

TEST(CliKvSavings, GivenRateDividesThePrefix) {
  const CliResult r = run_preface({"kv", "--shape", "llama3-8b", "--prefix", "4096", "--prefill-rate", "1024",
                                   "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["prefix"]["prefill_seconds"].get<double>(), 4.0);
  EXPECT_EQ(j["prefix"]["prefill_rate_source"], "given");
  EXPECT_DOUBLE_EQ(j["prefix"]["prefill_flops"].get<double>(), 2.0 * j["shape"]["n_params"].get<double>() * 4096);
}

TEST(CliKvSavings, ModelRateIsMeasured) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  const CliResult r = run_preface({"kv", "-m", model.string(), "--prefix", "64", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["prefix"]["prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_NEAR(j["prefix"]["prefill_seconds"].get<double>() * j["prefix"]["prefill_tokens_per_s"].get<double>(), 64,
              1e-6);
  EXPECT_NE(j["prefix"]["prefill_rate_source"].get<std::string>().find("measured"), std::string::npos);

  const CliResult text = run_preface({"kv", "-m", model.string(), "--prefix", "64", "--threads", "1"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("s of prefill at"), std::string::npos) << text.out;

  const CliResult none = run_preface({"kv", "-m", model.string(), "--prefix", "64", "--no-measure", "--json"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_FALSE(nlohmann::json::parse(none.out)["prefix"].contains("prefill_seconds"));
}

}  // namespace
}  // namespace preface::test
