// Jinja chat templates: JSON inputs -> template variables (with content marks) -> RenderedChat.
#include "chat/chat_jinja.h"

namespace preface::chat {
namespace {

bool is_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

jinja::Value message_to_value(const nlohmann::ordered_json& m) {
  if (!m.is_object()) return json_to_value(m, true);
  jinja::Value v = jinja::Value::dict();
  for (const auto& [key, val] : m.items()) {
    const bool plain_role = key == "role" && val.is_string() && is_identifier(val.get<std::string>());
    v.as_dict().set(key, json_to_value(val, !plain_role));
  }
  return v;
}

}  // namespace

jinja::Value json_to_value(const nlohmann::ordered_json& j, bool mark) {
  using jinja::Value;
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::integer(static_cast<int64_t>(u))
                                                   : Value::number(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::json::value_t::string:
      return mark ? Value::content(j.get<std::string>()) : Value::string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      jinja::List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(json_to_value(e, mark));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::dict();
      for (const auto& [k, v] : j.items()) d.as_dict().set(mark ? Value::content(k) : Value::string(k), json_to_value(v, mark));
      return d;
    }
    default: return Value::none();
  }
}

JinjaChatTemplate::JinjaChatTemplate(std::string_view source, std::optional<std::string> bos,
                                     std::optional<std::string> eos)
    : tmpl_(jinja::Template::parse(source)), bos_(std::move(bos)), eos_(std::move(eos)) {}

RenderedChat JinjaChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                       bool add_generation_prompt, const nlohmann::ordered_json& kwargs,
                                       const jinja::RenderConfig& config) const {
  if (!messages.is_array()) throw Error("chat template: messages must be an array");
  if (!tools.is_null() && !tools.is_array()) throw Error("chat template: tools must be an array");
  if (!kwargs.is_null() && !kwargs.is_object()) throw Error("chat template: chat_template_kwargs must be an object");
  jinja::Dict vars;
  // kwargs first, so the standard variables below win over a kwarg of the same name.
  if (kwargs.is_object()) {
    for (const auto& [k, v] : kwargs.items()) vars.set(k, json_to_value(v, true));
  }
  jinja::List msgs;
  msgs.reserve(messages.size());
  for (const auto& m : messages) msgs.push_back(message_to_value(m));
  vars.set("messages", jinja::Value::list(std::move(msgs)));
  vars.set("tools", tools.is_null() ? jinja::Value::none() : json_to_value(tools, true));
  vars.set("documents", jinja::Value::none());
  vars.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  if (bos_) vars.set("bos_token", jinja::Value::string(*bos_));
  if (eos_) vars.set("eos_token", jinja::Value::string(*eos_));
  jinja::Str out = tmpl_.render(vars, config);
  RenderedChat r;
  r.text = std::move(out.text);
  r.content = std::move(out.marks);
  return r;
}

}  // namespace preface::chat
