// GBNF text -> byte-level Grammar. Written here: no Debian package parses GBNF.
// Groups and repetitions become synthesized rules as in llama.cpp's parser:
//   X*  ->  R ::= X R | ""        X+  ->  X R         X?  ->  R ::= X | ""
//   X{m,n} -> X (m times) then O_{n-m}, O_k ::= X O_{k-1} | ""      X{m,} -> X (m times) then R
#include <algorithm>
#include <map>

#include "grammar/gbnf_builder.h"
#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace preface::grammar {
namespace {

using detail::Builder;
using detail::Item;
using detail::Seq;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int64_t kMaxRepetition = 100000;

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  Parser(std::string_view text, Builder& b) : s_(text), b_(b) {}

  void parse() {
    skip_space(true);
    while (i_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw GrammarError("offset " + std::to_string(i_), what);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool eof() const { return i_ >= s_.size(); }

  void skip_space(bool newline_ok) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n' && s_[i_] != '\r') ++i_;
      } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newline_ok)) {
        ++i_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = i_;
    while (i_ < s_.size() && is_word_char(s_[i_])) ++i_;
    if (i_ == start) fail("expected a rule name");
    return std::string(s_.substr(start, i_ - start));
  }

  void parse_rule() {
    const std::string name = parse_name();
    skip_space(false);
    if (s_.substr(i_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
    i_ += 3;
    skip_space(true);
    const int32_t id = b_.named(name);
    if (b_.defined[static_cast<size_t>(id)]) fail("rule '" + name + "' is defined twice");
    b_.defined[static_cast<size_t>(id)] = true;
    parse_alternates(id, name, false);
    if (peek() == '\r') ++i_;
    if (peek() == '\n') {
      ++i_;
    } else if (!eof()) {
      fail("expected a newline or the end after rule '" + name + "'");
    }
  }

  void parse_alternates(int32_t rule, const std::string& name, bool nested) {
    b_.add_alt(rule, parse_sequence(name, nested));
    while (peek() == '|') {
      ++i_;
      skip_space(true);
      b_.add_alt(rule, parse_sequence(name, nested));
    }
  }

  // One code point of a literal or class: an escape or a UTF-8 character of the text.
  uint32_t parse_char() {
    if (eof()) fail("unexpected end of the grammar");
    const auto c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      ++i_;
      if (eof()) fail("unexpected end after '\\'");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint32_t>(e);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: --i_; fail(std::string("unknown escape '\\") + e + "'");
      }
    }
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i_ + static_cast<size_t>(n) > s_.size()) fail("invalid UTF-8 in the grammar text");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s_[i_ + static_cast<size_t>(k)]);
      if ((cc & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (cc & 0x3F);
    }
    i_ += static_cast<size_t>(n);
    return cp;
  }

  uint32_t parse_hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char c = peek();
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("expected " + std::to_string(n) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    if (v > kMaxCodePoint) fail("code point out of range");
    return v;
  }

  Item byte_item(uint8_t byte) {
    std::bitset<256> set;
    set.set(byte);
    return {false, b_.terminal(set)};
  }

  // A code point class as one item: a byte set when every member is ASCII, else a rule of UTF-8 sequences.
  Item class_item(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated, const std::string& name) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    if (negated) {
      std::vector<std::pair<uint32_t, uint32_t>> inv;
      uint32_t next = 0;
      for (const auto& r : merged) {
        if (r.first > next) inv.emplace_back(next, r.first - 1);
        next = r.second + 1;
      }
      if (next <= kMaxCodePoint) inv.emplace_back(next, kMaxCodePoint);
      merged = std::move(inv);
    }
    std::vector<uint32_t> key;
    for (const auto& r : merged) {
      key.push_back(r.first);
      key.push_back(r.second);
    }
    if (const auto it = b_.class_cache.find(key); it != b_.class_cache.end()) return it->second;
    std::bitset<256> single;
    std::vector<Seq> multi;
    for (const auto& r : merged) {
      for (const auto& seq : utf8_sequences(r.first, r.second)) {
        if (seq.size() == 1) {
          for (uint32_t c = seq[0].first; c <= seq[0].second; ++c) single.set(c);
          continue;
        }
        Seq items;
        for (const auto& [lo, hi] : seq) {
          std::bitset<256> set;
          for (uint32_t c = lo; c <= hi; ++c) set.set(c);
          items.push_back({false, b_.terminal(set)});
        }
        multi.push_back(std::move(items));
      }
    }
    if (single.none() && multi.empty()) fail("empty character class");
    Item item;
    if (multi.empty()) {
      item = {false, b_.terminal(single)};
    } else {
      const int32_t rule = b_.synthesized(name);
      if (single.any()) b_.add_alt(rule, {{false, b_.terminal(single)}});
      for (Seq& seq : multi) b_.add_alt(rule, std::move(seq));
      item = {true, rule};
    }
    b_.class_cache.emplace(std::move(key), item);
    return item;
  }

  int64_t parse_int() {
    const size_t start = i_;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepetition) fail("repetition bound above " + std::to_string(kMaxRepetition));
      ++i_;
    }
    if (i_ == start) fail("expected a number");
    return v;
  }

  // Replaces seq[from, end) by its repetition {lo, hi} (hi < 0: unbounded).
  void repeat(Seq& seq, size_t from, int64_t lo, int64_t hi, const std::string& name) {
    if (from >= seq.size()) fail("a repetition operator needs something before it");
    Item x;
    if (seq.size() - from == 1) {
      x = seq[from];
    } else {
      const int32_t r = b_.synthesized(name);
      b_.add_alt(r, Seq(seq.begin() + static_cast<ptrdiff_t>(from), seq.end()));
      x = {true, r};
    }
    seq.resize(from);
    for (int64_t k = 0; k < lo; ++k) {
      b_.count(1);
      seq.push_back(x);
    }
    if (hi < 0) {  // R ::= X R | ""
      const int32_t r = b_.synthesized(name);
      b_.add_alt(r, {x, {true, r}});
      b_.add_alt(r, {});
      seq.push_back({true, r});
    } else if (hi > lo) {
      int32_t prev = -1;
      for (int64_t k = 0; k < hi - lo; ++k) {  // O_k ::= X O_{k-1} | ""
        const int32_t r = b_.synthesized(name);
        Seq alt{x};
        if (prev >= 0) alt.push_back({true, prev});
        b_.add_alt(r, std::move(alt));
        b_.add_alt(r, {});
        prev = r;
      }
      seq.push_back({true, prev});
    }
  }

  Seq parse_sequence(const std::string& name, bool nested) {
    Seq seq;
    size_t last = 0;  // where the last element starts (what a repetition operator applies to)
    while (!eof()) {
      const char c = peek();
      if (c == '"') {
        ++i_;
        last = seq.size();
        while (peek() != '"') {
          if (eof()) fail("unterminated literal");
          for (char byte : utf8_encode(parse_char())) seq.push_back(byte_item(static_cast<uint8_t>(byte)));
        }
        ++i_;
      } else if (c == '[') {
        ++i_;
        const bool negated = peek() == '^';
        if (negated) ++i_;
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
        while (peek() != ']') {
          if (eof()) fail("unterminated character class");
          const uint32_t a = parse_char();
          uint32_t z = a;
          if (peek() == '-' && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
            ++i_;
            z = parse_char();
            if (z < a) fail("character range out of order");
          }
          ranges.emplace_back(a, z);
        }
        ++i_;
        last = seq.size();
        seq.push_back(class_item(std::move(ranges), negated, name));
      } else if (c == '.') {
        ++i_;
        last = seq.size();
        seq.push_back(class_item({{0, kMaxCodePoint}}, false, name));
      } else if (c == '(') {
        ++i_;
        skip_space(true);
        if (++depth_ > kMaxGrammarNesting) {
          fail("groups nested deeper than " + std::to_string(kMaxGrammarNesting) + " levels");
        }
        const int32_t r = b_.synthesized(name);
        parse_alternates(r, name, true);
        if (peek() != ')') fail("expected ')'");
        ++i_;
        --depth_;
        last = seq.size();
        seq.push_back({true, r});
      } else if (is_word_char(c)) {
        const std::string ref = parse_name();
        last = seq.size();
        seq.push_back({true, b_.named(ref)});
      } else if (c == '*' || c == '+' || c == '?') {
        ++i_;
        repeat(seq, last, c == '+' ? 1 : 0, c == '?' ? 1 : -1, name);
      } else if (c == '{') {
        ++i_;
        skip_space(nested);
        const int64_t lo = parse_int();
        int64_t hi = lo;
        skip_space(nested);
        if (peek() == ',') {
          ++i_;
          skip_space(nested);
          hi = peek() == '}' ? -1 : parse_int();
          skip_space(nested);
          if (hi >= 0 && hi < lo) fail("repetition {m,n} needs m <= n");
        }
        if (peek() != '}') fail("expected '}'");
        ++i_;
        repeat(seq, last, lo, hi, name);
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  std::string_view s_;
  size_t i_ = 0;
  size_t depth_ = 0;  // open groups around the current position (the parser recurses once per group)
  Builder& b_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view start_rule) {
  if (text.size() > kMaxGrammarTextBytes) {
    throw GrammarError("", "the grammar text is larger than " + std::to_string(kMaxGrammarTextBytes) + " bytes");
  }
  Builder b;
  Parser(text, b).parse();
  Grammar g;
  g.terminals = std::move(b.terminals);
  g.rule_names = b.names;
  bool has_start = false;
  for (size_t r = 0; r < b.rules.size(); ++r) {
    if (!b.defined[r]) throw GrammarError("", "undefined rule '" + b.names[r] + "'");
    if (b.names[r] == start_rule) {
      g.root = static_cast<int32_t>(r);
      has_start = true;
    }
  }
  if (!has_start) throw GrammarError("", "no '" + std::string(start_rule) + "' rule");
  g.rules.resize(b.rules.size());
  for (size_t r = 0; r < b.rules.size(); ++r) {
    for (const Seq& alt : b.rules[r]) {
      g.rules[r].push_back(static_cast<int32_t>(g.elements.size()));
      for (const Item& it : alt) g.elements.push_back({it.is_ref ? Element::Ref : Element::Bytes, it.value});
      g.elements.push_back({Element::End, 0});
    }
  }
  check_left_recursion(g);
  return g;
}

}  // namespace preface::grammar
