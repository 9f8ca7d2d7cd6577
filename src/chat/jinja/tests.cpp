// Jinja tests (`x is name(args)`), as one table with jinja2 3.1's semantics: `number` includes booleans
// (Python's bool is an int), `integer` excludes them, strings, lists and dicts are iterables and sequences,
// Undefined is iterable (as jinja2's Undefined) but not defined.
#include <unordered_map>

#include "chat/jinja/interp.h"

namespace preface::chat::jinja {
namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value& arg(const CallArgs& a, size_t pos, const char* test) {
  const Value* v = a.get(pos, "value");
  if (!v) v = pos < a.args.size() ? &a.args[pos] : nullptr;
  if (!v) type_error(std::string("test '") + test + "' needs an argument");
  return *v;
}

int64_t int_of(const Value& v, const char* test) {
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_number()) type_error(std::string("test '") + test + "' needs a number, not " + v.type_name());
  return v.kind() == Value::Kind::Float ? static_cast<int64_t>(v.as_float()) : v.as_int();
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Value::Kind::Int; }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Value::Kind::Float; }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Value::Kind::Bool; }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Value::Kind::Bool && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Value::Kind::Bool && !v.as_bool(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Value::Kind::Dict; }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.kind() == Value::Kind::Dict;
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.kind() == Value::Kind::Dict;
}
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_callable(); }
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return v.equals(arg(a, 0, "equalto")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !v.equals(arg(a, 0, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return v.less(arg(a, 0, "lt")); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return arg(a, 0, "gt").less(v); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return !arg(a, 0, "le").less(v); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return !v.less(arg(a, 0, "ge")); }
bool t_in(Interpreter& in, const Value& v, CallArgs& a) { return in.contains(arg(a, 0, "in"), v); }
bool t_odd(Interpreter&, const Value& v, CallArgs&) { return int_of(v, "odd") % 2 != 0; }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return int_of(v, "even") % 2 == 0; }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t d = int_of(arg(a, 0, "divisibleby"), "divisibleby");
  if (d == 0) fail(ErrorKind::Value, "integer division or modulo by zero");
  return int_of(v, "divisibleby") % d == 0;
}
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = arg(a, 0, "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.is_list() || v.is_mapping() || v.is_callable()) return v.identity() == o.identity();
  return v.equals(o) && (v.is_none() || v.is_undefined() || v.kind() == Value::Kind::Bool);
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_string()) return false;
  bool any = false;
  for (char c : v.text()) {
    if (std::isupper(static_cast<unsigned char>(c))) return false;
    any = any || std::islower(static_cast<unsigned char>(c));
  }
  return any;
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_string()) return false;
  bool any = false;
  for (char c : v.text()) {
    if (std::islower(static_cast<unsigned char>(c))) return false;
    any = any || std::isupper(static_cast<unsigned char>(c));
  }
  return any;
}
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }

}  // namespace

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  static const std::unordered_map<std::string, TestFn> kTests = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"string", t_string},
      {"number", t_number},     {"integer", t_integer},     {"float", t_float},       {"boolean", t_boolean},
      {"true", t_true},         {"false", t_false},         {"mapping", t_mapping},   {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable},   {"equalto", t_eq},        {"eq", t_eq},
      {"==", t_eq},             {"ne", t_ne},               {"!=", t_ne},             {"lt", t_lt},
      {"lessthan", t_lt},       {"<", t_lt},                {"gt", t_gt},             {"greaterthan", t_gt},
      {">", t_gt},              {"le", t_le},               {"<=", t_le},             {"ge", t_ge},
      {">=", t_ge},             {"in", t_in},               {"odd", t_odd},           {"even", t_even},
      {"divisibleby", t_divisibleby}, {"sameas", t_sameas}, {"lower", t_lower},       {"upper", t_upper},
      {"escaped", t_escaped},
  };
  const auto it = kTests.find(name);
  if (it == kTests.end()) fail(ErrorKind::Syntax, "no test named '" + name + "'");
  return it->second(*this, input, args);
}

}  // namespace preface::chat::jinja
