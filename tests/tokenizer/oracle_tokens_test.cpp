// llama.cpp's prompt tokenization for the shared models (../shared/oracle/<model>.jsonl): each prompt, with
// BOS added where the vocab says so and special tokens not parsed, must give exactly the recorded `tokens`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tok_test_util.h"

namespace preface::test {
namespace {

class OracleTokens : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleTokens, PromptsTokenizeLikeLlamaCpp) {
  const auto tok = load_shared_tokenizer("models/" + GetParam() + ".gguf");
  ASSERT_NE(tok, nullptr);
  const auto path = shared_file("oracle/" + GetParam() + ".jsonl");
  ASSERT_FALSE(path.empty());
  std::istringstream lines(read_file_bytes(path));
  size_t n_prompts = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const auto rec = nlohmann::json::parse(line);
    const std::string prompt = rec.at("prompt").get<std::string>();
    const std::vector<int32_t> want = rec.at("tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(prompt, tok->add_bos_default()), want) << "prompt: '" << prompt << "'";
    EXPECT_EQ(tok->decode(want), prompt) << "prompt: '" << prompt << "'";
    ++n_prompts;
  }
  EXPECT_GE(n_prompts, 1u);
}

INSTANTIATE_TEST_SUITE_P(Model, OracleTokens,
                         ::testing::Values("stories260K", "synth-spm-d128-f16", "synth-spm-d128-q8_0",
                                           "synth-spm-d128-q4_0", "synth-gpt2-d128-q8_0-tied",
                                           "synth-qwen2-d128-bf16"),
                         [](const auto& info) { return param_name(info.param); });

// The published greedy continuation of stories260K decodes (after BOS) to the published text.
TEST(OracleTokens, Stories260kGreedyTextDecodes) {
  const auto tok = load_shared_tokenizer("models/stories260K.gguf");
  ASSERT_NE(tok, nullptr);
  const auto ids_path = shared_file("oracle/stories260K.greedy-from-bos-256.ids");
  const auto txt_path = shared_file("oracle/stories260K.greedy-from-bos-256.txt");
  ASSERT_FALSE(ids_path.empty());
  ASSERT_FALSE(txt_path.empty());
  std::vector<int32_t> ids{tok->bos_id()};
  std::istringstream in(read_file_bytes(ids_path));
  for (int32_t id; in >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 257u);
  std::string want = read_file_bytes(txt_path);
  std::string got = tok->decode(ids);
  // The text file may end with a newline that is not part of the tokens.
  while (!want.empty() && want.back() == '\n' && (got.empty() || got.back() != '\n')) want.pop_back();
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace preface::test
