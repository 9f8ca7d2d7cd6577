// Arithmetic and string operators with Python semantics (int vs float, floor division and modulo toward
// negative infinity, str/list concatenation and repetition), and the string helpers shared by methods and
// filters (code points, strip, split, slicing indices).
#include <cmath>

#include "chat/jinja/interp.h"

namespace preface::chat::jinja {
namespace {

// Decodes the UTF-8 code point at s[pos] (an invalid byte is its own "code point").
char32_t decode_cp(std::string_view s, size_t pos, size_t* n) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  size_t len = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 1;
  if (pos + len > s.size()) len = 1;
  char32_t cp = len == 1 ? b0 : (b0 & (0x7F >> len));
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[pos + k]);
    if ((b & 0xC0) != 0x80) {
      *n = 1;
      return 0xFFFFFFFF;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *n = len;
  return cp;
}

// Python's str.isspace() for one code point.
bool is_py_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

enum class IntOp { Add, Sub, Mul };

int64_t checked(IntOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflow = op == IntOp::Add   ? __builtin_add_overflow(a, b, &r)
                        : op == IntOp::Sub ? __builtin_sub_overflow(a, b, &r)
                                           : __builtin_mul_overflow(a, b, &r);
  if (overflow) fail(ErrorKind::Value, "integer overflow");
  return r;
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  type_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value repeat(const Value& seq, int64_t n, Interpreter& in) {
  if (seq.is_string()) {
    Str out;
    if (seq.text().empty()) return Value::string("");
    for (int64_t i = 0; i < n; ++i) {
      out.append(seq.as_str());
      in.check_output(out);
    }
    return Value::string(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) {
    in.count_iteration();
    out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  }
  return Value::list(std::move(out));
}

}  // namespace

std::vector<size_t> code_points(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  size_t pos = 0;
  while (pos < s.size()) {
    out.push_back(pos);
    size_t n = 1;
    decode_cp(s, pos, &n);
    pos += n;
  }
  out.push_back(s.size());
  return out;
}

Value derived_string(std::string text, bool marked) {
  Str s{std::move(text), {}};
  if (marked) s.mark_all();
  return Value::string(std::move(s));
}

Str py_strip_str(const Str& s, const Str* chars, char which) {
  const std::string_view t = s.text;
  const std::vector<size_t> cps = code_points(t);
  auto strippable = [&](size_t i) {
    const std::string_view c = t.substr(cps[i], cps[i + 1] - cps[i]);
    if (!chars) {
      size_t n = 0;
      return is_py_space(decode_cp(c, 0, &n));
    }
    const std::vector<size_t> set = code_points(chars->text);
    for (size_t k = 0; k + 1 < set.size(); ++k) {
      if (chars->text.compare(set[k], set[k + 1] - set[k], c) == 0) return true;
    }
    return false;
  };
  size_t b = 0, e = cps.size() - 1;
  if (which != 'r') {
    while (b < e && strippable(b)) ++b;
  }
  if (which != 'l') {
    while (e > b && strippable(e - 1)) --e;
  }
  return s.substr(cps[b], cps[e]);
}

List py_split(const Str& s, const Str* sep, int64_t maxsplit) {
  List out;
  const std::string& t = s.text;
  if (sep) {
    if (sep->text.empty()) fail(ErrorKind::Value, "empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t f = t.find(sep->text, pos);
      if (f == std::string::npos) break;
      out.push_back(Value::string(s.substr(pos, f)));
      pos = f + sep->text.size();
    }
    out.push_back(Value::string(s.substr(pos, t.size())));
    return out;
  }
  const std::vector<size_t> cps = code_points(t);
  auto space = [&](size_t i) {
    size_t n = 0;
    return is_py_space(decode_cp(t, cps[i], &n));
  };
  size_t i = 0;
  const size_t n = cps.size() - 1;
  while (true) {
    while (i < n && space(i)) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = n;
      while (e > i && space(e - 1)) --e;
      out.push_back(Value::string(s.substr(cps[i], cps[e])));
      break;
    }
    size_t j = i;
    while (j < n && !space(j)) ++j;
    out.push_back(Value::string(s.substr(cps[i], cps[j])));
    i = j;
  }
  return out;
}

std::vector<size_t> slice_indices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto as_index = [](const Value& v) {
    if (!v.is_number() || v.kind() == Value::Kind::Float) {
      type_error("slice indices must be integers or None");
    }
    return v.as_int();
  };
  const int64_t step = step_v.is_none() ? 1 : as_index(step_v);
  if (step == 0) fail(ErrorKind::Value, "slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t i = as_index(v);
    if (i < 0) i = std::max<int64_t>(i + n, step < 0 ? -1 : 0);
    return std::min<int64_t>(i, step < 0 ? n - 1 : n);
  };
  const int64_t start = clamp(start_v, step < 0 ? n - 1 : 0);
  const int64_t stop = clamp(stop_v, step < 0 ? -1 : n);
  std::vector<size_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    Str s = a.to_str();
    s.append(b.to_str());
    return Value::string(std::move(s));
  }
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  const bool ints = a.is_number() && b.is_number() && a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float;
  const bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value::integer(checked(IntOp::Add, a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      Str s = a.as_str();
      s.append(b.as_str());
      check_output(s);
      return Value::string(std::move(s));
    }
    if (a.is_list() && b.is_list()) {
      List l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(l));
    }
    if (a.is_string() || a.is_list()) {
      type_error(std::string("can only concatenate ") + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                 a.type_name());
    }
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(checked(IntOp::Sub, a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_float() - b.as_float());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(checked(IntOp::Mul, a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_float() * b.as_float());
    const Value& seq = a.is_number() ? b : a;
    const Value& count = a.is_number() ? a : b;
    if ((seq.is_string() || seq.is_list()) && count.is_number() && count.kind() != Value::Kind::Float) {
      return repeat(seq, count.as_int(), *this);
    }
    unsupported("*", a, b);
  }
  if (op == "/" || op == "//" || op == "%") {
    if (op == "%" && a.is_string()) {
      // printf-style formatting, %s and %d only: the result is marked when the format or an argument is.
      List args = b.is_list() ? b.as_list() : List{b};
      std::string out;
      size_t k = 0;
      bool marked = a.as_str().marked();
      for (size_t i = 0; i < a.text().size(); ++i) {
        const char c = a.text()[i];
        if (c != '%' || i + 1 >= a.text().size()) {
          out += c;
          continue;
        }
        const char f = a.text()[++i];
        if (f == '%') {
          out += '%';
        } else if (f == 's' || f == 'd' || f == 'r') {
          if (k >= args.size()) type_error("not enough arguments for format string");
          marked = marked || args[k].any_marked();
          out += f == 'r' ? args[k].repr() : args[k].to_str().text;
          ++k;
        } else {
          fail(ErrorKind::Unsupported, std::string("unsupported format character '") + f + "'");
        }
      }
      return derived_string(std::move(out), marked);
    }
    if (!nums) unsupported(op, a, b);
    if (b.as_float() == 0.0) fail(ErrorKind::Value, op == "%" ? "modulo by zero" : "division by zero");
    if (op == "/") return Value::number(a.as_float() / b.as_float());
    if (ints) {
      if (a.as_int() == INT64_MIN && b.as_int() == -1) fail(ErrorKind::Value, "integer overflow");
      int64_t q = a.as_int() / b.as_int();
      int64_t m = a.as_int() % b.as_int();
      if (m != 0 && ((m < 0) != (b.as_int() < 0))) {
        --q;
        m += b.as_int();
      }
      return Value::integer(op == "//" ? q : m);
    }
    const double x = a.as_float(), y = b.as_float();
    if (op == "//") return Value::number(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      const int64_t base = a.as_int(), exp = b.as_int();
      if (base == 0 || base == 1) return Value::integer(exp == 0 ? 1 : base);
      if (base == -1) return Value::integer(exp % 2 == 0 ? 1 : -1);
      int64_t result = 1;  // |base| >= 2: at most 63 steps before overflow
      for (int64_t e = exp; e > 0; --e) {
        if (__builtin_mul_overflow(result, base, &result)) fail(ErrorKind::Value, "integer overflow");
      }
      return Value::integer(result);
    }
    if (nums) return Value::number(std::pow(a.as_float(), b.as_float()));
    unsupported("** or pow()", a, b);
  }
  fail(ErrorKind::Unsupported, "operator " + op);
}

}  // namespace preface::chat::jinja
