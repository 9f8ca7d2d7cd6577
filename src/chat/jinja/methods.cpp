// Python methods templates call on strings, dicts and lists (str.strip, dict.items, list.append, ...).
// Returned as callables bound to their object; an unknown name gives Undefined, so `x.foo` falls back to the
// item lookup as in jinja2.
#include <algorithm>

#include "chat/jinja/interp.h"

namespace preface::chat::jinja {
namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs&);

const Str* opt_str(const CallArgs& a, size_t pos, std::string_view name, Str* holder) {
  const Value* v = a.get(pos, name);
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) type_error(std::string("expected a str argument, got ") + v->type_name());
  *holder = v->as_str();
  return holder;
}

const Value& need(const CallArgs& a, size_t pos, const char* what) {
  if (pos >= a.args.size()) type_error(std::string(what) + "() missing a required argument");
  return a.args[pos];
}

Value s_strip(Interpreter&, const Value& s, CallArgs& a) {
  Str h;
  return Value::string(py_strip_str(s.as_str(), opt_str(a, 0, "chars", &h), 'b'));
}
Value s_lstrip(Interpreter&, const Value& s, CallArgs& a) {
  Str h;
  return Value::string(py_strip_str(s.as_str(), opt_str(a, 0, "chars", &h), 'l'));
}
Value s_rstrip(Interpreter&, const Value& s, CallArgs& a) {
  Str h;
  return Value::string(py_strip_str(s.as_str(), opt_str(a, 0, "chars", &h), 'r'));
}
Value s_split(Interpreter&, const Value& s, CallArgs& a) {
  Str h;
  const Value* m = a.get(1, "maxsplit");
  return Value::list(py_split(s.as_str(), opt_str(a, 0, "sep", &h), m ? m->as_int() : -1));
}
Value s_rsplit(Interpreter&, const Value& s, CallArgs& a) {
  Str h;
  const Str* sep = opt_str(a, 0, "sep", &h);
  const Value* m = a.get(1, "maxsplit");
  const int64_t maxsplit = m ? m->as_int() : -1;
  if (maxsplit < 0 || !sep) return Value::list(py_split(s.as_str(), sep, maxsplit));
  if (sep->text.empty()) fail(ErrorKind::Value, "empty separator");
  List parts;
  size_t end = s.text().size();
  while (static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t f = end >= sep->text.size() ? s.text().rfind(sep->text, end - sep->text.size()) : std::string::npos;
    if (f == std::string::npos) break;
    parts.insert(parts.begin(), Value::string(s.as_str().substr(f + sep->text.size(), end)));
    end = f;
  }
  parts.insert(parts.begin(), Value::string(s.as_str().substr(0, end)));
  return Value::list(std::move(parts));
}
Value s_splitlines(Interpreter&, const Value& s, CallArgs&) {
  List out;
  const std::string& t = s.text();
  size_t b = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\n' || t[i] == '\r') {
      out.push_back(Value::string(s.as_str().substr(b, i)));
      if (t[i] == '\r' && i + 1 < t.size() && t[i + 1] == '\n') ++i;
      b = i + 1;
    }
  }
  if (b < t.size()) out.push_back(Value::string(s.as_str().substr(b, t.size())));
  return Value::list(std::move(out));
}
bool affix(const Value& s, const Value& arg, bool prefix) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) type_error("startswith/endswith first arg must be str or a tuple of str");
    const std::string& t = s.text();
    const std::string& x = p.text();
    return x.size() <= t.size() && (prefix ? t.compare(0, x.size(), x) == 0 : t.compare(t.size() - x.size(), x.size(), x) == 0);
  };
  if (arg.is_list()) return std::any_of(arg.as_list().begin(), arg.as_list().end(), one);
  return one(arg);
}
Value s_startswith(Interpreter&, const Value& s, CallArgs& a) { return Value::boolean(affix(s, need(a, 0, "startswith"), true)); }
Value s_endswith(Interpreter&, const Value& s, CallArgs& a) { return Value::boolean(affix(s, need(a, 0, "endswith"), false)); }

// str.replace keeps the marks of the kept pieces and of the replacement.
Value s_replace(Interpreter& in, const Value& s, CallArgs& a) {
  const Value& old_v = need(a, 0, "replace");
  const Value& new_v = need(a, 1, "replace");
  if (!old_v.is_string() || !new_v.is_string()) type_error("replace() arguments must be str");
  const Value* c = a.get(2, "count");
  const int64_t count = c ? c->as_int() : -1;
  if (old_v.text().empty()) {
    std::string out;
    const std::vector<size_t> cps = code_points(s.text());
    if (cps.size() * (new_v.text().size() + 4) > in.config().max_output_bytes + s.text().size()) {
      fail(ErrorKind::Limit, "str.replace result exceeds " + std::to_string(in.config().max_output_bytes) + " bytes");
    }
    int64_t done = 0;
    for (size_t i = 0; i + 1 < cps.size(); ++i) {
      if (count < 0 || done < count) out += new_v.text(), ++done;
      out += s.text().substr(cps[i], cps[i + 1] - cps[i]);
    }
    if (count < 0 || done < count) out += new_v.text();
    return derived_string(std::move(out), s.as_str().marked() || new_v.as_str().marked());
  }
  const List parts = py_split(s.as_str(), &old_v.as_str(), count);
  Str out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out.append(new_v.as_str());
    out.append(parts[i].as_str());
    in.check_output(out);
  }
  return Value::string(std::move(out));
}

std::string ascii_case(std::string s, int (*fn)(int)) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(fn(c));
  }
  return s;
}
Value s_upper(Interpreter&, const Value& s, CallArgs&) { return derived_string(ascii_case(s.text(), ::toupper), s.as_str().marked()); }
Value s_lower(Interpreter&, const Value& s, CallArgs&) { return derived_string(ascii_case(s.text(), ::tolower), s.as_str().marked()); }
// Python's str.title: a letter after a non-letter is upper-cased, others lower-cased (ASCII letters).
Value s_title(Interpreter&, const Value& s, CallArgs&) {
  std::string t = s.text();
  bool prev_letter = false;
  for (char& c : t) {
    const auto u = static_cast<unsigned char>(c);
    const bool letter = u >= 0x80 || std::isalpha(u);
    if (u < 0x80 && letter) c = static_cast<char>(prev_letter ? ::tolower(c) : ::toupper(c));
    prev_letter = letter;
  }
  return derived_string(std::move(t), s.as_str().marked());
}
Value s_capitalize(Interpreter&, const Value& s, CallArgs&) {
  std::string t = ascii_case(s.text(), ::tolower);
  if (!t.empty() && static_cast<unsigned char>(t[0]) < 0x80) t[0] = static_cast<char>(::toupper(t[0]));
  return derived_string(std::move(t), s.as_str().marked());
}
Value s_find(Interpreter&, const Value& s, CallArgs& a) {
  const size_t f = s.text().find(need(a, 0, "find").to_str().text);
  return Value::integer(f == std::string::npos ? -1 : static_cast<int64_t>(code_points(s.text().substr(0, f)).size() - 1));
}
Value s_rfind(Interpreter&, const Value& s, CallArgs& a) {
  const size_t f = s.text().rfind(need(a, 0, "rfind").to_str().text);
  return Value::integer(f == std::string::npos ? -1 : static_cast<int64_t>(code_points(s.text().substr(0, f)).size() - 1));
}
Value s_count(Interpreter&, const Value& s, CallArgs& a) {
  const std::string x = need(a, 0, "count").to_str().text;
  if (x.empty()) return Value::integer(static_cast<int64_t>(code_points(s.text()).size()));
  int64_t n = 0;
  for (size_t p = s.text().find(x); p != std::string::npos; p = s.text().find(x, p + x.size())) ++n;
  return Value::integer(n);
}
Value s_join(Interpreter& in, const Value& s, CallArgs& a) {
  Str out;
  bool first = true;
  for (const Value& v : in.iterate(need(a, 0, "join"))) {
    if (!v.is_string()) type_error(std::string("sequence item: expected str instance, ") + v.type_name() + " found");
    if (!first) out.append(s.as_str());
    first = false;
    out.append(v.as_str());
    in.check_output(out);
  }
  return Value::string(std::move(out));
}
// str.format with {} and {N} fields (no format specs).
Value s_format(Interpreter&, const Value& s, CallArgs& a) {
  const std::string& t = s.text();
  std::string out;
  bool marked = s.as_str().marked();
  size_t next = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '{' && i + 1 < t.size() && t[i + 1] == '{') { out += '{'; ++i; continue; }
    if (t[i] == '}' && i + 1 < t.size() && t[i + 1] == '}') { out += '}'; ++i; continue; }
    if (t[i] != '{') { out += t[i]; continue; }
    const size_t close = t.find('}', i);
    if (close == std::string::npos) fail(ErrorKind::Value, "Single '{' encountered in format string");
    const std::string field = t.substr(i + 1, close - i - 1);
    const Value* v = nullptr;
    if (field.empty()) v = next < a.args.size() ? &a.args[next++] : nullptr;
    else if (std::all_of(field.begin(), field.end(), ::isdigit) && field.size() < 6) v = a.get(std::stoul(field), "");
    else v = a.get(SIZE_MAX, field);
    if (!v) fail(ErrorKind::Unsupported, "format field {" + field + "} has no argument");
    marked = marked || v->any_marked();
    out += v->to_str().text;
    i = close;
  }
  return derived_string(std::move(out), marked);
}
template <int (*Pred)(int)>
Value s_is(Interpreter&, const Value& s, CallArgs&) {
  if (s.text().empty()) return Value::boolean(false);
  return Value::boolean(std::all_of(s.text().begin(), s.text().end(), [](char c) { return Pred(static_cast<unsigned char>(c)) != 0; }));
}

Value d_items(Interpreter&, const Value& d, CallArgs&) {
  List out;
  for (const auto& [k, v] : d.as_dict().items) out.push_back(Value::list({k, v}));
  return Value::list(std::move(out));
}
Value d_keys(Interpreter&, const Value& d, CallArgs&) {
  List out;
  for (const auto& [k, v] : d.as_dict().items) out.push_back(k);
  return Value::list(std::move(out));
}
Value d_values(Interpreter&, const Value& d, CallArgs&) {
  List out;
  for (const auto& [k, v] : d.as_dict().items) out.push_back(v);
  return Value::list(std::move(out));
}
Value d_get(Interpreter&, const Value& d, CallArgs& a) {
  const Value* v = d.as_dict().find(need(a, 0, "get"));
  return v ? *v : (a.args.size() > 1 ? a.args[1] : Value::none());
}

Value l_append(Interpreter& in, const Value& l, CallArgs& a) {
  in.count_iteration();  // bounded like a loop: a template cannot grow a list without limit
  l.as_list().push_back(need(a, 0, "append"));
  return Value::none();
}
Value l_extend(Interpreter& in, const Value& l, CallArgs& a) {
  for (const Value& v : in.iterate(need(a, 0, "extend"))) {
    in.count_iteration();
    l.as_list().push_back(v);
  }
  return Value::none();
}
Value l_pop(Interpreter&, const Value& l, CallArgs& a) {
  List& list = l.as_list();
  if (list.empty()) fail(ErrorKind::Value, "pop from empty list");
  int64_t i = a.args.empty() ? -1 : a.args[0].as_int();
  if (i < 0) i += static_cast<int64_t>(list.size());
  if (i < 0 || i >= static_cast<int64_t>(list.size())) fail(ErrorKind::Value, "pop index out of range");
  Value v = list[static_cast<size_t>(i)];
  list.erase(list.begin() + i);
  return v;
}
Value l_index(Interpreter&, const Value& l, CallArgs& a) {
  const Value& x = need(a, 0, "index");
  for (size_t i = 0; i < l.as_list().size(); ++i) {
    if (l.as_list()[i].equals(x)) return Value::integer(static_cast<int64_t>(i));
  }
  fail(ErrorKind::Value, x.repr() + " is not in list");
}
Value l_count(Interpreter&, const Value& l, CallArgs& a) {
  const Value& x = need(a, 0, "count");
  return Value::integer(std::count_if(l.as_list().begin(), l.as_list().end(), [&](const Value& v) { return v.equals(x); }));
}

struct Entry {
  Value::Kind kind;
  std::string_view name;
  Method fn;
};

constexpr Entry kMethods[] = {
    {Value::Kind::String, "strip", s_strip},         {Value::Kind::String, "lstrip", s_lstrip},
    {Value::Kind::String, "rstrip", s_rstrip},       {Value::Kind::String, "split", s_split},
    {Value::Kind::String, "rsplit", s_rsplit},       {Value::Kind::String, "splitlines", s_splitlines},
    {Value::Kind::String, "startswith", s_startswith}, {Value::Kind::String, "endswith", s_endswith},
    {Value::Kind::String, "replace", s_replace},     {Value::Kind::String, "upper", s_upper},
    {Value::Kind::String, "lower", s_lower},         {Value::Kind::String, "title", s_title},
    {Value::Kind::String, "capitalize", s_capitalize}, {Value::Kind::String, "find", s_find},
    {Value::Kind::String, "rfind", s_rfind},         {Value::Kind::String, "count", s_count},
    {Value::Kind::String, "join", s_join},           {Value::Kind::String, "format", s_format},
    {Value::Kind::String, "isdigit", s_is<::isdigit>}, {Value::Kind::String, "isalpha", s_is<::isalpha>},
    {Value::Kind::String, "isalnum", s_is<::isalnum>}, {Value::Kind::String, "isspace", s_is<::isspace>},
    {Value::Kind::Dict, "items", d_items},           {Value::Kind::Dict, "keys", d_keys},
    {Value::Kind::Dict, "values", d_values},         {Value::Kind::Dict, "get", d_get},
    {Value::Kind::List, "append", l_append},         {Value::Kind::List, "extend", l_extend},
    {Value::Kind::List, "pop", l_pop},               {Value::Kind::List, "index", l_index},
    {Value::Kind::List, "count", l_count},
};

}  // namespace

Value Interpreter::method(const Value& obj, const std::string& name) {
  for (const Entry& e : kMethods) {
    if (e.kind == obj.kind() && e.name == name) {
      const Method fn = e.fn;
      return Value::callable(name, [fn, obj](Interpreter& in, CallArgs& a) { return fn(in, obj, a); });
    }
  }
  return Value();
}

}  // namespace preface::chat::jinja
