// The scanner of grammar/tool_call_scanner.h: markers, the region, names, JSON bodies and XML parameters.
#include "grammar/tool_call_scanner.h"

#include <algorithm>
#include <cctype>

#include "util/json_depth.h"

namespace preface::grammar::detail {

using nlohmann::json;

std::string_view trim_view(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return {};
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// JSON text as a value, or a discarded value when it is malformed or nests deeper than kMaxToolCallDepth (the
// copies and dumps that follow recurse once per level).
json parse_bounded(std::string_view text) {
  if (!json_depth_within(text, kMaxToolCallDepth)) return json(json::value_t::discarded);
  return json::parse(text, nullptr, false);
}

// The length of the JSON value at the start of `t`: brackets and strings scanned, a scalar up to a delimiter.
// npos when `t` ends inside it; 0 when it nests deeper than kMaxToolCallDepth or starts with a closing bracket.
size_t json_value_length(std::string_view t) {
  size_t depth = 0;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxToolCallDepth) return 0;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;
      if (--depth == 0) return i + 1;
    } else if (depth == 0 && (is_space(c) || c == ',')) {
      return i;
    }
  }
  return std::string_view::npos;
}

// JSON text of a value read from model output, whose strings may hold invalid UTF-8 (replaced, never thrown on).
std::string dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

// Whether `text` starts with `marker` (trimmed), a whitespace run of the marker matching any whitespace run of the
// text, empty included; *n: the bytes of text it spans.
Got match_marker(std::string_view text, std::string_view marker, size_t* n) {
  marker = trim_view(marker);
  size_t i = 0, j = 0;
  while (i < marker.size()) {
    if (is_space(marker[i])) {
      while (i < marker.size() && is_space(marker[i])) ++i;
      while (j < text.size() && is_space(text[j])) ++j;
      continue;
    }
    if (j >= text.size()) return Got::End;
    if (text[j] != marker[i]) return Got::No;
    ++i;
    ++j;
  }
  *n = j;
  return Got::Yes;
}

// A JSON object {name_key: NAME, args_key: {...}} (or the other usual key, or OpenAI's {"function": {...}}).
std::optional<ParsedToolCall> call_from_json(const json& j, const ToolFormat& f) {
  if (!j.is_object()) return std::nullopt;
  if (const auto fn = j.find("function"); fn != j.end() && fn->is_object() && !j.contains(f.name_key)) {
    return call_from_json(*fn, f);
  }
  const auto n = j.find(f.name_key);
  if (n == j.end() || !n->is_string() || n->get_ref<const std::string&>().empty()) return std::nullopt;
  auto it = j.find(f.args_key);
  for (const char* other : {"arguments", "parameters"}) {
    if (it == j.end()) it = j.find(other);
  }
  ParsedToolCall c{n->get<std::string>(), json::object()};
  if (it != j.end()) {
    json args = *it;
    if (args.is_string()) args = parse_bounded(args.get_ref<const std::string&>());
    if (!args.is_object()) return std::nullopt;
    c.arguments = std::move(args);
  }
  return c;
}

// Whether property `key` of tool `name` is a string (its value then is taken as written).
bool string_property(const std::vector<ToolSpec>& tools, const std::string& name, const std::string& key) {
  for (const ToolSpec& t : tools) {
    if (t.name != name || !t.parameters.is_object()) continue;
    const auto props = t.parameters.find("properties");
    if (props == t.parameters.end() || !props->is_object()) return false;
    const auto p = props->find(key);
    return p != props->end() && is_string_schema(*p);
  }
  return false;
}

// The marker (trimmed), after optional whitespace.
Got Scanner::marker(std::string_view m) {
  const size_t save = pos_;
  skip_ws();
  size_t n = 0;
  const Got g = match_marker(s_.substr(pos_), m, &n);
  if (g == Got::Yes) {
    pos_ += n;
  } else if (g == Got::No) {
    pos_ = save;
  }
  return g;
}

Got Scanner::literal(char c) {
  skip_ws();
  if (at_end()) return Got::End;
  if (s_[pos_] != c) return Got::No;
  ++pos_;
  return Got::Yes;
}

Got Scanner::region(Result& r) {
  if (Got g = marker(f_.section_open); g != Got::Yes) return g;
  for (;;) {
    if (Got g = marker(f_.call_open); g != Got::Yes) return g;
    r.calls.emplace_back();
    r.args.emplace_back();
    const Got g = call(r.calls.back(), r.args.back());
    if (g != Got::Yes) {
      r.bad_in_call = g == Got::No;
      return g;
    }
    r.calls.back().complete = true;
    skip_ws();
    if (at_end()) return f_.section_close.empty() ? Got::Yes : Got::End;
    if (!f_.section_close.empty()) {
      if (Got c = marker(f_.section_close); c != Got::No) return c;
    }
    if (!f_.parallel) return Got::No;
    if (Got sep = marker(f_.separator); sep != Got::Yes) return sep;
  }
}

Got Scanner::name(ScannedCall& c) {
  skip_ws();
  const size_t start = pos_;
  while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
  if (at_end()) return Got::End;
  std::string_view n = s_.substr(start, pos_ - start);
  if (!f_.name_prefix.empty()) {
    if (n.substr(0, f_.name_prefix.size()) != f_.name_prefix) return Got::No;
    n.remove_prefix(f_.name_prefix.size());
  }
  if (f_.name_index) {
    if (s_[pos_] != ':') return Got::No;
    ++pos_;
    const size_t digits = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (at_end()) return Got::End;
    if (pos_ == digits) return Got::No;
  }
  if (n.empty()) return Got::No;
  if (!f_.call_id_marker.empty()) {
    if (Got g = marker(f_.call_id_marker); g == Got::Yes) {
      const size_t close = s_.find(trim_view(f_.name_close), pos_);
      if (close == std::string_view::npos) return Got::End;
      pos_ = close;
    } else if (g == Got::End) {
      return Got::End;
    }
  }
  if (Got g = marker(f_.name_close); g != Got::Yes) return g;
  c.name = std::string(n);
  return Got::Yes;
}

// A JSON value's extent from pos_ (after whitespace).
Got Scanner::json_extent(size_t& start) {
  skip_ws();
  start = pos_;
  if (at_end()) return Got::End;
  const size_t n = json_value_length(s_.substr(pos_));
  if (n == std::string_view::npos) {
    pos_ = s_.size();
    return Got::End;
  }
  if (n == 0) return Got::No;
  pos_ += n;
  return Got::Yes;
}

Got Scanner::call(ScannedCall& c, json& args) {
  switch (f_.syntax) {
    case ToolSyntax::JsonObject: return json_call(c, args);
    case ToolSyntax::NameJson: {
      if (Got g = name(c); g != Got::Yes) return g;
      size_t start = 0;
      const Got g = json_extent(start);
      c.arguments = std::string(s_.substr(start, pos_ - start));
      if (g != Got::Yes) return g;
      args = parse_bounded(c.arguments);
      if (!args.is_object()) return Got::No;
      return marker(f_.call_close);
    }
    default: break;
  }
  if (Got g = name(c); g != Got::Yes) return g;
  std::vector<std::pair<std::string, json>> pairs;
  Got g = Got::No;
  if (f_.syntax == ToolSyntax::NameXml) g = xml_params(c.name, pairs, c);
  if (f_.syntax == ToolSyntax::Pythonic) g = python_params(pairs, c);
  if (f_.syntax == ToolSyntax::GemmaObject) g = gemma_params(pairs, c);
  if (g != Got::Yes) return g;
  c.arguments += "}";
  args = json::object();
  for (auto& [k, v] : pairs) args[k] = std::move(v);
  return marker(f_.call_close);
}

// Arguments text of key/value pairs read so far: "{" then "KEY": VALUE joined by ", " ("}" added at the end).
void Scanner::add_pair(ScannedCall& c, std::vector<std::pair<std::string, json>>& pairs, std::string key, json v) {
  c.arguments += pairs.empty() ? "{" : ", ";
  c.arguments += dump(json(key)) + ": " + dump(v);
  pairs.emplace_back(std::move(key), std::move(v));
}

Got Scanner::json_call(ScannedCall& c, json& args) {
  size_t start = 0;
  const Got g = json_extent(start);
  const std::string_view text = s_.substr(start, pos_ - start);
  if (g != Got::Yes) {
    partial_json_call(text, c);
    return g;
  }
  const json j = parse_bounded(text);
  const auto parsed = call_from_json(j, f_);
  if (!parsed) return Got::No;
  c.name = parsed->name;
  partial_json_call(text, c);  // the arguments as written
  if (!parse_bounded(c.arguments).is_object()) c.arguments = dump(parsed->arguments);
  args = parsed->arguments;
  return marker(f_.call_close);
}

// An unfinished {"name": ..., "arguments": {...} of constrained output (name first): the name once its string
// is closed, and the arguments text so far.
void Scanner::partial_json_call(std::string_view text, ScannedCall& c) const {
  const std::string name_key = json(std::string(f_.name_key)).dump();
  const std::string args_key = json(std::string(f_.args_key)).dump();
  const size_t nk = text.find(name_key);
  if (nk == std::string_view::npos) return;
  size_t p = text.find(':', nk + name_key.size());
  if (p == std::string_view::npos) return;
  p = text.find('"', p);
  if (p == std::string_view::npos) return;
  const size_t q = text.find('"', p + 1);
  if (q == std::string_view::npos) return;
  c.name = std::string(text.substr(p + 1, q - p - 1));
  const size_t ak = text.find(args_key, q);
  if (ak == std::string_view::npos) return;
  size_t v = text.find(':', ak + args_key.size());
  if (v == std::string_view::npos) return;
  v = text.find_first_not_of(" \t\r\n", v + 1);
  if (v == std::string_view::npos) return;
  c.arguments = std::string(text.substr(v));
  if (const size_t n = json_value_length(c.arguments); n != std::string_view::npos) c.arguments.resize(n);
}

Got Scanner::xml_params(const std::string& fn, std::vector<std::pair<std::string, json>>& pairs, ScannedCall& c) {
  const std::string_view mid = trim_view(f_.param_mid), close = trim_view(f_.param_close);
  for (;;) {
    const Got open = marker(f_.param_open);
    if (open == Got::End) return Got::End;
    if (open == Got::No) break;
    const size_t key_end = s_.find(mid, pos_);
    if (key_end == std::string_view::npos) return Got::End;
    std::string key(s_.substr(pos_, key_end - pos_));
    pos_ = key_end + mid.size();
    bool raw = false;
    if (f_.typed_params) {
      const std::string_view rest = s_.substr(pos_);
      for (const std::string_view kind : {"true\">", "false\">"}) {
        if (rest.substr(0, kind.size()) == kind) {
          raw = kind[0] == 't';
          pos_ += kind.size();
          break;
        }
        if (kind.substr(0, rest.size()) == rest && rest.size() < 6) return Got::End;
      }
      if (s_.substr(pos_ - 2, 2) != "\">") return Got::No;
    }
    const size_t value_end = s_.find(close, pos_);
    if (value_end == std::string_view::npos) return Got::End;
    std::string_view value = s_.substr(pos_, value_end - pos_);
    if (!f_.param_mid.empty() && f_.param_mid.back() == '\n' && !value.empty() && value.front() == '\n') {
      value.remove_prefix(1);
    }
    if (f_.param_close.front() == '\n' && !value.empty() && value.back() == '\n') value.remove_suffix(1);
    pos_ = value_end + close.size();
    if (!f_.typed_params) raw = string_property(tools_, fn, key);
    json v;
    if (!raw) v = parse_bounded(value);
    if (raw || v.is_discarded()) v = std::string(value);
    add_pair(c, pairs, std::move(key), std::move(v));
  }
  if (pairs.empty()) c.arguments = "{";
  return Got::Yes;
}

}  // namespace preface::grammar::detail
