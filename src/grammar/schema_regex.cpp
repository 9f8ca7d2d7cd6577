// Regex -> GBNF for JSON Schema `pattern`. Written here: PCRE2 matches strings but cannot enumerate a
// language as a grammar. Semantics as JSON Schema: the pattern is searched for, so without ^ (and $) any
// characters may come before (after) it.
#include "grammar/schema_regex.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace preface::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMaxCp = 0x10FFFF;

Ranges normalize(Ranges r, bool negated) {
  std::sort(r.begin(), r.end());
  Ranges merged;
  for (const auto& x : r) {
    if (!merged.empty() && x.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, x.second);
    } else {
      merged.push_back(x);
    }
  }
  if (!negated) return merged;
  Ranges inv;
  uint32_t next = 0;
  for (const auto& x : merged) {
    if (x.first > next) inv.emplace_back(next, x.first - 1);
    next = x.second + 1;
  }
  if (next <= kMaxCp) inv.emplace_back(next, kMaxCp);
  return inv;
}

bool contains(const Ranges& r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [&](const auto& x) { return x.first <= cp && cp <= x.second; });
}

// A set of code points as JSON string content: characters that need no escape as a class, plus the escaped
// forms of '"', '\\' and the named control escapes. Other control characters (which only \u escapes could
// spell) are left out: the result matches a subset, never a superset.
std::string class_expr(const Ranges& set) {
  Ranges plain;
  for (const auto& [lo, hi] : set) {
    // Remove 0x00-0x1F, '"' (0x22), '\\' (0x5C), 0x7F.
    static constexpr std::pair<uint32_t, uint32_t> kHoles[] = {{0x00, 0x1F}, {0x22, 0x22}, {0x5C, 0x5C}, {0x7F, 0x7F}};
    uint32_t a = lo;
    for (const auto& [hlo, hhi] : kHoles) {
      if (hhi < a || hlo > hi) continue;
      if (hlo > a) plain.emplace_back(a, hlo - 1);
      a = hhi + 1;
    }
    if (a <= hi) plain.emplace_back(a, hi);
  }
  std::vector<std::string> alts;
  if (!plain.empty()) {
    std::string c = "[";
    for (const auto& [lo, hi] : plain) {
      c += gbnf_codepoint(lo);
      if (hi != lo) c += cat("-", gbnf_codepoint(hi));
    }
    alts.push_back(c + "]");
  }
  static constexpr std::pair<uint32_t, const char*> kEscapes[] = {
      {'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\t', "\\t"}, {'\r', "\\r"}, {'\f', "\\f"}, {'\b', "\\b"}};
  for (const auto& [cp, esc] : kEscapes) {
    if (contains(set, cp)) alts.push_back(gbnf_literal(esc));
  }
  if (alts.empty()) throw GrammarError("", "the pattern has a character class no JSON string can hold");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

class RegexParser {
 public:
  RegexParser(std::string_view p, const std::string& char_rule) : p_(p), char_rule_(char_rule) {}

  std::string parse() {
    bool anchored_start = false, anchored_end = false;
    if (!p_.empty() && p_.front() == '^') {
      anchored_start = true;
      ++i_;
    }
    std::string body = alternation(&anchored_end);
    if (i_ != p_.size()) fail("unbalanced ')'");
    std::string out;
    if (!anchored_start) out += char_rule_ + "* ";
    out += "(" + body + ")";
    if (!anchored_end) out += " " + char_rule_ + "*";
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw GrammarError("", "pattern: " + what + " (at offset " + std::to_string(i_) + ")");
  }
  bool eof() const { return i_ >= p_.size(); }
  char peek() const { return eof() ? '\0' : p_[i_]; }

  // top-level '$' is only accepted at the very end of the pattern (anchored_end set).
  std::string alternation(bool* anchored_end) {
    std::vector<std::string> alts{sequence(anchored_end)};
    while (peek() == '|') {
      ++i_;
      alts.push_back(sequence(anchored_end));
    }
    std::string out;
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + (alts[k].empty() ? "\"\"" : alts[k]);
    return out;
  }

  std::string sequence(bool* anchored_end) {
    std::string out;
    while (!eof() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++i_;
        if (anchored_end == nullptr || !eof()) fail("'$' is supported only at the end of the pattern");
        *anchored_end = true;
        break;
      }
      std::string atom_expr = atom();
      atom_expr = quantified(std::move(atom_expr));
      out += (out.empty() ? "" : " ") + atom_expr;
    }
    return out;
  }

  std::string quantified(std::string a) {
    const char c = peek();
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      q = std::string(1, c);
    } else if (c == '{') {
      const size_t start = i_++;
      auto number = [&]() {
        int64_t v = 0;
        const size_t s = i_;
        while (peek() >= '0' && peek() <= '9') {
          v = v * 10 + (peek() - '0');
          if (v > 10000) fail("repetition bound above 10000");
          ++i_;
        }
        if (s == i_) fail("expected a number in {}");
        return v;
      };
      const int64_t lo = number();
      std::string hi = std::to_string(lo);
      bool range = false;
      if (peek() == ',') {
        ++i_;
        range = true;
        hi = peek() == '}' ? "" : std::to_string(number());
      }
      if (peek() != '}') {
        i_ = start;
        fail("malformed {m,n}");
      }
      ++i_;
      q = cat("{", std::to_string(lo), range ? "," : "", range ? hi : "", "}");
    } else {
      return a;
    }
    if (peek() == '?' || peek() == '+') fail("lazy and possessive quantifiers are not supported");
    return "(" + a + ")" + q;
  }

  uint32_t utf8_char() {
    const auto c = static_cast<unsigned char>(p_[i_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i_ + static_cast<size_t>(n) > p_.size()) fail("invalid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + static_cast<size_t>(k)]) & 0x3F);
    i_ += static_cast<size_t>(n);
    return cp;
  }

  // An escape after '\': a class (\d \w \s and negations) into `set`, or one literal code point.
  bool escape(Ranges& set, uint32_t& cp) {
    if (eof()) fail("pattern ends with '\\'");
    const char e = p_[i_++];
    static const Ranges kDigit{{'0', '9'}}, kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
        kSpace{{'\t', '\r'}, {' ', ' '}};
    switch (e) {
      case 'd': set = kDigit; return true;
      case 'D': set = normalize(kDigit, true); return true;
      case 'w': set = kWord; return true;
      case 'W': set = normalize(kWord, true); return true;
      case 's': set = kSpace; return true;
      case 'S': set = normalize(kSpace, true); return true;
      case 'n': cp = '\n'; return false;
      case 't': cp = '\t'; return false;
      case 'r': cp = '\r'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case 'u': {
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
          const char h = peek();
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) fail("expected 4 hex digits after \\u");
          v = v * 16 + static_cast<uint32_t>(d);
          ++i_;
        }
        cp = v;
        return false;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
          fail(std::string("unsupported escape '\\") + e + "'");
        }
        cp = static_cast<unsigned char>(e);
        return false;
    }
  }

  std::string atom() {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (peek() == '?') {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          fail("lookaround and named groups are not supported");
        }
      }
      if (++depth_ > kMaxPatternNesting) {
        fail("groups nested deeper than " + std::to_string(kMaxPatternNesting) + " levels");
      }
      std::string inner = alternation(nullptr);
      if (peek() != ')') fail("expected ')'");
      ++i_;
      --depth_;
      return cat("(", inner.empty() ? std::string("\"\"") : inner, ")");
    }
    if (c == '[') {
      ++i_;
      const bool negated = peek() == '^';
      if (negated) ++i_;
      Ranges set;
      bool first = true;
      while (first || peek() != ']') {
        first = false;
        if (eof()) fail("unterminated character class");
        Ranges sub;
        uint32_t a = 0;
        if (peek() == '\\') {
          ++i_;
          if (escape(sub, a)) {
            set.insert(set.end(), sub.begin(), sub.end());
            continue;
          }
        } else {
          a = utf8_char();
        }
        uint32_t z = a;
        if (peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
          ++i_;
          if (peek() == '\\') {
            ++i_;
            if (escape(sub, z)) fail("a class escape cannot end a range");
          } else {
            z = utf8_char();
          }
          if (z < a) fail("character range out of order");
        }
        set.emplace_back(a, z);
      }
      ++i_;
      return class_expr(normalize(set, negated));
    }
    if (c == '.') {
      ++i_;
      return class_expr(normalize({{'\n', '\n'}, {'\r', '\r'}}, true));
    }
    if (c == '\\') {
      ++i_;
      Ranges set;
      uint32_t cp = 0;
      if (escape(set, cp)) return class_expr(normalize(set, false));
      return class_expr({{cp, cp}});
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier needs something before it");
    if (c == '^') fail("'^' is supported only at the start of the pattern");
    const uint32_t cp = utf8_char();
    return class_expr({{cp, cp}});
  }

  std::string_view p_;
  const std::string& char_rule_;
  size_t i_ = 0;
  size_t depth_ = 0;  // open groups around the current position (the parser recurses once per group)
};

}  // namespace

std::string gbnf_codepoint(uint32_t cp) {
  static const char* kHex = "0123456789ABCDEF";
  std::string s = "\\U";
  for (int shift = 28; shift >= 0; shift -= 4) s += kHex[(cp >> shift) & 0xF];
  return s;
}

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      static const char* kHex = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      out += ch;  // UTF-8 passes through (the GBNF parser decodes it)
    }
  }
  return out + "\"";
}

std::string pattern_to_gbnf(std::string_view pattern, const std::string& char_rule) {
  return RegexParser(pattern, char_rule).parse();
}

}  // namespace preface::grammar
