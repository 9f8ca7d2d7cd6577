// The scanner's Python and Gemma 4 literals (grammar/tool_call_scanner.h): pythonic calls' keyword arguments and
// Gemma 4's objects, strings between <|"|> marks.
#include "grammar/tool_call_scanner.h"

#include <cctype>

namespace preface::grammar::detail {

using nlohmann::json;
using namespace std::string_view_literals;

Got Scanner::python_params(std::vector<std::pair<std::string, json>>& pairs, ScannedCall& c) {
  if (Got g = literal('('); g != Got::Yes) return g;
  for (bool first = true;; first = false) {
    skip_ws();
    if (at_end()) return Got::End;
    if (s_[pos_] == ')') {
      ++pos_;
      if (pairs.empty()) c.arguments = "{";
      return Got::Yes;
    }
    if (!first) {
      if (Got g = literal(','); g != Got::Yes) return g;
      skip_ws();
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (at_end()) return Got::End;
    if (pos_ == start) return Got::No;
    std::string key(s_.substr(start, pos_ - start));
    if (Got g = literal('='); g != Got::Yes) return g;
    json v;
    if (Got g = value(v, false, 0); g != Got::Yes) return g;
    add_pair(c, pairs, std::move(key), std::move(v));
  }
}

Got Scanner::gemma_params(std::vector<std::pair<std::string, json>>& pairs, ScannedCall& c) {
  json obj;
  skip_ws();
  if (at_end()) return Got::End;
  if (s_[pos_] != '{') return Got::No;
  c.arguments.clear();
  if (Got g = object(obj, true, 0, &pairs, &c); g != Got::Yes) return g;
  if (pairs.empty()) c.arguments = "{";
  return Got::Yes;
}

// A Python literal (gemma: Gemma 4's values, strings between <|"|> marks, bare keys).
Got Scanner::value(json& out, bool gemma, size_t depth) {
  if (depth > kMaxToolCallDepth) return Got::No;
  skip_ws();
  if (at_end()) return Got::End;
  const char c = s_[pos_];
  static constexpr std::string_view kQuote = "<|\"|>";
  if (gemma && c == '<') {
    const std::string_view rest = s_.substr(pos_);
    if (rest.substr(0, kQuote.size()) != kQuote) return kQuote.substr(0, rest.size()) == rest ? Got::End : Got::No;
    const size_t end = s_.find(kQuote, pos_ + kQuote.size());
    if (end == std::string_view::npos) return Got::End;
    out = std::string(s_.substr(pos_ + kQuote.size(), end - pos_ - kQuote.size()));
    pos_ = end + kQuote.size();
    return Got::Yes;
  }
  if (!gemma && (c == '"' || c == '\'')) return python_string(out);
  if (c == '[' || c == '(') {
    const char close = c == '[' ? ']' : ')';
    ++pos_;
    out = json::array();
    for (bool first = true;; first = false) {
      skip_ws();
      if (at_end()) return Got::End;
      if (s_[pos_] == close) {
        ++pos_;
        return Got::Yes;
      }
      if (!first) {
        if (Got g = literal(','); g != Got::Yes) return g;
      }
      json item;
      if (Got g = value(item, gemma, depth + 1); g != Got::Yes) return g;
      out.push_back(std::move(item));
    }
  }
  if (c == '{') return object(out, gemma, depth + 1);
  const size_t start = pos_;
  while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                              s_[pos_] == '-' || s_[pos_] == '+')) {
    ++pos_;
  }
  if (at_end()) return Got::End;
  const std::string_view word = s_.substr(start, pos_ - start);
  if (word == "True" || word == "true") out = true;
  else if (word == "False" || word == "false") out = false;
  else if (word == "None" || word == "null") out = nullptr;
  else {
    out = parse_bounded(word);
    if (!out.is_number()) return Got::No;
  }
  return Got::Yes;
}

Got Scanner::python_string(json& out) {
  const char q = s_[pos_++];
  std::string text;
  for (; pos_ < s_.size(); ++pos_) {
    const char c = s_[pos_];
    if (c == q) {
      ++pos_;
      out = std::move(text);
      return Got::Yes;
    }
    if (c != '\\') {
      text += c;
      continue;
    }
    if (++pos_ >= s_.size()) return Got::End;
    const char e = s_[pos_];
    if (e == 'u') {
      if (pos_ + 4 >= s_.size()) return Got::End;
      const json j = json::parse("\"\\u" + std::string(s_.substr(pos_ + 1, 4)) + "\"", nullptr, false);
      if (!j.is_string()) return Got::No;
      text += j.get<std::string>();
      pos_ += 4;
      continue;
    }
    static constexpr std::string_view kFrom = "ntr0\\'\"/bf"sv, kTo = "\n\t\r\0\\'\"/\b\f"sv;
    const size_t k = kFrom.find(e);
    if (k == std::string_view::npos) return Got::No;
    text += kTo[k];
  }
  return Got::End;
}

// {KEY: VALUE, ...}: Python's (keys are string literals) or Gemma 4's (bare keys, colon, Gemma values); the
// top level reports its pairs as they complete (pairs, c).
Got Scanner::object(json& out, bool gemma, size_t depth, std::vector<std::pair<std::string, json>>* pairs,
           ScannedCall* c) {
  ++pos_;
  out = json::object();
  for (bool first = true;; first = false) {
    skip_ws();
    if (at_end()) return Got::End;
    if (s_[pos_] == '}') {
      ++pos_;
      return Got::Yes;
    }
    if (!first) {
      if (Got g = literal(','); g != Got::Yes) return g;
      skip_ws();
    }
    std::string key;
    if (gemma) {
      const size_t colon = s_.find(':', pos_);
      if (colon == std::string_view::npos) return Got::End;
      key = std::string(trim_view(s_.substr(pos_, colon - pos_)));
      if (key.empty() || key.find_first_of("{}[],<") != std::string::npos) return Got::No;
      pos_ = colon + 1;
    } else {
      json k;
      if (Got g = value(k, false, depth); g != Got::Yes) return g;
      if (!k.is_string()) return Got::No;
      if (Got g = literal(':'); g != Got::Yes) return g;
      key = k.get<std::string>();
    }
    json v;
    if (Got g = value(v, gemma, depth + 1); g != Got::Yes) return g;
    if (pairs != nullptr) add_pair(*c, *pairs, key, v);
    out[key] = std::move(v);
  }
}

}  // namespace preface::grammar::detail
