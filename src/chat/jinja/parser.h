// Jinja parser: tokens -> syntax tree (ast.h). Statements in parser_stmt.cpp, expressions in parser_expr.cpp,
// with jinja2's precedence (loosest first): `x if c else y`, or, and, not, comparisons (== != < <= > >= in,
// not in; chained), + -, ~, * / // %, **, unary - +, then postfix . [] () and the | filter and `is` test
// chains. Unsupported statements (extends, block, include, import, from, with, do) are syntax errors that
// name the tag.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace preface::chat::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}
  // The whole template. Throws JinjaError(Syntax) with the line.
  Body parse_template();

  // Expressions (parser_expr.cpp).
  ExprPtr parse_expression(bool allow_cond = true);
  ExprPtr parse_tuple_or_expression();  // `a, b` at the top level of `set`/`for` -> List

 private:
  // Statements (parser_stmt.cpp). parse_body reads until a block tag whose name is in `ends`, leaving the
  // parser on that name token.
  Body parse_body(const std::vector<std::string_view>& ends);
  NodePtr parse_statement();
  NodePtr parse_if();
  NodePtr parse_for();
  NodePtr parse_set();
  NodePtr parse_macro();
  NodePtr parse_call_block();
  NodePtr parse_filter_block();
  void parse_params(std::vector<MacroParam>* params);
  std::vector<std::string> parse_targets();

  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filters_and_tests(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_args(Expr* call);

  const Token& peek(size_t ahead = 0) const;
  const Token& next();
  bool at_op(std::string_view op) const;
  bool at_name(std::string_view name) const;
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  void expect_op(std::string_view op);
  void expect_block_end();
  std::string expect_name();
  [[noreturn]] void error(const std::string& what) const;
  ExprPtr make(ExprKind kind) const;

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;  // nesting of statements and expressions, capped so a deep template cannot exhaust the stack
};

}  // namespace preface::chat::jinja
