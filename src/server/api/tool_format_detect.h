// Which tool-call format (a row of grammar/tool_formats.h) a served model writes, found once per model from its
// chat template's own rendering of a call: the template renders a conversation in which the assistant called a
// probe tool, and the row whose reader finds exactly that call in the text is the model's. A template that never
// renders a call (LFM2's) is recognised by a row's vocabulary token; older templates whose rendering fails by the
// markers of the three original rows in their source. Harmony templates (gpt-oss) read calls from the reply's
// channels instead (server/api/reply_channels.h) and get no row.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_renderer.h"
#include "grammar/tool_formats.h"
#include "tokenizer/tokenizer.h"

namespace preface::server {

struct ToolCallSetup {
  const grammar::ToolFormat* format = nullptr;  // nullptr: not recognised (tools render; output stays text)
  std::string how;                              // "rendering", "vocabulary", "template text"; "" when none
  // Control tokens of the vocabulary that the row's markers are made of (sorted): replies write them into their
  // text and grammars may produce them, so that calls can be read and forced.
  std::vector<int32_t> marker_tokens;
};

ToolCallSetup detect_tool_calls(const chat::ChatRenderer& renderer, const Tokenizer& tokenizer);

}  // namespace preface::server
