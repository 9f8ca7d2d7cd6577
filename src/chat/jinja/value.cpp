// Values: construction, Python truthiness, str/repr, equality and ordering, content-mark bookkeeping.
#include "chat/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace preface::chat::jinja {

const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Syntax: return "TemplateSyntaxError";
    case ErrorKind::Undefined: return "UndefinedError";
    case ErrorKind::Type: return "TypeError";
    case ErrorKind::Value: return "ValueError";
    case ErrorKind::Raised: return "TemplateError";
    case ErrorKind::Limit: return "LimitError";
    case ErrorKind::Unsupported: return "UnsupportedError";
    case ErrorKind::Runtime: return "TemplateRuntimeError";
  }
  return "Error";
}

void fail(ErrorKind kind, const std::string& message) { throw JinjaError(kind, message); }

void Str::append(const Str& s) {
  const size_t base = text.size();
  text += s.text;
  for (const TextSpan& m : s.marks) {
    if (!marks.empty() && marks.back().offset + marks.back().length == base + m.offset) {
      marks.back().length += m.length;  // adjacent: merge
    } else {
      marks.push_back({base + m.offset, m.length});
    }
  }
}

Str Str::substr(size_t begin, size_t end) const {
  Str out;
  end = std::min(end, text.size());
  if (begin >= end) return out;
  out.text = text.substr(begin, end - begin);
  for (const TextSpan& m : marks) {
    const size_t lo = std::max(begin, m.offset);
    const size_t hi = std::min(end, m.offset + m.length);
    if (lo < hi) out.marks.push_back({lo - begin, hi - lo});
  }
  return out;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const Str>(Str{std::move(hint), {}});
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  v.i_ = b ? 1 : 0;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) { return string(Str{std::move(s), {}}); }
Value Value::string(Str s) {
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::make_shared<const Str>(std::move(s));
  return v;
}
Value Value::content(std::string s) {
  Str str{std::move(s), {}};
  str.mark_all();
  return string(std::move(str));
}
Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::List;
  v.l_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::dict() {
  Value v;
  v.kind_ = Kind::Dict;
  v.d_ = std::make_shared<Dict>();
  return v;
}
Value Value::namespace_() {
  Value v = dict();
  v.kind_ = Kind::Namespace;
  return v;
}
Value Value::callable(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

const std::string& Value::undefined_hint() const {
  static const std::string kNone = "value is undefined";
  return s_ ? s_->text : kNone;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0.0;
    case Kind::String: return !s_->text.empty();
    case Kind::List: return !l_->empty();
    case Kind::Dict: return !d_->items.empty();
    case Kind::Callable: case Kind::Namespace: return true;
  }
  return false;
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits in scientific form, then laid out as Python's repr: positional for exponents in
  // [-5, 16), scientific otherwise, always with a '.' or an exponent.
  auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= -5 && exp < 16) {
    if (exp < 0) {
      out = "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits;
      out.append(static_cast<size_t>(exp) + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1);
      out += '.';
      out += digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += ebuf;
  }
  if (neg) out.insert(out.begin(), '-');
  return out;
}

std::string string_repr(std::string_view s) {
  const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += q;
  return out;
}

Str Value::to_str() const {
  switch (kind_) {
    case Kind::Undefined: return {};
    case Kind::String: return *s_;
    case Kind::List: case Kind::Dict: {
      Str s{repr(), {}};
      if (any_marked()) s.mark_all();
      return s;
    }
    default: return Str{repr(), {}};
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return b_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return float_repr(f_);
    case Kind::String: return string_repr(s_->text);
    case Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < l_->size(); ++i) out += (i ? ", " : "") + (*l_)[i].repr();
      return out + "]";
    }
    case Kind::Dict: {
      std::string out = "{";
      for (size_t i = 0; i < d_->items.size(); ++i) {
        out += (i ? ", " : "") + d_->items[i].first.repr() + ": " + d_->items[i].second.repr();
      }
      return out + "}";
    }
    case Kind::Callable: return "<function " + fn_->name + ">";
    case Kind::Namespace: return "<Namespace>";
  }
  return "";
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Callable: return "function";
    case Kind::Namespace: return "Namespace";
  }
  return "object";
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::Float || o.kind_ == Kind::Float) return as_float() == o.as_float();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::Undefined: case Kind::None: return true;
    case Kind::String: return s_->text == o.s_->text;
    case Kind::List: {
      if (l_->size() != o.l_->size()) return false;
      for (size_t i = 0; i < l_->size(); ++i) {
        if (!(*l_)[i].equals((*o.l_)[i])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      if (d_->items.size() != o.d_->items.size()) return false;
      for (const auto& [k, v] : d_->items) {
        const Value* ov = o.d_->find(k);
        if (!ov || !v.equals(*ov)) return false;
      }
      return true;
    }
    default: return identity() == o.identity();
  }
}

bool Value::less(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::Float || o.kind_ == Kind::Float) return as_float() < o.as_float();
    return i_ < o.i_;
  }
  if (kind_ == Kind::String && o.kind_ == Kind::String) return s_->text < o.s_->text;
  if (kind_ == Kind::List && o.kind_ == Kind::List) {
    const size_t n = std::min(l_->size(), o.l_->size());
    for (size_t i = 0; i < n; ++i) {
      if ((*l_)[i].less((*o.l_)[i])) return true;
      if ((*o.l_)[i].less((*l_)[i])) return false;
    }
    return l_->size() < o.l_->size();
  }
  fail(ErrorKind::Type, std::string("'<' not supported between instances of '") + type_name() + "' and '" +
                            o.type_name() + "'");
}

bool Value::any_marked() const {
  switch (kind_) {
    case Kind::String: return s_->marked();
    case Kind::List:
      for (const Value& v : *l_) {
        if (v.any_marked()) return true;
      }
      return false;
    case Kind::Dict: case Kind::Namespace:
      for (const auto& [k, v] : d_->items) {
        if (k.any_marked() || v.any_marked()) return true;
      }
      return false;
    default: return false;
  }
}

const void* Value::identity() const {
  if (l_) return l_.get();
  if (d_) return d_.get();
  if (fn_) return fn_.get();
  return s_.get();
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.text() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.text()));
  for (const auto& [k, v] : items) {
    if (k.equals(key)) return &v;
  }
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  for (auto& [k, v] : items) {
    if (k.equals(key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

const Value* CallArgs::get(size_t pos, std::string_view name) const {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return pos < args.size() ? &args[pos] : nullptr;
}

}  // namespace preface::chat::jinja
