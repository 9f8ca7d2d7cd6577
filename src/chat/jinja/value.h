// The values of the Jinja interpreter (src/chat/jinja). Debian ships no C++ Jinja library (nor any maintained
// C++ implementation of it), so preface carries its own, covering what Hugging Face chat templates use; see
// jinja.h for the supported language.
//
// Semantics are Python's, as jinja2 3.1 evaluates templates: int (64-bit) and float are distinct, `str()` of a
// list is its Python repr, dicts keep insertion order, lists and dicts are shared by reference (a namespace's
// list grows for every holder). Undefined behaves as jinja2's default Undefined: it prints as "", is false,
// iterates as empty, and raises UndefinedError when an attribute or item of it is taken or it takes part in
// arithmetic.
//
// Content marks: a string remembers which of its bytes came from the caller's message content (Str::marks).
// Concatenation (+, ~, join), slicing and indexing, iteration, strip/trim, split, replace and reverse keep the
// marks byte for byte; any other operation on a marked string (case mapping, format, %, indent, escape, tojson
// or str() of a structure holding one) marks its whole result. Marked bytes are
// tokenized as plain text (never as control tokens); see chat_template.h's RenderedChat.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace preface::chat::jinja {

// What went wrong, in jinja2's/Python's terms (UndefinedError, TypeError, ...). Raised: the template called
// raise_exception(msg) and what() is msg verbatim. Limit: one of the interpreter's resource caps was hit.
// Runtime: what jinja2 raises as TemplateRuntimeError (an unknown filter reached while rendering).
enum class ErrorKind { Syntax, Undefined, Type, Value, Raised, Limit, Unsupported, Runtime };
const char* error_kind_name(ErrorKind k);  // "TemplateSyntaxError", "UndefinedError", "TypeError", ...

class JinjaError : public preface::Error {
 public:
  JinjaError(ErrorKind kind, const std::string& message) : preface::Error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] void fail(ErrorKind kind, const std::string& message);

// A string and its content marks: ascending, disjoint, non-empty byte ranges of `text`.
struct Str {
  std::string text;
  std::vector<TextSpan> marks;

  void append(std::string_view s) { text += s; }
  void append(const Str& s);
  // The bytes [begin, end) with their marks.
  Str substr(size_t begin, size_t end) const;
  bool marked() const { return !marks.empty(); }
  void mark_all() {
    marks.clear();
    if (!text.empty()) marks.push_back({0, text.size()});
  }
};

class Value;
using List = std::vector<Value>;
struct Dict;
struct CallArgs;
class Interpreter;
// A built-in function, a bound method, a macro or a `caller`.
using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;
struct Callable {
  std::string name;
  NativeFn fn;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable, Namespace };

  Value() = default;  // Undefined
  static Value undefined(std::string hint);  // hint: the UndefinedError message its use raises
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value string(Str s);
  static Value content(std::string s);  // a string whose every byte is marked
  static Value list(List items = {});
  static Value dict();
  static Value namespace_();
  static Value callable(std::string name, NativeFn fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_float() const { return kind_ == Kind::Float ? f_ : static_cast<double>(i_); }
  const Str& as_str() const { return *s_; }
  const std::string& text() const { return s_->text; }
  List& as_list() const { return *l_; }
  Dict& as_dict() const { return *d_; }
  const Callable& as_callable() const { return *fn_; }
  const std::string& undefined_hint() const;

  bool truthy() const;
  // Python str(): strings as they are, None -> "None", True -> "True", lists/dicts as repr; Undefined -> "".
  Str to_str() const;
  // Python repr() ('a' quoted, lists and dicts as Python prints them).
  std::string repr() const;
  // jinja2's type names in messages: "str", "int", "list", "dict", "NoneType", "Undefined", ...
  const char* type_name() const;
  // Python ==, and < for sorting (TypeError between unorderable kinds).
  bool equals(const Value& other) const;
  bool less(const Value& other) const;
  // True when any string inside (keys included) carries content marks.
  bool any_marked() const;
  // Identity of shared containers (lists/dicts), for `is sameas`.
  const void* identity() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0.0;
  std::shared_ptr<const Str> s_;  // String; Undefined: the hint
  std::shared_ptr<List> l_;
  std::shared_ptr<Dict> d_;
  std::shared_ptr<const Callable> fn_;
};

// An insertion-ordered mapping (dict, namespace, loop). Keys are values (strings in practice); lookups compare
// by Python ==. Linear: template dicts are small.
struct Dict {
  std::vector<std::pair<Value, Value>> items;

  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
  void set(std::string_view key, Value value) { set(Value::string(std::string(key)), std::move(value)); }
};

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;

  // The argument named `name` or at position `pos` (kwargs win), or nullptr.
  const Value* get(size_t pos, std::string_view name) const;
};

// Python float repr (shortest round trip: 1.0, 0.1, 1e-05, 1e+16, inf, nan).
std::string float_repr(double f);
// Python repr of a str ('it''s' -> "it's", escapes \n, \t, \\, control bytes).
std::string string_repr(std::string_view s);

}  // namespace preface::chat::jinja
