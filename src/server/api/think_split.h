// Replies that write their reasoning between <think> and </think> (Qwen3, QwQ, Qwen3.5, DeepSeek-R1 and V3.1+,
// GLM-4.6, MiniMax-M2, Nemotron 3: their templates write these tags). The reply's text is split as it streams:
// what lies inside the tags is reasoning (reasoning_content; Anthropic thinking blocks; Responses reasoning items),
// the rest is content, the tags themselves neither. A reply starts inside the block when the prompt left one open
// (templates that end the generation prompt with "<think>\n"); else a block counts only at the start of the reply
// (after optional whitespace), and whitespace after </think> is dropped. Tags split across deltas are held back
// until they are decided, so nothing of a tag ever reaches either side.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace preface::server {

class ThinkSplitter {
 public:
  explicit ThinkSplitter(bool starts_in_reasoning) : state_(starts_in_reasoning ? State::Reasoning : State::Start) {}

  struct Parts {
    std::string reasoning, content;
  };
  // The parts of `text` (appended to what was held back) that are decided.
  Parts push(std::string_view text);
  // Everything still held (an unfinished tag is text of the side it was in).
  Parts flush();

 private:
  enum class State { Start, Reasoning, AfterClose, Content };
  State state_;
  std::string held_;
};

// Whether a chat template's source writes <think> ... </think>.
bool template_thinks(std::string_view template_source);
// Whether a rendered prompt ends inside a think block: its last <think> comes after its last </think>.
bool prompt_opens_think(std::string_view prompt_tail);
// The same over a tokenized prompt: the text of its last 16 tokens.
bool prompt_opens_think(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt);

}  // namespace preface::server
