// The pre-tokenizer regex sequences on hand-checked inputs, including the types the shared test vectors do
// not cover (llama3, qwen2) and llama.cpp's conventions for non-ASCII whitespace and malformed UTF-8.
#include <gtest/gtest.h>

#include "tokenizer/pretokenizer.h"
#include "util/error.h"

namespace preface::tok {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const std::string& pre, const std::string& text) {
  const RegexSplitter splitter(pre_tokenizer_spec(pre).regexes);
  return splitter.split(text);
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world's  end"), (Pieces{"Hello", " world", "'s", " ", " end"}));
  EXPECT_EQ(split("gpt-2", "I'M 2024!!"), (Pieces{"I", "'", "M", " 2024", "!!"}));  // contractions are lowercase only
  EXPECT_EQ(split("gpt-2", "a \n\n b  "), (Pieces{"a", " \n\n", " b", "  "}));
  EXPECT_EQ(split("gpt-2", ""), Pieces{});
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(split("llama-bpe", "Hello world 12345"), (Pieces{"Hello", " world", " ", "123", "45"}));
  EXPECT_EQ(split("llama-bpe", "I'M here"), (Pieces{"I", "'M", " here"}));
  EXPECT_EQ(split("llama-bpe", "a\n\n b...\n"), (Pieces{"a", "\n\n", " b", "...\n"}));
  EXPECT_TRUE(pre_tokenizer_spec("llama3").ignore_merges);
  EXPECT_TRUE(pre_tokenizer_spec("llama3").add_bos);
}

TEST(PreTokenizer, Qwen2SplitsDigitsSingly) {
  EXPECT_EQ(split("qwen2", "x 123"), (Pieces{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, RegexesApplyInSequence) {
  // falcon: punctuation first, then GPT-2's regex, then groups of three ASCII digits inside what is left.
  EXPECT_EQ(split("falcon", "a+b 1234"), (Pieces{"a", "+", "b", " ", "123", "4"}));
  // starcoder: every digit alone, then GPT-2's regex.
  EXPECT_EQ(split("starcoder", "v 42"), (Pieces{"v", " ", "4", "2"}));
  // deepseek-llm: cased letters, CJK and numbers are separate pieces.
  EXPECT_EQ(split("deepseek-llm", "Hello\xE4\xB8\x96\xE7\x95\x8C" "123"),
            (Pieces{"Hello", "\xE4\xB8\x96\xE7\x95\x8C", "123"}));
  // The letter class holds U+212A KELVIN SIGN itself, not the range 'K'..U+212D that its normalized form
  // would give: '_' and Arabic letters are not in it.
  EXPECT_EQ(split("deepseek-llm", "a_b"), (Pieces{"a", "_", "b"}));
  EXPECT_EQ(split("deepseek-llm", "a\xD8\xA7"), (Pieces{"a", "\xD8\xA7"}));
}

TEST(PreTokenizer, UnicodeConventions) {
  // U+3000 IDEOGRAPHIC SPACE is whitespace and comes back unchanged.
  EXPECT_EQ(split("gpt-2", "a\xE3\x80\x80" "b"), (Pieces{"a", "\xE3\x80\x80", "b"}));
  // Malformed bytes become U+FFFD, as in llama.cpp.
  EXPECT_EQ(split("gpt-2", "a\xFF" "b"), (Pieces{"a", "\xEF\xBF\xBD", "b"}));
  // A truncated sequence at the end.
  EXPECT_EQ(split("gpt-2", "ab\xE4\xB8"), (Pieces{"ab", "\xEF\xBF\xBD\xEF\xBF\xBD"}));
}

TEST(PreTokenizer, UnknownTypeIsAnError) {
  EXPECT_THROW(pre_tokenizer_spec("definitely-not-a-pre"), Error);
  EXPECT_EQ(pre_tokenizer_spec("").type, "default");  // absent key: llama.cpp's default
  EXPECT_THROW(RegexSplitter({"(unclosed"}), Error);
}

}  // namespace
}  // namespace preface::tok
