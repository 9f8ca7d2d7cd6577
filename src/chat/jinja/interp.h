// The interpreter's internals, shared by eval_stmt.cpp (statements, scopes, macros), eval_expr.cpp
// (expressions, operators, attribute lookup), filters.cpp, tests.cpp, methods.cpp and globals.cpp.
// One Interpreter per render call; it is not shared between threads.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/jinja.h"

namespace preface::chat::jinja {

enum class Flow { Normal, Break, Continue };

class Interpreter {
 public:
  Interpreter(const Dict& vars, const RenderConfig& config);

  // Statements (eval_stmt.cpp).
  Flow exec(const Body& body, Str& out);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);

  // Expressions (eval_expr.cpp).
  Value eval(const Expr& e);
  Value call(const Value& fn, CallArgs& args);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value binary(const std::string& op, const Value& a, const Value& b);
  bool contains(const Value& container, const Value& item);
  // The items of an iterable (list, dict keys, string characters; Undefined: none). TypeError otherwise.
  List iterate(const Value& v);

  // Filters, tests, methods, globals: tables looked up by name (filters.cpp, tests.cpp, methods.cpp,
  // globals.cpp). A missing filter or test is a TemplateSyntaxError-like error, as jinja2 raises at compile.
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  Value method(const Value& obj, const std::string& name);  // bound method, or Undefined
  static Dict make_globals();

  void count_iteration();
  void check_output(const Str& out) const;
  const RenderConfig& config() const { return config_; }
  int call_depth = 0;

 private:
  Value eval_call(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_slice(const Expr& e);
  Flow exec_node(const Node& n, Str& out);
  Flow exec_for(const Node& n, Str& out);
  void exec_set(const Node& n);
  Value make_macro(const Node& n);

  const RenderConfig& config_;
  std::vector<std::shared_ptr<Dict>> frames_;  // [0]: globals + vars, [1]: template top level, then loop scopes
  int64_t iterations_ = 0;
  // Undefined values of missing attributes by (object kind, name): templates probe the same missing attribute
  // of many values (content['type'] of every character of a string content), one hint string each is enough.
  std::vector<std::pair<std::pair<Value::Kind, std::string>, Value>> missing_attrs_;

  friend struct MacroScope;
};

// The filter table's shape (filters.cpp); filters_seq.cpp adds selectattr, rejectattr, select, reject, map,
// unique, sort, dictsort, reverse, batch, max, min, sum.
using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);
void add_sequence_filters(std::unordered_map<std::string, FilterFn>& table);
// jinja2's environment.getitem over a dotted path ("function.name", "0.name"): items first, then attributes.
Value get_path(Interpreter& in, const Value& item, const Value& path);

// Raises the UndefinedError an Undefined value carries.
[[noreturn]] void raise_undefined(const Value& v);
// Throws TypeError when `v` is Undefined-sensitive use; helper for arity checks.
[[noreturn]] void type_error(const std::string& message);
// Python's str.strip(chars) family: chars empty = whitespace (Python's str.isspace, Unicode). which: 'b', 'l', 'r'.
Str py_strip_str(const Str& s, const Str* chars, char which);
// Python's str.split(sep, maxsplit): sep null = runs of whitespace. Parts keep their marks.
List py_split(const Str& s, const Str* sep, int64_t maxsplit);
// Python slicing indices for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step);
// UTF-8 code point boundaries of s (byte offsets, including s.size()).
std::vector<size_t> code_points(std::string_view s);
// A value built by an operation on `inputs`: marked entirely when any input carries marks.
Value derived_string(std::string text, bool marked);

}  // namespace preface::chat::jinja
