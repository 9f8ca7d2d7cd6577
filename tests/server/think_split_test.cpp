// <think> replies split into reasoning and content (server/api/think_split.h), whatever the chunking.
#include "server/api/think_split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace preface::server {
namespace {

// The whole reply pushed in chunks of `n` bytes, then flushed.
ThinkSplitter::Parts split(const std::string& reply, bool open, size_t n) {
  ThinkSplitter s(open);
  ThinkSplitter::Parts all;
  for (size_t i = 0; i < reply.size(); i += n) {
    const ThinkSplitter::Parts p = s.push(std::string_view(reply).substr(i, n));
    all.reasoning += p.reasoning;
    all.content += p.content;
  }
  const ThinkSplitter::Parts p = s.flush();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}

TEST(ThinkSplitter, SplitsAtTheTagsWhateverTheChunking) {
  struct Case {
    std::string reply;
    bool open;
    std::string reasoning, content;
  };
  const std::vector<Case> cases = {
      {"<think>plan it</think>\n\nThe answer.", false, "plan it", "The answer."},
      {"\n <think>a < b </thi</think>x", false, "a < b </thi", "x"},
      {"plan it</think>\n\nThe answer.", true, "plan it", "The answer."},
      {"No reasoning here <think>not a block</think>", false, "", "No reasoning here <think>not a block</think>"},
      {"<thin", false, "", "<thin"},                   // an unfinished tag at the end is text
      {"<think>cut short", false, "cut short", ""},     // max_tokens inside the block
      {"<think>cut </thin", false, "cut </thin", ""},
      {"", true, "", ""},
      {"  ", false, "", "  "},
  };
  for (const Case& c : cases) {
    for (const size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{1000}}) {
      const ThinkSplitter::Parts p = split(c.reply, c.open, n);
      EXPECT_EQ(p.reasoning, c.reasoning) << c.reply << " / " << n;
      EXPECT_EQ(p.content, c.content) << c.reply << " / " << n;
    }
  }
}

TEST(ThinkSplitter, TemplatesAndPrompts) {
  EXPECT_TRUE(template_thinks("{% if x %}<think>\n{{ r }}\n</think>{% endif %}"));
  EXPECT_FALSE(template_thinks("{{ messages }}<|im_start|>assistant\n"));
  EXPECT_TRUE(prompt_opens_think("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_think("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_think("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace preface::server
