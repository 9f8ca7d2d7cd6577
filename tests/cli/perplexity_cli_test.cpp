// `preface perplexity`: the base format against itself is the same logits (KL 0, equal perplexities); q8_0 KV moves
// them a little (KL above 0, well below what q4_0 keys cost on stories260K, whose heads of 8 share blocks); the
// bytes per token are the calculator's; a missing file is a clear error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_harness.h"
#include "support/shared_data.h"

namespace preface::test {
namespace {

nlohmann::json measure(const std::string& model, const std::string& text, std::initializer_list<std::string> kv) {
  std::vector<std::string> args = {"perplexity", "-m", model, "-f", text, "--ctx", "128", "--max-windows", "3",
                                   "--threads", "2", "--json"};
  args.insert(args.end(), kv.begin(), kv.end());
  const CliResult r = run_preface(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(CliPerplexity, BaseAgainstItselfAndQuantizedKv) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  const std::string text = std::string(PREFACE_SOURCE_DIR) + "/bench/data/kv_story.txt";
  const auto same = measure(model.string(), text, {"--kv-type", "f16"});
  ASSERT_TRUE(same.contains("kl_divergence"));
  EXPECT_EQ(same["kl_divergence"].get<double>(), 0.0);
  EXPECT_EQ(same["perplexity"].get<double>(), same["base_perplexity"].get<double>());
  EXPECT_EQ(same["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(same["positions"].get<int>(), 3 * 126);
  EXPECT_LT(same["perplexity"].get<double>(), 10.0) << "stories260K reads its own kind of text well";

  const auto q8 = measure(model.string(), text, {"--kv-type", "q8_0"});
  const auto q4 = measure(model.string(), text, {"-ctk", "q4_0", "-ctv", "q4_0"});
  ASSERT_TRUE(q8.contains("kl_divergence") && q4.contains("kl_divergence"));
  EXPECT_EQ(q8["kv"], "q8_0");
  EXPECT_EQ(q8["kv_bytes_per_token"].get<int>(), 5 * 2 * 34);  // 5 layers, K and V rows of one block
  EXPECT_EQ(q8["base_kv_bytes_per_token"].get<int>(), 5 * 2 * 32 * 2);
  EXPECT_GT(q8["kl_divergence"].get<double>(), 0.0);
  EXPECT_LT(q8["kl_divergence"].get<double>(), 0.05);
  EXPECT_GT(q8["top1_agreement"].get<double>(), 0.9);
  EXPECT_GT(q4["kl_divergence"].get<double>(), q8["kl_divergence"].get<double>());
}

TEST(CliPerplexity, MissingFileIsAClearError) {
  const auto model = shared_file("models/stories260K.gguf");
  if (model.empty()) return;
  const CliResult r = run_preface({"perplexity", "-m", model.string(), "-f", "/nonexistent/text.txt"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot read /nonexistent/text.txt"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace preface::test
