// ChatRenderer: the Jinja template or the built-in family, behind one render call.
#include "chat/chat_renderer.h"

namespace preface::chat {
namespace {

// Text of a message's content: a string, null, or text parts joined (what the families render).
std::string content_text(const nlohmann::ordered_json& content) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw Error("message content must be a string or an array of parts");
  std::string out;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      throw Error("only text content parts are supported by the built-in chat templates");
    }
    out += part["text"].get<std::string>();
  }
  return out;
}

RenderedChat render_jinja(const JinjaChatTemplate& t, const nlohmann::ordered_json& messages,
                          const nlohmann::ordered_json& tools, bool agp, const nlohmann::ordered_json& kwargs) {
  try {
    return t.render(messages, tools, agp, kwargs);
  } catch (const jinja::JinjaError& e) {
    if (e.kind() == jinja::ErrorKind::Raised) throw;
    throw Error(std::string("chat template: ") + jinja::error_kind_name(e.kind()) + ": " + e.what());
  }
}

}  // namespace

ChatRenderer::ChatRenderer(ChatTemplate family, std::optional<std::string> bos, std::optional<std::string> eos)
    : family_(family), bos_(std::move(bos)), eos_(std::move(eos)) {}

ChatRenderer::ChatRenderer(std::string_view jinja_source, std::optional<std::string> bos,
                           std::optional<std::string> eos)
    : source_(jinja_source), bos_(bos), eos_(eos) {
  try {
    jinja_ = std::make_shared<const JinjaChatTemplate>(jinja_source, std::move(bos), std::move(eos));
  } catch (const jinja::JinjaError& e) {
    throw Error(std::string("the chat template does not parse: ") + e.what());
  }
  const nlohmann::ordered_json probe = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello"}}});
  try {
    jinja_->render(probe, nullptr, true);
  } catch (const jinja::JinjaError& e) {
    // A template written for requests with tools (Hermes' and Command R's tool_use) is accepted as such.
    const nlohmann::ordered_json tools = nlohmann::ordered_json::array(
        {{{"type", "function"},
          {"function", {{"name", "f"}, {"description", "d"}, {"parameters", {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}}}}}}});
    try {
      jinja_->render(probe, tools, true);
      tools_only_ = true;
      return;
    } catch (const jinja::JinjaError&) {
    }
    throw Error(std::string("the chat template fails on a single user message: ") +
                jinja::error_kind_name(e.kind()) + ": " + e.what());
  }
}

std::shared_ptr<const ChatRenderer> ChatRenderer::for_model(const Tokenizer& tok, std::string_view gguf_template,
                                                            std::optional<ChatTemplate> family,
                                                            const std::optional<std::string>& jinja_override,
                                                            std::string_view gguf_tool_use_template) {
  std::optional<std::string> bos, eos;
  if (tok.bos_id() >= 0) bos = chat_bos_text(tok);
  if (tok.eos_id() >= 0) eos = chat_eos_text(tok);
  if (family) return std::make_shared<const ChatRenderer>(*family, bos, eos);
  if (jinja_override) return std::make_shared<const ChatRenderer>(std::string_view(*jinja_override), bos, eos);
  if (gguf_template.empty()) return std::make_shared<const ChatRenderer>(ChatTemplate::ChatML, bos, eos);
  if (auto named = chat_template_from_name(gguf_template)) return std::make_shared<const ChatRenderer>(*named, bos, eos);
  auto renderer = std::make_shared<ChatRenderer>(gguf_template, bos, eos);
  if (!gguf_tool_use_template.empty()) {
    renderer->tool_use_ = std::make_shared<const ChatRenderer>(gguf_tool_use_template, bos, eos);
  }
  return renderer;
}

std::string ChatRenderer::name() const { return is_jinja() ? "jinja" : chat_template_name(family_); }

RenderedChat ChatRenderer::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                  const nlohmann::ordered_json& kwargs) const {
  if (!jinja_) {
    return render_chat_spans(family_, messages, add_generation_prompt, bos_.value_or(""), eos_.value_or(""));
  }
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) arr.push_back({{"role", m.role}, {"content", m.content}});
  return render_jinja(*jinja_, arr, nullptr, add_generation_prompt, kwargs);
}

RenderedChat ChatRenderer::render_json(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                       bool add_generation_prompt, const nlohmann::ordered_json& kwargs) const {
  if (tool_use_ && tools.is_array() && !tools.empty()) {
    return tool_use_->render_json(messages, tools, add_generation_prompt, kwargs);
  }
  if (jinja_) return render_jinja(*jinja_, messages, tools, add_generation_prompt, kwargs);
  if (!tools.is_null() && !(tools.is_array() && tools.empty())) {
    throw Error(std::string("tools need a Jinja chat template; the built-in '") + chat_template_name(family_) +
                "' template renders none");
  }
  if (!messages.is_array()) throw Error("messages must be an array");
  std::vector<ChatMessage> plain;
  for (const auto& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) throw Error("each message needs a role");
    plain.push_back({m["role"].get<std::string>(), content_text(m.value("content", nlohmann::ordered_json()))});
  }
  return render_chat_spans(family_, plain, add_generation_prompt, bos_.value_or(""), eos_.value_or(""));
}

}  // namespace preface::chat
