// Chat templates rendered as Jinja (the GGUF's tokenizer.chat_template, or a --chat-template FILE), with the
// variables Hugging Face's apply_chat_template passes: messages, tools (None when absent), documents (None),
// add_generation_prompt, bos_token and eos_token (each only when the tokenizer has one, else undefined), and
// the caller's chat_template_kwargs (enable_thinking, ...), which may override none of the former.
//
// Inputs are JSON as the request carries them, parsed as nlohmann::ordered_json so that objects keep the
// client's key order (tojson writes tool schemas in that order, as transformers does): messages with string or content-part contents, tool_calls
// (arguments as objects or JSON strings), `tool` messages; tools as OpenAI function schemas.
//
// Content marks (RenderedChat::content): every string from the request is marked, so that it tokenizes as
// text and never as a control token: all strings inside messages (values and nested keys; a message's own
// field names are not), all strings in tools (keys too), and the string values of kwargs. One exception: a
// message's `role` stays unmarked when it is a plain identifier ([A-Za-z0-9_-]+), since templates build control
// tokens from it ('<|' + role + '|>'); any other role text is marked. jinja/value.h says how marks survive
// string operations.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/jinja/jinja.h"

namespace preface::chat {

// JSON -> template value; `mark` marks every string (keys included).
jinja::Value json_to_value(const nlohmann::ordered_json& j, bool mark);

class JinjaChatTemplate {
 public:
  // Parses `source` once. Throws jinja::JinjaError (a preface::Error) when it does not parse.
  // bos/eos: the tokenizer's BOS/EOS piece strings, nullopt when it has none.
  JinjaChatTemplate(std::string_view source, std::optional<std::string> bos, std::optional<std::string> eos);

  // Throws jinja::JinjaError: kind Raised for the template's raise_exception (what() is its message verbatim),
  // other kinds for template bugs or limits; preface::Error when messages is not an array or an input is
  // malformed.
  RenderedChat render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools, bool add_generation_prompt,
                      const nlohmann::ordered_json& kwargs = nullptr, const jinja::RenderConfig& config = {}) const;

  const std::optional<std::string>& bos() const { return bos_; }
  const std::optional<std::string>& eos() const { return eos_; }

 private:
  jinja::Template tmpl_;
  std::optional<std::string> bos_, eos_;
};

}  // namespace preface::chat
