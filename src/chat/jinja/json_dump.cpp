// tojson: Python's json.dumps over template values (what Hugging Face's tojson filter calls), byte for byte:
// ", " and ": " separators without indent, "," and ": " with it; one item per line under indent; non-ASCII
// kept unless ensure_ascii; floats as Python's repr (NaN, Infinity); keys must be strings, numbers, booleans
// or None (converted as json.dumps does).
#include <algorithm>
#include <cstdio>

#include "chat/jinja/interp.h"

namespace preface::chat::jinja {
namespace {

struct Dumper {
  int indent;
  bool ensure_ascii;
  bool sort_keys;
  std::string item_sep;
  std::string key_sep;
  std::string out;
  int depth = 0;

  void string(std::string_view s) {
    out += '"';
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
          } else if (c >= 0x80 && ensure_ascii) {
            i += escape_code_point(s, i) - 1;
          } else {
            out += static_cast<char>(c);
          }
      }
    }
    out += '"';
  }

  // \uXXXX (surrogate pairs above U+FFFF) for the UTF-8 sequence at s[i]; returns its byte length.
  size_t escape_code_point(std::string_view s, size_t i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t n = (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    uint32_t cp = n == 1 ? b0 : (b0 & (0x7F >> n));
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    }
    out += buf;
    return n;
  }

  void newline() {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
  }

  std::string key(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::String: return k.text();
      case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
      case Value::Kind::None: return "null";
      case Value::Kind::Int: return std::to_string(k.as_int());
      case Value::Kind::Float: return float_repr(k.as_float());
      default: type_error(std::string("keys must be str, int, float, bool or None, not ") + k.type_name());
    }
  }

  void value(const Value& v) {
    if (depth > 256) fail(ErrorKind::Limit, "tojson: value nested too deeply");
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: {
        const double f = v.as_float();
        out += f != f ? "NaN" : f == 1.0 / 0.0 ? "Infinity" : f == -1.0 / 0.0 ? "-Infinity" : float_repr(f);
        return;
      }
      case Value::Kind::String: string(v.text()); return;
      case Value::Kind::List: {
        const List& l = v.as_list();
        if (l.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        ++depth;
        for (size_t i = 0; i < l.size(); ++i) {
          if (i) out += item_sep;
          newline();
          value(l[i]);
        }
        --depth;
        newline();
        out += ']';
        return;
      }
      case Value::Kind::Dict: {
        std::vector<std::pair<std::string, const Value*>> items;
        for (const auto& [k, val] : v.as_dict().items) items.emplace_back(key(k), &val);
        if (sort_keys) {
          std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        if (items.empty()) {
          out += "{}";
          return;
        }
        out += '{';
        ++depth;
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          newline();
          string(items[i].first);
          out += key_sep;
          value(*items[i].second);
        }
        --depth;
        newline();
        out += '}';
        return;
      }
      default:
        type_error(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(const Value& v, int indent, bool ensure_ascii, bool sort_keys, std::string_view item_sep,
                    std::string_view key_sep) {
  Dumper d{indent, ensure_ascii, sort_keys, std::string(item_sep), std::string(key_sep), {}};
  if (d.item_sep.empty()) d.item_sep = indent >= 0 ? "," : ", ";
  if (d.key_sep.empty()) d.key_sep = ": ";
  d.value(v);
  return std::move(d.out);
}

}  // namespace preface::chat::jinja
