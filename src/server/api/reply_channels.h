// Replies whose tokens carry channels: which generated tokens are the answer (content), which are the model's
// reasoning, and which are the format's own framing, decided token by token so streams split as they go.
//
// harmony (gpt-oss; a chat template that writes <|channel|>): a reply is one or more messages
//   <|channel|>NAME[ to=RECIPIENT][<|constrain|>TYPE]<|message|>TEXT<|end|>
// joined by <|start|>ROLE, and it ends with <|return|> (or <|call|> after a tool call). The channel `analysis` is
// reasoning (reasoning_content; Anthropic thinking blocks), `final` is content, `commentary` without a recipient
// (a preamble to the user) is content. A message addressed to a recipient (`to=functions.NAME` in its header or
// after its role, a tool call) is a call: its text is the call's arguments. The control tokens, the headers and the
// role names between messages are framing (neither); tokens before any header are content, so a reply without
// channels reads as it always did. Names are read from the header's token texts, so they do not depend on how the
// vocabulary splits them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "tokenizer/tokenizer.h"

namespace preface::server {

enum class ReplyRoute : uint8_t { Content, Reasoning, Call, Framing };

// harmony's control tokens in one vocabulary.
struct HarmonyTokens {
  int32_t start = -1, end = -1, message = -1, channel = -1, constrain = -1, call = -1, ret = -1;
};

class HarmonyChannels {
 public:
  // The vocabulary's harmony tokens; nullopt when it lacks one of <|start|>, <|end|>, <|message|>, <|channel|>.
  static std::optional<HarmonyTokens> find_tokens(const Tokenizer& tokenizer);
  // `tokenizer` must outlive this object.
  HarmonyChannels(const Tokenizer& tokenizer, HarmonyTokens ids) : tokenizer_(tokenizer), ids_(ids) {}

  // Where the next generated token's text goes.
  ReplyRoute route(int32_t token);
  // Calls begun so far (a message to a recipient whose <|message|> was generated), and the latest one's function
  // (the recipient without its "functions." namespace).
  int32_t n_calls() const { return n_calls_; }
  const std::string& call_name() const { return call_name_; }

 private:
  enum class State : uint8_t { Body, Header, Role };
  const Tokenizer& tokenizer_;
  HarmonyTokens ids_;
  State state_ = State::Body;
  ReplyRoute body_ = ReplyRoute::Content;  // where the current message's text goes
  std::string header_;                     // the header's text so far (State::Header)
  std::string role_;                       // text between messages: the role and maybe " to=RECIPIENT"
  int32_t n_calls_ = 0;
  std::string call_name_;
};

// Whether a chat template writes harmony replies (its source uses <|channel|>).
bool template_is_harmony(std::string_view template_source);

}  // namespace preface::server
