// Jinja lexer (see lexer.h for the whitespace rules, which follow jinja2 3.1's lexer.py).
#include "chat/jinja/lexer.h"

#include <array>
#include <cctype>

#include "chat/jinja/value.h"

namespace preface::chat::jinja {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexOptions& opt) : src_(normalize_newlines(source)), opt_(opt) {}

  std::vector<Token> run() {
    bool line_starting = true;  // the text about to be read starts a line
    bool strip_next = false;    // the previous tag ended with '-'
    while (pos_ < src_.size()) {
      size_t start = pos_;
      while ((start = src_.find('{', start)) != std::string::npos) {
        if (start + 1 < src_.size() && (src_[start + 1] == '{' || src_[start + 1] == '%' || src_[start + 1] == '#')) break;
        ++start;
      }
      std::string text = src_.substr(pos_, start == std::string::npos ? std::string::npos : start - pos_);
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && is_ws(text[k])) ++k;
        text.erase(0, k);
      }
      if (start == std::string::npos) {
        emit_text(std::move(text));
        pos_ = src_.size();
        break;
      }
      const char kind = src_[start + 1];
      const char ctrl = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (ctrl == '-') {
        while (!text.empty() && is_ws(text.back())) text.pop_back();
      } else if (ctrl != '+' && opt_.lstrip_blocks && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = l_pos < text.size();
          for (size_t k = l_pos; k < text.size(); ++k) blank = blank && is_ws(text[k]);
          if (blank) text.resize(l_pos);
        }
      }
      line_ += count_newlines(pos_, start);
      emit_text(std::move(text));
      pos_ = start + 2 + (ctrl == '-' || ctrl == '+' ? 1 : 0);
      bool strip_after = false;
      if (kind == '#') {
        strip_after = comment();
      } else if (kind == '%' && raw_block(&strip_after)) {
      } else {
        strip_after = tag(kind == '{');
      }
      strip_next = strip_after;
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Tok::Eof, "", 0, 0.0, line_});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(ErrorKind::Syntax, what + " (line " + std::to_string(line_) + ")");
  }

  int count_newlines(size_t from, size_t to) const {
    int n = 0;
    for (size_t i = from; i < to && i < src_.size(); ++i) n += src_[i] == '\n';
    return n;
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({Tok::Text, std::move(text), 0, 0.0, line_});
  }

  // After a block or comment end: trim_blocks removes one newline unless the tag ended with '+'.
  void after_block_end(bool plus) {
    if (opt_.trim_blocks && !plus && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
  }

  bool comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) error("unterminated comment");
    line_ += count_newlines(pos_, end);
    const bool minus = end > pos_ && src_[end - 1] == '-';
    const bool plus = end > pos_ && src_[end - 1] == '+';
    pos_ = end + 2;
    if (!minus) after_block_end(plus);
    return minus;
  }

  // `{% raw %}`: true when the tag is one (the body is emitted as text).
  bool raw_block(bool* strip_after) {
    size_t p = pos_;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    bool minus = false;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) minus = src_[p++] == '-';
    if (src_.compare(p, 2, "%}") != 0) return false;
    p += 2;
    // Find {%[-+]? endraw [-+]?%}
    size_t search = p;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos) error("missing endraw");
      size_t q = open + 2;
      const bool end_minus_before = q < src_.size() && src_[q] == '-';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      bool end_minus = false, end_plus = false;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) (src_[q++] == '-' ? end_minus : end_plus) = true;
      if (src_.compare(q, 2, "%}") != 0) error("malformed endraw");
      std::string body = src_.substr(p, open - p);
      if (minus) body.erase(0, std::min(body.size(), body.find_first_not_of(" \t\n\r\f\v")));
      if (end_minus_before) {
        while (!body.empty() && is_ws(body.back())) body.pop_back();
      }
      line_ += count_newlines(pos_, q);
      emit_text(std::move(body));
      pos_ = q + 2;
      if (!end_minus) after_block_end(end_plus);
      *strip_after = end_minus;
      return true;
    }
  }

  // One {{ ... }} or {% ... %}; returns whether it ended with '-'.
  bool tag(bool is_var) {
    tokens_.push_back({is_var ? Tok::VarBegin : Tok::BlockBegin, "", 0, 0.0, line_});
    const char closer = is_var ? '}' : '%';
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_ws(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) error(is_var ? "unterminated '{{'" : "unterminated '{%'");
      const char c = src_[pos_];
      if (depth == 0) {
        const bool minus = c == '-' && pos_ + 2 < src_.size() && src_[pos_ + 1] == closer && src_[pos_ + 2] == '}';
        const bool plus = !is_var && c == '+' && pos_ + 2 < src_.size() && src_[pos_ + 1] == '%' &&
                          src_[pos_ + 2] == '}';
        if (minus || plus || (c == closer && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}')) {
          pos_ += (minus || plus) ? 3 : 2;
          tokens_.push_back({is_var ? Tok::VarEnd : Tok::BlockEnd, "", 0, 0.0, line_});
          if (!is_var && !minus) after_block_end(plus);
          return minus;
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        const size_t b = pos_;
        while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
        tokens_.push_back({Tok::Name, src_.substr(b, pos_ - b), 0, 0.0, line_});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        op(&depth);
      }
    }
  }

  void number() {
    const size_t b = pos_;
    bool is_float = false;
    auto digits = [&] {
      while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
    };
    digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        is_float = true;
        pos_ = q;
        digits();
      }
    }
    std::string lit;
    for (size_t i = b; i < pos_; ++i) {
      if (src_[i] != '_') lit += src_[i];
    }
    Token t{is_float ? Tok::Float : Tok::Int, lit, 0, 0.0, line_};
    try {
      if (is_float) {
        t.fval = std::stod(lit);
      } else {
        t.ival = std::stoll(lit);
      }
    } catch (const std::exception&) {
      error("number literal out of range: " + lit);
    }
    tokens_.push_back(std::move(t));
  }

  void string_literal(char quote) {
    const int start_line = line_;
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) error("unterminated string");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) error("unterminated string");
      const char e = src_[pos_++];
      auto hex = [&](int n) {
        uint32_t cp = 0;
        for (int k = 0; k < n; ++k) {
          if (pos_ >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[pos_]))) error("bad escape");
          const char h = src_[pos_++];
          cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        if (cp > 0x10FFFF) error("bad escape");
        append_utf8(out, cp);
      };
      switch (e) {
        case '\n': ++line_; break;  // line continuation
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            }
            append_utf8(out, cp);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back({Tok::String, std::move(out), 0, 0.0, start_line});
  }

  void op(int* depth) {
    static constexpr std::array<std::string_view, 6> kTwo = {"**", "//", "==", "!=", "<=", ">="};
    for (std::string_view two : kTwo) {
      if (src_.compare(pos_, 2, two) == 0) {
        tokens_.push_back({Tok::Op, std::string(two), 0, 0.0, line_});
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    static constexpr std::string_view kOne = "+-*/%~<>=()[]{},.:|";
    if (kOne.find(c) == std::string_view::npos) error(std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') ++*depth;
    if (c == ')' || c == ']' || c == '}') {
      if (*depth == 0) error(std::string("unexpected '") + c + "'");
      --*depth;
    }
    tokens_.push_back({Tok::Op, std::string(1, c), 0, 0.0, line_});
    ++pos_;
  }

  std::string src_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace preface::chat::jinja
