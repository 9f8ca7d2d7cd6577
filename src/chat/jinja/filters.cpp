// Jinja filters, as one table (name -> function), with jinja2 3.1's semantics. tojson follows Hugging Face's
// override: Python json.dumps(x, ensure_ascii=False, indent=indent, separators=..., sort_keys=...), no HTML
// escaping. Sequence filters (selectattr, map, sort, unique, ...) are in filters_seq.cpp.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "chat/jinja/interp.h"

namespace preface::chat::jinja {
namespace {

Value arg_or(const CallArgs& a, size_t pos, std::string_view name, Value dflt) {
  const Value* v = a.get(pos, name);
  return v ? *v : std::move(dflt);
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  const Value* chars = a.get(0, "chars");
  const Str c = chars && !chars->is_none() ? chars->to_str() : Str{};
  return Value::string(py_strip_str(v.to_str(), chars && !chars->is_none() ? &c : nullptr, 'b'));
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
  const Value indent = arg_or(a, 0, "indent", Value::none());
  const bool ensure_ascii = arg_or(a, 99, "ensure_ascii", Value::boolean(false)).truthy();
  const bool sort_keys = arg_or(a, 99, "sort_keys", Value::boolean(false)).truthy();
  std::string item_sep, key_sep;
  if (const Value* seps = a.get(99, "separators"); seps && seps->is_list() && seps->as_list().size() == 2) {
    item_sep = seps->as_list()[0].to_str().text;
    key_sep = seps->as_list()[1].to_str().text;
  }
  const int n = indent.is_none() ? -1 : static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
  return derived_string(to_json(v, n, ensure_ascii, sort_keys, item_sep, key_sep), v.any_marked());
}

Value f_length(Interpreter&, const Value& v, CallArgs&) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return Value::integer(0);
    case Value::Kind::String: return Value::integer(static_cast<int64_t>(code_points(v.text()).size() - 1));
    case Value::Kind::List: return Value::integer(static_cast<int64_t>(v.as_list().size()));
    case Value::Kind::Dict: case Value::Kind::Namespace:
      return Value::integer(static_cast<int64_t>(v.as_dict().items.size()));
    default: type_error(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list();
  if (!v.is_mapping()) type_error("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, val] : v.as_dict().items) out.push_back(Value::list({k, val}));
  return Value::list(std::move(out));
}

Value f_first(Interpreter& in, const Value& v, CallArgs&) {
  List items = in.iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter& in, const Value& v, CallArgs&) {
  List items = in.iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  const Str sep = arg_or(a, 0, "d", Value::string("")).to_str();
  const Value* attr = a.get(1, "attribute");
  Str out;
  bool first = true;
  for (const Value& item : in.iterate(v)) {
    if (!first) out.append(sep);
    first = false;
    out.append((attr ? in.get_item(item, *attr) : item).to_str());
    in.check_output(out);
  }
  return Value::string(std::move(out));
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  const bool boolean = arg_or(a, 1, "boolean", Value::boolean(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return arg_or(a, 0, "default_value", Value::string(""));
  return v;
}

// ASCII case mapping; other bytes unchanged (templates case-map role names and ASCII keywords).
std::string map_case(std::string_view s, int (*fn)(int)) {
  std::string out(s);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(fn(c));
  }
  return out;
}

Value f_upper(Interpreter&, const Value& v, CallArgs&) {
  const Str s = v.to_str();
  return derived_string(map_case(s.text, ::toupper), s.marked());
}
Value f_lower(Interpreter&, const Value& v, CallArgs&) {
  const Str s = v.to_str();
  return derived_string(map_case(s.text, ::tolower), s.marked());
}
Value f_capitalize(Interpreter&, const Value& v, CallArgs&) {
  const Str s = v.to_str();
  std::string out = map_case(s.text, ::tolower);
  if (!out.empty() && static_cast<unsigned char>(out[0]) < 0x80) out[0] = static_cast<char>(::toupper(out[0]));
  return derived_string(std::move(out), s.marked());
}
// jinja2's title: the first character after a space, '-', '(', '{', '[' or '<' upper-cased, the rest lowered.
Value f_title(Interpreter&, const Value& v, CallArgs&) {
  const Str s = v.to_str();
  std::string out = s.text;
  bool start = true;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    const bool boundary = std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (u < 0x80 && !boundary) c = static_cast<char>(start ? ::toupper(c) : ::tolower(c));
    start = boundary;
  }
  return derived_string(std::move(out), s.marked());
}

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  const Str s = v.to_str();
  const Value* old_v = a.get(0, "old");
  const Value* new_v = a.get(1, "new");
  if (!old_v || !new_v) type_error("replace() needs two arguments");
  const int64_t count = arg_or(a, 2, "count", Value::integer(-1)).as_int();
  CallArgs args{{*old_v, *new_v, Value::integer(count)}, {}};
  return in.method(Value::string(s), "replace").as_callable().fn(in, args);
}

Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value::string(v.to_str()); }

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  const Value dflt = arg_or(a, 0, "default", Value::integer(0));
  if (v.kind() == Value::Kind::Float) return std::isfinite(v.as_float()) ? Value::integer(static_cast<int64_t>(v.as_float())) : dflt;
  if (v.is_number()) return Value::integer(v.as_int());
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string t = py_strip_str(v.as_str(), nullptr, 'b').text;
      const long long i = std::stoll(t, &used);
      if (used == t.size()) return Value::integer(i);
      const double d = std::stod(t, &used);
      if (used == t.size() && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return dflt;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  const Value dflt = arg_or(a, 0, "default", Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string t = py_strip_str(v.as_str(), nullptr, 'b').text;
      const double d = std::stod(t, &used);
      if (used == t.size()) return Value::number(d);
    } catch (const std::exception&) {
    }
  }
  return dflt;
}

Value f_list(Interpreter& in, const Value& v, CallArgs&) { return Value::list(in.iterate(v)); }
Value f_safe(Interpreter&, const Value& v, CallArgs&) { return v; }

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  const Str s = v.to_str();
  std::string out;
  for (const char c : s.text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return derived_string(std::move(out), s.marked());
}

// jinja2 3.1's indent: the text gets a trailing newline, is split into lines (str.splitlines), and every line
// but the first (and, unless `blank`, except empty ones) is prefixed; `first` prefixes the first line too.
Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  const Value w = arg_or(a, 0, "width", Value::integer(4));
  const std::string ind = w.is_string() ? w.text() : std::string(static_cast<size_t>(std::clamp<int64_t>(w.as_int(), 0, 256)), ' ');
  const bool first = arg_or(a, 1, "first", Value::boolean(false)).truthy();
  const bool blank = arg_or(a, 2, "blank", Value::boolean(false)).truthy();
  const Str s = v.to_str();
  std::vector<std::string> lines;
  const std::string t = s.text + "\n";
  size_t b = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\n' || t[i] == '\r' || t[i] == '\v' || t[i] == '\f') {
      lines.push_back(t.substr(b, i - b));
      if (t[i] == '\r' && i + 1 < t.size() && t[i + 1] == '\n') ++i;
      b = i + 1;
    }
  }
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    if (out.size() > in.config().max_output_bytes) {
      fail(ErrorKind::Limit, "indent result exceeds " + std::to_string(in.config().max_output_bytes) + " bytes");
    }
    out += '\n';
    if (blank || !lines[i].empty()) out += ind;
    out += lines[i];
  }
  if (first) out = ind + out;
  return derived_string(std::move(out), s.marked());
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.kind() == Value::Kind::Float) return Value::number(std::fabs(v.as_float()));
  if (v.is_number()) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  type_error(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t precision = arg_or(a, 0, "precision", Value::integer(0)).as_int();
  const std::string method = arg_or(a, 1, "method", Value::string("common")).to_str().text;
  if (!v.is_number()) type_error(std::string("type ") + v.type_name() + " doesn't define __round__ method");
  const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -20, 20)));
  double x = v.as_float() * scale;
  x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
  return Value::number(x / scale);
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
  return in.binary("%", Value::string(v.to_str()), Value::list(a.args));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  return Value::integer(static_cast<int64_t>(py_split(v.to_str(), nullptr, -1).size()));
}

}  // namespace

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  static const std::unordered_map<std::string, FilterFn> kFilters = [] {
    std::unordered_map<std::string, FilterFn> m = {
        {"trim", f_trim},       {"tojson", f_tojson},   {"length", f_length},   {"count", f_length},
        {"items", f_items},     {"first", f_first},     {"last", f_last},       {"join", f_join},
        {"default", f_default}, {"d", f_default},       {"upper", f_upper},     {"lower", f_lower},
        {"title", f_title},     {"capitalize", f_capitalize}, {"replace", f_replace}, {"string", f_string},
        {"int", f_int},         {"float", f_float},     {"list", f_list},       {"safe", f_safe},
        {"escape", f_escape},   {"e", f_escape},        {"forceescape", f_escape}, {"indent", f_indent},
        {"abs", f_abs},         {"round", f_round},     {"format", f_format},   {"wordcount", f_wordcount},
    };
    add_sequence_filters(m);
    return m;
  }();
  const auto it = kFilters.find(name);
  // jinja2 defers an unknown filter in a conditional block to run time (TemplateRuntimeError); preface looks filters
  // up only when one is applied, so every unknown filter is that case.
  if (it == kFilters.end()) fail(ErrorKind::Runtime, "no filter named '" + name + "'");
  return it->second(*this, input, args);
}

}  // namespace preface::chat::jinja
