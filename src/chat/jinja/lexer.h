// Jinja lexer: template source -> tokens, with jinja2's whitespace control as Hugging Face configures it.
//   - newlines (\r\n, \r) become \n and one trailing newline at the end of the source is dropped
//     (keep_trailing_newline=False);
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`, `-#}` all whitespace after it;
//   - trim_blocks: the first newline after a block or comment tag is removed (`+%}` keeps it);
//   - lstrip_blocks: spaces and tabs between the start of a line and a block or comment tag are removed
//     (`{%+` keeps them);
//   - `{% raw %}...{% endraw %}` is text.
// Expressions inside tags become Name / String / Int / Float / Op tokens; string literals are unescaped as
// Python's unicode-escape does (a backslash-newline disappears).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace preface::chat::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // Text: the text; Name/Op: the name or operator; String: the unescaped value
  int64_t ival = 0;
  double fval = 0.0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws JinjaError(Syntax) with a line number on an unterminated tag, comment or string, or a bad character.
std::vector<Token> tokenize(std::string_view source, const LexOptions& options = {});

}  // namespace preface::chat::jinja
