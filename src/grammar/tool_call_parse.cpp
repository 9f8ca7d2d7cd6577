// Reading calls in any row's format (grammar/tool_formats.h): one scanner for whole replies and for streams.
#include <algorithm>
#include <cctype>

#include "grammar/tool_calls.h"
#include "util/json_depth.h"

namespace preface::grammar {
namespace {

using nlohmann::json;
using namespace std::string_view_literals;

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

// How reading a piece ended: it was there, the text ended inside it (or before it), or something else is there.
enum class Got { Yes, End, No };

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

class Scanner {
 public:
  Scanner(const ToolFormat& f, std::string_view s, const std::vector<ToolSpec>& tools) : f_(f), s_(s), tools_(tools) {}

  struct Result {
    std::vector<ScannedCall> calls;
    std::vector<json> args;   // [calls] the arguments of each complete call
    Got status = Got::Yes;    // Yes: the region ended properly; End: the text ended inside it; No: malformed
    bool bad_in_call = false; // status No inside a call (after its opening marker)
  };

  Result run() {
    Result r;
    r.status = region(r);
    return r;
  }

 private:
  void skip_ws() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  bool at_end() const { return pos_ >= s_.size(); }
  // The marker (trimmed), after optional whitespace.
  Got marker(std::string_view m) {
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
  Got literal(char c) {
    skip_ws();
    if (at_end()) return Got::End;
    if (s_[pos_] != c) return Got::No;
    ++pos_;
    return Got::Yes;
  }

  Got region(Result& r) {
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

  Got name(ScannedCall& c) {
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
  Got json_extent(size_t& start) {
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

  Got call(ScannedCall& c, json& args) {
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
  static void add_pair(ScannedCall& c, std::vector<std::pair<std::string, json>>& pairs, std::string key, json v) {
    c.arguments += pairs.empty() ? "{" : ", ";
    c.arguments += dump(json(key)) + ": " + dump(v);
    pairs.emplace_back(std::move(key), std::move(v));
  }

  Got json_call(ScannedCall& c, json& args) {
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
  void partial_json_call(std::string_view text, ScannedCall& c) const {
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

  Got xml_params(const std::string& fn, std::vector<std::pair<std::string, json>>& pairs, ScannedCall& c) {
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

  Got python_params(std::vector<std::pair<std::string, json>>& pairs, ScannedCall& c) {
    if (Got g = literal('('); g != Got::Yes) return g;
    for (bool first = true;; first = false) {
      skip_ws();
      if (at_end()) return Got::End;
      if (s_[pos_] == ')') {
        ++pos_;
        if (pairs.empty()) c.arguments = "{";
        return Got::Yes;
      }
      if (!first) {
        if (Got g = literal(','); g != Got::Yes) return g;
        skip_ws();
      }
      const size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      if (at_end()) return Got::End;
      if (pos_ == start) return Got::No;
      std::string key(s_.substr(start, pos_ - start));
      if (Got g = literal('='); g != Got::Yes) return g;
      json v;
      if (Got g = value(v, false, 0); g != Got::Yes) return g;
      add_pair(c, pairs, std::move(key), std::move(v));
    }
  }

  Got gemma_params(std::vector<std::pair<std::string, json>>& pairs, ScannedCall& c) {
    json obj;
    skip_ws();
    if (at_end()) return Got::End;
    if (s_[pos_] != '{') return Got::No;
    c.arguments.clear();
    if (Got g = object(obj, true, 0, &pairs, &c); g != Got::Yes) return g;
    if (pairs.empty()) c.arguments = "{";
    return Got::Yes;
  }

  // A Python literal (gemma: Gemma 4's values, strings between <|"|> marks, bare keys).
  Got value(json& out, bool gemma, size_t depth) {
    if (depth > kMaxToolCallDepth) return Got::No;
    skip_ws();
    if (at_end()) return Got::End;
    const char c = s_[pos_];
    static constexpr std::string_view kQuote = "<|\"|>";
    if (gemma && c == '<') {
      const std::string_view rest = s_.substr(pos_);
      if (rest.substr(0, kQuote.size()) != kQuote) return kQuote.substr(0, rest.size()) == rest ? Got::End : Got::No;
      const size_t end = s_.find(kQuote, pos_ + kQuote.size());
      if (end == std::string_view::npos) return Got::End;
      out = std::string(s_.substr(pos_ + kQuote.size(), end - pos_ - kQuote.size()));
      pos_ = end + kQuote.size();
      return Got::Yes;
    }
    if (!gemma && (c == '"' || c == '\'')) return python_string(out);
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++pos_;
      out = json::array();
      for (bool first = true;; first = false) {
        skip_ws();
        if (at_end()) return Got::End;
        if (s_[pos_] == close) {
          ++pos_;
          return Got::Yes;
        }
        if (!first) {
          if (Got g = literal(','); g != Got::Yes) return g;
        }
        json item;
        if (Got g = value(item, gemma, depth + 1); g != Got::Yes) return g;
        out.push_back(std::move(item));
      }
    }
    if (c == '{') return object(out, gemma, depth + 1);
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                                s_[pos_] == '-' || s_[pos_] == '+')) {
      ++pos_;
    }
    if (at_end()) return Got::End;
    const std::string_view word = s_.substr(start, pos_ - start);
    if (word == "True" || word == "true") out = true;
    else if (word == "False" || word == "false") out = false;
    else if (word == "None" || word == "null") out = nullptr;
    else {
      out = parse_bounded(word);
      if (!out.is_number()) return Got::No;
    }
    return Got::Yes;
  }

  Got python_string(json& out) {
    const char q = s_[pos_++];
    std::string text;
    for (; pos_ < s_.size(); ++pos_) {
      const char c = s_[pos_];
      if (c == q) {
        ++pos_;
        out = std::move(text);
        return Got::Yes;
      }
      if (c != '\\') {
        text += c;
        continue;
      }
      if (++pos_ >= s_.size()) return Got::End;
      const char e = s_[pos_];
      if (e == 'u') {
        if (pos_ + 4 >= s_.size()) return Got::End;
        const json j = json::parse("\"\\u" + std::string(s_.substr(pos_ + 1, 4)) + "\"", nullptr, false);
        if (!j.is_string()) return Got::No;
        text += j.get<std::string>();
        pos_ += 4;
        continue;
      }
      static constexpr std::string_view kFrom = "ntr0\\'\"/bf"sv, kTo = "\n\t\r\0\\'\"/\b\f"sv;
      const size_t k = kFrom.find(e);
      if (k == std::string_view::npos) return Got::No;
      text += kTo[k];
    }
    return Got::End;
  }

  // {KEY: VALUE, ...}: Python's (keys are string literals) or Gemma 4's (bare keys, colon, Gemma values); the
  // top level reports its pairs as they complete (pairs, c).
  Got object(json& out, bool gemma, size_t depth, std::vector<std::pair<std::string, json>>* pairs = nullptr,
             ScannedCall* c = nullptr) {
    ++pos_;
    out = json::object();
    for (bool first = true;; first = false) {
      skip_ws();
      if (at_end()) return Got::End;
      if (s_[pos_] == '}') {
        ++pos_;
        return Got::Yes;
      }
      if (!first) {
        if (Got g = literal(','); g != Got::Yes) return g;
        skip_ws();
      }
      std::string key;
      if (gemma) {
        const size_t colon = s_.find(':', pos_);
        if (colon == std::string_view::npos) return Got::End;
        key = std::string(trim_view(s_.substr(pos_, colon - pos_)));
        if (key.empty() || key.find_first_of("{}[],<") != std::string::npos) return Got::No;
        pos_ = colon + 1;
      } else {
        json k;
        if (Got g = value(k, false, depth); g != Got::Yes) return g;
        if (!k.is_string()) return Got::No;
        if (Got g = literal(':'); g != Got::Yes) return g;
        key = k.get<std::string>();
      }
      json v;
      if (Got g = value(v, gemma, depth + 1); g != Got::Yes) return g;
      if (pairs != nullptr) add_pair(*c, *pairs, key, v);
      out[key] = std::move(v);
    }
  }

  const ToolFormat& f_;
  std::string_view s_;
  const std::vector<ToolSpec>& tools_;
  size_t pos_ = 0;
};

// The marker that opens a region (trimmed).
std::string_view opening(const ToolFormat& f) {
  return trim_view(!f.section_open.empty() ? f.section_open : f.call_open);
}

}  // namespace

size_t find_call_region(const ToolFormat& f, std::string_view text, size_t* partial) {
  if (partial != nullptr) *partial = std::string_view::npos;
  const std::string_view open = opening(f);
  if (f.leads || open.empty()) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) {
      if (partial != nullptr) *partial = 0;
      return std::string_view::npos;
    }
    const std::string_view rest = text.substr(first);
    if (!open.empty()) {
      size_t n = 0;
      const Got g = match_marker(rest, open, &n);
      if (g == Got::Yes) return first;
      if (partial != nullptr && g == Got::End) *partial = first;
      return std::string_view::npos;
    }
    return rest[0] == '{' || rest[0] == '[' ? first : std::string_view::npos;
  }
  // The marker's first word finds candidates; the whole marker (its whitespace flexible) confirms one.
  const std::string_view word = open.substr(0, std::min(open.size(), static_cast<size_t>(std::find_if(
                                                                       open.begin(), open.end(), is_space) - open.begin())));
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    size_t n = 0;
    const Got g = match_marker(text.substr(at), open, &n);
    if (g == Got::Yes) return at;
    if (g == Got::End) {
      if (partial != nullptr) *partial = at;
      return std::string_view::npos;
    }
  }
  if (partial != nullptr) {
    for (size_t n = std::min(text.size(), word.size() - 1); n > 0; --n) {
      if (text.substr(text.size() - n) == word.substr(0, n)) {
        *partial = text.size() - n;
        break;
      }
    }
  }
  return std::string_view::npos;
}

std::optional<ParsedOutput> parse_tool_calls(const ToolFormat& f, std::string_view text,
                                             const std::vector<ToolSpec>& tools) {
  const size_t start = find_call_region(f, text);
  if (start == std::string_view::npos) return std::nullopt;
  const std::string_view region = text.substr(start);
  Scanner::Result r = Scanner(f, region, tools).run();
  // A JSON-object row without markers whose region is one array of calls (Falcon 3's <tool_call>[...]).
  ParsedOutput out;
  out.content = std::string(trim_view(text.substr(0, start)));
  for (size_t i = 0; i < r.calls.size(); ++i) {
    if (!r.calls[i].complete) break;
    out.calls.push_back({r.calls[i].name, std::move(r.args[i])});
  }
  if (r.status == Got::No && !r.bad_in_call) {
    // Something other than a call where the next call or the region's end belongs; one array of calls in a
    // JSON-object row's call (Falcon 3 writes <tool_call>[{...}]</tool_call>) is read as its calls.
    return std::nullopt;
  }
  if (out.calls.empty() && f.syntax == ToolSyntax::JsonObject) {
    std::string_view body = trim_view(region);
    const std::string_view open = trim_view(f.call_open), close = trim_view(f.call_close);
    if (body.substr(0, open.size()) == open && body.size() >= open.size() + close.size() &&
        body.substr(body.size() - close.size()) == close) {
      body = trim_view(body.substr(open.size(), body.size() - open.size() - close.size()));
      const json j = parse_bounded(body);
      if (j.is_array()) {
        for (const json& e : j) {
          auto c = call_from_json(e, f);
          if (!c) return std::nullopt;
          out.calls.push_back(std::move(*c));
        }
      }
    }
  }
  if (out.calls.empty()) return std::nullopt;
  return out;
}

std::vector<ScannedCall> scan_call_region(const ToolFormat& f, std::string_view region,
                                          const std::vector<ToolSpec>& tools) {
  Scanner::Result r = Scanner(f, region, tools).run();
  return std::move(r.calls);
}

}  // namespace preface::grammar
