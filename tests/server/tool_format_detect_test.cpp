// The tool-call row of each real template in ../shared/templates, found from the template's own rendering of a
// call (server/api/tool_format_detect.h); LFM2's template, which never renders a call, by its vocabulary token;
// harmony and templates without tools get none; marker tokens are the vocabulary's control tokens the row uses.
#include "server/api/tool_format_detect.h"

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/shared_data.h"

namespace preface::server {
namespace {

using nlohmann::json;

// Pieces; the first n_control are control tokens.
class PieceTokenizer : public Tokenizer {
 public:
  PieceTokenizer(std::vector<std::string> pieces, size_t n_control) {
    pieces_ = std::move(pieces);
    attrs_.assign(pieces_.size(), TokenAttr::Normal);
    for (size_t i = 0; i < n_control; ++i) attrs_[i] = TokenAttr::Control;
  }
  std::vector<int32_t> encode(std::string_view, bool, bool, std::span<const TextSpan>) const override { return {}; }
  std::string token_to_bytes(int32_t id) const override {
    return attrs_.at(static_cast<size_t>(id)) == TokenAttr::Control ? std::string() : pieces_.at(static_cast<size_t>(id));
  }
};

std::optional<json> template_file(const std::string& file) {
  const auto path = test::shared_file("templates/" + file);
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  return json::parse(in);
}

std::optional<std::string> token(const json& t, const char* key) {
  return t.contains(key) && t[key].is_string() ? std::optional(t[key].get<std::string>()) : std::nullopt;
}

TEST(ToolFormatDetect, EveryToolTemplateGetsItsFamilysRow) {
  const std::pair<const char*, const char*> cases[] = {
      {"2026/GLM-4.6.json", "glm"},
      {"2026/MiniMax-M2.json", "minimax-xml"},
      {"2026/Mistral-Small-3.2-24B-Instruct-2506.json", "mistral-v11"},
      {"2026/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json", "qwen3-xml"},
      {"2026/Qwen3-Coder.json", "qwen3-xml"},
      {"2026/Qwen3.5-4B.json", "qwen3-xml"},
      {"2026/deepseek-ai-DeepSeek-V3.1.json", "deepseek-v3.1"},
      {"2026/deepseek-ai-DeepSeek-V3.2.json", "deepseek-dsml"},
      {"2026/google-gemma-4-31B-it.json", "gemma4"},
      {"2026/ibm-granite-granite-4.0.json", "hermes"},
      {"2026/moonshotai-Kimi-K2.json", "kimi-k2"},
      {"2026/openai-gpt-oss-120b.json", ""},  // harmony: calls come from the reply's channels
      {"NousResearch__Hermes-2-Pro-Llama-3-8B__tool_use.json", "hermes"},
      {"Qwen__QwQ-32B.json", "hermes"},
      {"Qwen__Qwen3-1.7B.json", "hermes"},
      {"Qwen__Qwen3-Coder-30B-A3B-Instruct.json", "qwen3-xml"},
      {"deepseek-ai__DeepSeek-R1.json", "deepseek-r1"},
      {"meta-llama__Llama-3.2-11B-Vision-Instruct.json", "llama3-json"},
      {"meta-llama__Llama-4-Scout-17B-16E-Instruct.json", "llama3-json"},
      {"mistralai__Mistral-7B-Instruct-v0.3__early.json", "mistral-v3"},
      {"mistralai__Mistral-Small-3.1-24B-Instruct-2503.json", "mistral-v3"},
      {"meetkai__functionary-small-v2.5.json", "functionary-v2"},
      {"chatml.json", ""},
      {"google__gemma-3-1b-it.json", ""},
  };
  const PieceTokenizer tok({"<s>", "</s>", "a", "b"}, 2);
  for (const auto& [file, want] : cases) {
    const auto t = template_file(file);
    if (!t) GTEST_SKIP() << "shared test data not found";
    std::unique_ptr<chat::ChatRenderer> renderer;
    try {
      renderer = std::make_unique<chat::ChatRenderer>((*t)["template"].get<std::string>(), token(*t, "bos_token"),
                                                      token(*t, "eos_token"));
    } catch (const std::exception& e) {
      ADD_FAILURE() << file << ": " << e.what();
      continue;
    }
    const ToolCallSetup s = detect_tool_calls(*renderer, tok);
    EXPECT_EQ(s.format == nullptr ? "" : std::string(s.format->id), want) << file << " (" << s.how << ")";
    if (*want != '\0' && s.format != nullptr) {
      EXPECT_EQ(s.how, "rendering") << file;
    }
  }
}

TEST(ToolFormatDetect, ATemplateThatNeverRendersACallIsKnownByItsVocabulary) {
  const auto t = template_file("2026/LFM2.5-Instruct.json");
  if (!t) GTEST_SKIP() << "shared test data not found";
  const chat::ChatRenderer renderer((*t)["template"].get<std::string>(), token(*t, "bos_token"), token(*t, "eos_token"));
  const PieceTokenizer plain({"<s>", "</s>", "a"}, 2);
  EXPECT_EQ(detect_tool_calls(renderer, plain).format, nullptr);
  const PieceTokenizer lfm({"<s>", "</s>", "<|tool_call_start|>", "<|tool_call_end|>", "<|im_end|>", "a"}, 5);
  const ToolCallSetup s = detect_tool_calls(renderer, lfm);
  ASSERT_NE(s.format, nullptr);
  EXPECT_EQ(s.format->id, "lfm2-pythonic");
  EXPECT_EQ(s.how, "vocabulary");
  // The markers' control tokens, and no other.
  EXPECT_EQ(s.marker_tokens, (std::vector<int32_t>{2, 3}));
}

TEST(ToolFormatDetect, MarkerTokensAreTheRowsControlTokens) {
  const auto t = template_file("2026/moonshotai-Kimi-K2.json");
  if (!t) GTEST_SKIP() << "shared test data not found";
  const chat::ChatRenderer renderer((*t)["template"].get<std::string>(), token(*t, "bos_token"), token(*t, "eos_token"));
  const PieceTokenizer tok({"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                            "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|im_end|>", "functions", "."},
                           6);
  const ToolCallSetup s = detect_tool_calls(renderer, tok);
  ASSERT_NE(s.format, nullptr);
  EXPECT_EQ(s.format->id, "kimi-k2");
  EXPECT_EQ(s.marker_tokens, (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace preface::server
