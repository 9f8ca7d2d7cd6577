// Expression evaluation: names, literals, attribute and item lookup (jinja2's getattr/getitem order), calls,
// filters, tests, boolean logic, comparisons and slicing. Arithmetic is in operators.cpp.
#include "chat/jinja/interp.h"

namespace preface::chat::jinja {
namespace {

// jinja2's object_type_repr, for "'dict object' has no attribute 'x'".
std::string type_repr(const Value& v) {
  if (v.is_none()) return "None";
  std::string s = v.type_name();
  s += " object";
  return s;
}

// Appends the pieces in order (one buffer: GCC 12's -Wrestrict misfires on chains of operator+).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

Value missing_attr(const Value& obj, const std::string& name) {
  return Value::undefined(cat({"'", type_repr(obj), "' has no attribute '", name, "'"}));
}

}  // namespace

void raise_undefined(const Value& v) { fail(ErrorKind::Undefined, v.undefined_hint()); }
void type_error(const std::string& message) { fail(ErrorKind::Type, message); }

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: return lookup(e.name);
    case ExprKind::List: {
      List items;
      items.reserve(e.args.size());
      for (const ExprPtr& a : e.args) items.push_back(eval(*a));
      return Value::list(std::move(items));
    }
    case ExprKind::Dict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) d.as_dict().set(eval(*e.args[i]), eval(*e.args[i + 1]));
      return d;
    }
    case ExprKind::Attr: return get_attr(eval(*e.args[0]), e.name);
    case ExprKind::Item: return get_item(eval(*e.args[0]), eval(*e.args[1]));
    case ExprKind::Slice: return eval_slice(e);
    case ExprKind::Call: return eval_call(e);
    case ExprKind::Filter: {
      const Value input = eval(*e.args[0]);
      CallArgs args;
      for (size_t i = 1; i < e.args.size(); ++i) args.args.push_back(eval(*e.args[i]));
      for (const auto& [k, a] : e.kwargs) args.kwargs.emplace_back(k, eval(*a));
      return apply_filter(e.name, input, args);
    }
    case ExprKind::Test: {
      const Value input = eval(*e.args[0]);
      CallArgs args;
      for (size_t i = 1; i < e.args.size(); ++i) args.args.push_back(eval(*e.args[i]));
      for (const auto& [k, a] : e.kwargs) args.kwargs.emplace_back(k, eval(*a));
      return Value::boolean(apply_test(e.name, input, args) != e.negate);
    }
    case ExprKind::Neg: case ExprKind::Pos: {
      const Value v = eval(*e.args[0]);
      if (v.is_undefined()) raise_undefined(v);
      const bool neg = e.kind == ExprKind::Neg;
      if (v.kind() == Value::Kind::Float) return Value::number(neg ? -v.as_float() : v.as_float());
      if (v.is_number()) {
        if (neg && v.as_int() == INT64_MIN) fail(ErrorKind::Value, "integer overflow");
        return Value::integer(neg ? -v.as_int() : v.as_int());
      }
      type_error(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" + v.type_name() + "'");
    }
    case ExprKind::Not: return Value::boolean(!eval(*e.args[0]).truthy());
    case ExprKind::And: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? eval(*e.args[1]) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? a : eval(*e.args[1]);
    }
    case ExprKind::Binary: return binary(e.name, eval(*e.args[0]), eval(*e.args[1]));
    case ExprKind::Compare: return eval_compare(e);
    case ExprKind::Cond:
      if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined("the inline if-expression evaluated to false");
  }
  return Value();
}

Value Interpreter::eval_call(const Expr& e) {
  const Value fn = eval(*e.args[0]);
  CallArgs args;
  for (size_t i = 1; i < e.args.size(); ++i) args.args.push_back(eval(*e.args[i]));
  for (const auto& [k, a] : e.kwargs) args.kwargs.emplace_back(k, eval(*a));
  return call(fn, args);
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) raise_undefined(fn);
  if (!fn.is_callable()) type_error(std::string("'") + fn.type_name() + "' object is not callable");
  return fn.as_callable().fn(*this, args);
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) raise_undefined(obj);
  Value m = method(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_mapping()) {
    if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
  }
  for (const auto& [key, v] : missing_attrs_) {
    if (key.first == obj.kind() && key.second == name) return v;
  }
  Value undefined = missing_attr(obj, name);
  if (missing_attrs_.size() < 64) missing_attrs_.push_back({{obj.kind(), name}, undefined});
  return undefined;
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_mapping()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && key.is_number() && key.kind() != Value::Kind::Float) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.as_list().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.as_list()[static_cast<size_t>(i)];
    } else {
      const std::vector<size_t> cps = code_points(obj.text());
      const auto n = static_cast<int64_t>(cps.size()) - 1;
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value::string(obj.as_str().substr(cps[static_cast<size_t>(i)], cps[static_cast<size_t>(i) + 1]));
    }
    return Value::undefined(cat({"'", type_repr(obj), "' has no element ", std::to_string(key.as_int())}));
  }
  if (key.is_string()) return get_attr(obj, key.text());
  return Value::undefined(cat({"'", type_repr(obj), "' has no element ", key.repr()}));
}

Value Interpreter::eval_slice(const Expr& e) {
  const Value obj = eval(*e.args[0]);
  if (obj.is_undefined()) raise_undefined(obj);
  const Value start = e.args[1] ? eval(*e.args[1]) : Value::none();
  const Value stop = e.args[2] ? eval(*e.args[2]) : Value::none();
  const Value step = e.args[3] ? eval(*e.args[3]) : Value::none();
  if (obj.is_list()) {
    const List& l = obj.as_list();
    List out;
    for (size_t i : slice_indices(static_cast<int64_t>(l.size()), start, stop, step)) out.push_back(l[i]);
    return Value::list(std::move(out));
  }
  if (obj.is_string()) {
    const std::vector<size_t> cps = code_points(obj.text());
    const std::vector<size_t> idx = slice_indices(static_cast<int64_t>(cps.size()) - 1, start, stop, step);
    // Contiguous forward slices keep their marks exactly; others are rebuilt character by character.
    Str out;
    for (size_t i : idx) out.append(obj.as_str().substr(cps[i], cps[i + 1]));
    return Value::string(std::move(out));
  }
  type_error(std::string("'") + obj.type_name() + "' object is not subscriptable");
}

bool Interpreter::contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) {
        type_error(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      }
      return container.text().find(item.text()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.as_list()) {
        if (v.equals(item)) return true;
      }
      return false;
    case Value::Kind::Dict: case Value::Kind::Namespace: return container.as_dict().find(item) != nullptr;
    default: type_error(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1]);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") {
      r = left.equals(right);
    } else if (op == "!=") {
      r = !left.equals(right);
    } else if (op == "in") {
      r = contains(right, left);
    } else if (op == "notin") {
      r = !contains(right, left);
    } else {
      if (left.is_undefined()) raise_undefined(left);
      if (right.is_undefined()) raise_undefined(right);
      if (op == "<") r = left.less(right);
      else if (op == ">") r = right.less(left);
      else if (op == "<=") r = !right.less(left);
      else r = !left.less(right);
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

List Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list();
    case Value::Kind::Dict: {
      List keys;
      for (const auto& [k, val] : v.as_dict().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      const std::vector<size_t> cps = code_points(v.text());
      // Refused before materializing: a template iterating the characters of a huge content would otherwise
      // allocate a value per character ahead of the loop cap.
      if (static_cast<int64_t>(cps.size()) - 1 > config_.max_loop_iterations - iterations_) {
        fail(ErrorKind::Limit, "template loops ran more than " + std::to_string(config_.max_loop_iterations) +
                                   " iterations");
      }
      for (size_t i = 0; i + 1 < cps.size(); ++i) chars.push_back(Value::string(v.as_str().substr(cps[i], cps[i + 1])));
      return chars;
    }
    default: type_error(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

}  // namespace preface::chat::jinja
