// The chat template a server renders with: the model's Jinja template (tokenizer.chat_template, or a
// --chat-template FILE), or one of the 14 built-in families (chat_template.h) when the file has no template,
// when its template field holds a bare family name, or when --chat-template NAME asks for one.
// Immutable after construction; render() may run on many threads at once.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_jinja.h"
#include "chat/chat_template.h"

namespace preface::chat {

class ChatRenderer {
 public:
  // A built-in family.
  ChatRenderer(ChatTemplate family, std::optional<std::string> bos, std::optional<std::string> eos);
  // A Jinja template: parsed here, then rendered once with a single user message, so that a template that
  // does not parse, or raises on the simplest conversation, is an Error at start-up (message names why). A template
  // that raises without tools but renders with them (a `tool_use` template) is accepted: tools_only().
  ChatRenderer(std::string_view jinja_source, std::optional<std::string> bos, std::optional<std::string> eos);

  // What a server with these settings renders: `family` (--chat-template NAME) wins, then `jinja_override`
  // (--chat-template FILE's text), then the GGUF's template (Jinja, or a bare family name), else ChatML. The GGUF's
  // named template tokenizer.chat_template.tool_use (gguf_tool_use_template, "" when absent) renders requests
  // with tools when the GGUF's own template is used, as llama.cpp does.
  static std::shared_ptr<const ChatRenderer> for_model(const Tokenizer& tok, std::string_view gguf_template,
                                                       std::optional<ChatTemplate> family,
                                                       const std::optional<std::string>& jinja_override,
                                                       std::string_view gguf_tool_use_template = "");

  bool is_jinja() const { return jinja_ != nullptr; }
  // The template renders only conversations with tools (requests without them fail as the template raises).
  bool tools_only() const { return tools_only_; }
  // The named template that renders requests with tools (nullptr: this one does).
  const ChatRenderer* tool_use() const { return tool_use_.get(); }
  ChatTemplate family() const { return family_; }
  // "jinja" or the family's name (for /v1/models and the start-up line).
  std::string name() const;
  // The Jinja template's source ("" for a built-in family): what tool-call formats are detected from.
  const std::string& source() const { return source_; }

  // Plain-text messages (what today's API layers build). kwargs: chat_template_kwargs (Jinja only).
  RenderedChat render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                      const nlohmann::ordered_json& kwargs = nullptr) const;
  // Request JSON: messages (content strings or text parts, tool_calls, tool messages), tools (array or null),
  // kwargs (object or null). A family renders text messages only and refuses tools with an Error.
  // Errors: preface::Error, with the template's raise_exception message verbatim, or
  // "chat template: <Kind>: <message>" for other template failures.
  RenderedChat render_json(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                           bool add_generation_prompt, const nlohmann::ordered_json& kwargs = nullptr) const;

 private:
  ChatTemplate family_ = ChatTemplate::ChatML;
  std::shared_ptr<const JinjaChatTemplate> jinja_;
  std::string source_;
  std::optional<std::string> bos_, eos_;
  bool tools_only_ = false;
  std::shared_ptr<const ChatRenderer> tool_use_;  // tokenizer.chat_template.tool_use
};

}  // namespace preface::chat
