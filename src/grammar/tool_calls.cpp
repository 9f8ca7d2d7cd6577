#include "grammar/tool_calls.h"

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/schema_regex.h"
#include "util/json_depth.h"

namespace preface::grammar {
namespace {

using nlohmann::json;

struct FormatSpec {
  ToolCallFormat format;
  const char* marker;        // recognised in a template's source
  const char* args_key;      // "arguments" or "parameters"
  const char* call_open;     // around each call
  const char* call_close;
  const char* list_open;     // around the calls
  const char* separator;
  const char* list_close;
};

// One row per family; detection tries them in order.
constexpr FormatSpec kFormats[] = {
    {ToolCallFormat::Hermes, "<tool_call>", "arguments", "<tool_call>\n", "\n</tool_call>", "", "\n", ""},
    {ToolCallFormat::Mistral, "[TOOL_CALLS]", "arguments", "", "", "[", ", ", "]"},
    {ToolCallFormat::Llama3, "<|python_tag|>", "parameters", "", "", "", "", ""},
};

const FormatSpec& spec(ToolCallFormat f) {
  for (const FormatSpec& s : kFormats) {
    if (s.format == f) return s;
  }
  return kFormats[0];
}

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return {};
  const size_t b = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(a, b - a + 1));
}

// JSON text as a value, or a discarded value when it is malformed or nests deeper than kMaxToolCallDepth (the
// copies and dumps that follow recurse once per level).
json parse_bounded(std::string_view text) {
  if (!json_depth_within(text, kMaxToolCallDepth)) return json(json::value_t::discarded);
  return json::parse(text, nullptr, false);
}

// {"name": "...", "<args_key>": {...}} with the arguments an object (or a string holding one).
std::optional<ParsedToolCall> call_from_json(const json& j, const char* args_key) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  auto it = j.find(args_key);
  if (it == j.end()) it = j.find(std::string(args_key) == "arguments" ? "parameters" : "arguments");
  ParsedToolCall c{j["name"].get<std::string>(), json::object()};
  if (it != j.end()) {
    json args = *it;
    if (args.is_string()) args = parse_bounded(args.get_ref<const std::string&>());
    if (!args.is_object()) return std::nullopt;
    c.arguments = std::move(args);
  }
  return c;
}

}  // namespace

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view source) {
  for (const FormatSpec& s : kFormats) {
    if (source.find(s.marker) != std::string_view::npos) return s.format;
  }
  // Llama 3.1+ templates describe JSON calls without the python tag in the JSON branch.
  if (source.find("\"parameters\": dictionary of argument name and its value") != std::string_view::npos) {
    return ToolCallFormat::Llama3;
  }
  return std::nullopt;
}

std::string tool_call_gbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools, bool parallel,
                           std::vector<Loosened>* loosened) {
  if (tools.empty()) throw GrammarError("", "no tools to call");
  const FormatSpec& f = spec(format);
  std::vector<json> schemas;
  std::vector<std::string> names;
  std::string call = cat(gbnf_literal(f.call_open), " \"{\" ws \"\\\"name\\\"\" ws \":\" ws (");
  for (size_t i = 0; i < tools.size(); ++i) {
    schemas.push_back(tools[i].parameters);
    names.push_back("args" + std::to_string(i));
    call += cat(i ? " | " : " ", gbnf_literal(json(tools[i].name).dump()), " ws \",\" ws ",
                gbnf_literal(json(f.args_key).dump()), " ws \":\" ws ", names.back());
  }
  call += cat(" ) ws \"}\" ", gbnf_literal(f.call_close));
  const bool many = parallel && format != ToolCallFormat::Llama3;
  std::string root = cat("root ::= ", gbnf_literal(f.list_open), " call");
  if (many) root += cat(" ( ", gbnf_literal(f.separator), " call )*");
  root += cat(" ", gbnf_literal(f.list_close), "\n");
  return cat(root, "call ::= ", call, "\n", json_schemas_gbnf_rules(schemas, names, loosened));
}

std::optional<ParsedOutput> parse_tool_calls(ToolCallFormat format, std::string_view text) {
  const FormatSpec& f = spec(format);
  ParsedOutput out;
  if (format == ToolCallFormat::Hermes) {
    const std::string open = "<tool_call>", close = "</tool_call>";
    size_t pos = text.find(open);
    if (pos == std::string_view::npos) return std::nullopt;
    out.content = trim(text.substr(0, pos));
    while (pos != std::string_view::npos) {
      // The first closing tag after which the call parses: a string argument may hold the tag's text.
      std::optional<ParsedToolCall> c;
      size_t end = text.find(close, pos);
      for (; end != std::string_view::npos && !c; end = c ? end : text.find(close, end + 1)) {
        c = call_from_json(parse_bounded(text.substr(pos + open.size(), end - pos - open.size())),
                           f.args_key);
      }
      if (!c && out.calls.empty()) return std::nullopt;
      if (!c) break;  // the last call was cut short (max_tokens): the complete ones before it stand
      out.calls.push_back(std::move(*c));
      pos = end + close.size();
      if (!trim(text.substr(pos)).empty() && text.find(open, pos) == std::string_view::npos) return std::nullopt;
      pos = text.find(open, pos);
    }
    return out;
  }
  std::string body = trim(text);
  if (format == ToolCallFormat::Mistral) {
    if (body.rfind(f.marker, 0) == 0) body = trim(std::string_view(body).substr(std::string_view(f.marker).size()));
    const json j = parse_bounded(body);
    if (!j.is_array() || j.empty()) return std::nullopt;
    for (const json& e : j) {
      auto c = call_from_json(e, f.args_key);
      if (!c) return std::nullopt;
      out.calls.push_back(std::move(*c));
    }
    return out;
  }
  if (body.rfind(f.marker, 0) == 0) body = trim(std::string_view(body).substr(std::string_view(f.marker).size()));
  auto c = call_from_json(parse_bounded(body), f.args_key);
  if (!c) return std::nullopt;
  out.calls.push_back(std::move(*c));
  return out;
}

}  // namespace preface::grammar
