// harmony replies split token by token (server/api/reply_channels.h): analysis is reasoning, final and commentary
// are content, control tokens, headers and role names between messages are framing; a reply without channels is
// all content; a vocabulary without harmony's tokens has none to split by.
#include "server/api/reply_channels.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace preface::server {
namespace {

// A vocabulary of whole words: encode() knows only single pieces (what find_tokens asks for).
class WordTokenizer : public Tokenizer {
 public:
  explicit WordTokenizer(std::vector<std::string> pieces, size_t n_control) : n_control_(n_control) {
    pieces_ = std::move(pieces);
    attrs_.resize(pieces_.size());
  }
  std::vector<int32_t> encode(std::string_view text, bool, bool parse_special,
                              std::span<const TextSpan>) const override {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (pieces_[i] == text && (parse_special || i >= n_control_)) return {static_cast<int32_t>(i)};
    }
    return std::vector<int32_t>(text.size(), 0);  // several "tokens": not one piece
  }
  std::string token_to_bytes(int32_t id) const override {
    return static_cast<size_t>(id) < n_control_ ? std::string() : pieces_.at(static_cast<size_t>(id));
  }
  int32_t id(std::string_view piece) const {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (pieces_[i] == piece) return static_cast<int32_t>(i);
    }
    ADD_FAILURE() << "no piece " << piece;
    return -1;
  }

 private:
  size_t n_control_;
};

WordTokenizer harmony_vocab() {
  return WordTokenizer({"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>",
                        "<|return|>", "analysis", "final", "commentary", " to=functions.get_weather", "json",
                        "assistant", "Think", "ing", "The", " answer", "{}", "Hi", "anal", "ysis"},
                       7);
}

// Routes of a token sequence given as pieces: C content, R reasoning, K call arguments, F framing; then, after a
// '|', each call's function.
std::string routes(const WordTokenizer& tok, const std::vector<std::string>& pieces) {
  const auto ids = HarmonyChannels::find_tokens(tok);
  EXPECT_TRUE(ids.has_value());
  HarmonyChannels channels(tok, *ids);
  std::string out, names;
  for (const std::string& p : pieces) {
    const int32_t n_calls = channels.n_calls();
    const ReplyRoute r = channels.route(tok.id(p));
    out += r == ReplyRoute::Content ? 'C' : r == ReplyRoute::Reasoning ? 'R' : r == ReplyRoute::Call ? 'K' : 'F';
    if (channels.n_calls() != n_calls) names += "|" + channels.call_name();
  }
  return out + names;
}

TEST(HarmonyChannels, AnalysisIsReasoningFinalIsContentTheRestIsFraming) {
  const WordTokenizer tok = harmony_vocab();
  EXPECT_EQ(routes(tok, {"<|channel|>", "analysis", "<|message|>", "Think", "ing", "<|end|>", "<|start|>",
                         "assistant", "<|channel|>", "final", "<|message|>", "The", " answer", "<|return|>"}),
            "FFFRRFFFFFFCCF");
  // The channel's name split across tokens reads the same.
  EXPECT_EQ(routes(tok, {"<|channel|>", "anal", "ysis", "<|message|>", "Think"}), "FFFFR");
}

TEST(HarmonyChannels, MessagesToARecipientAreCallsCommentaryIsContent) {
  const WordTokenizer tok = harmony_vocab();
  EXPECT_EQ(routes(tok, {"<|channel|>", "commentary", " to=functions.get_weather", "<|constrain|>", "json",
                         "<|message|>", "{}", "<|call|>"}),
            "FFFFFFKF|get_weather");
  // The recipient after the role, before the channel.
  EXPECT_EQ(routes(tok, {"<|channel|>", "analysis", "<|message|>", "Think", "<|end|>", "<|start|>", "assistant",
                         " to=functions.get_weather", "<|channel|>", "commentary", "<|message|>", "{}", "<|call|>"}),
            "FFFRFFFFFFFKF|get_weather");
  EXPECT_EQ(routes(tok, {"<|channel|>", "commentary", "<|message|>", "Hi"}), "FFFC");
  EXPECT_EQ(routes(tok, {"Hi", "The", " answer"}), "CCC");
  // Text after a message ends and before the next header is framing (role names, recipients).
  EXPECT_EQ(routes(tok, {"<|channel|>", "final", "<|message|>", "Hi", "<|end|>", "Hi", "<|channel|>", "analysis",
                         "<|message|>", "Hi"}),
            "FFFCFFFFFR");
}

TEST(HarmonyChannels, VocabulariesWithoutHarmonyTokensHaveNone) {
  const WordTokenizer plain({"<s>", "Hi"}, 1);
  EXPECT_FALSE(HarmonyChannels::find_tokens(plain).has_value());
  EXPECT_TRUE(template_is_harmony("{{- '<|start|>assistant<|channel|>final<|message|>' }}"));
  EXPECT_FALSE(template_is_harmony("{{- '<|im_start|>assistant' }}"));
}

}  // namespace
}  // namespace preface::server
