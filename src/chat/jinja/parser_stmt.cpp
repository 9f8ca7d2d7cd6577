// Jinja statements: if/elif/else, for (else, filter, recursive), set (plain, tuple, attribute, block), macro,
// call, filter blocks, break/continue, generation. See parser.h.
#include <array>

#include "chat/jinja/parser.h"

namespace preface::chat::jinja {
namespace {

constexpr int kMaxNesting = 128;

// Tags preface does not run; named in the error so a user sees why the template is refused.
constexpr std::array<std::string_view, 9> kUnsupported = {"extends", "block", "include", "import", "from",
                                                          "with", "do", "autoescape", "trans"};

}  // namespace

Body Parser::parse_template() {
  Body body = parse_body({});
  if (peek().type != Tok::Eof) error("unexpected tag");
  return body;
}

Body Parser::parse_body(const std::vector<std::string_view>& ends) {
  ++depth_;
  if (depth_ > kMaxNesting) error("statements nested too deeply");
  Body body;
  while (true) {
    const Token& t = peek();
    if (t.type == Tok::Eof) {
      if (!ends.empty()) error("missing '{% " + std::string(ends.back()) + " %}'");
      break;
    }
    if (t.type == Tok::Text) {
      auto n = std::make_unique<Node>();
      n->kind = NodeKind::Text;
      n->line = t.line;
      n->text = next().text;
      body.push_back(std::move(n));
    } else if (t.type == Tok::VarBegin) {
      next();
      auto n = std::make_unique<Node>();
      n->kind = NodeKind::Output;
      n->line = t.line;
      n->expr = parse_tuple_or_expression();
      if (peek().type != Tok::VarEnd) error("expected '}}'");
      next();
      body.push_back(std::move(n));
    } else if (t.type == Tok::BlockBegin) {
      const Token& name = peek(1);
      bool is_end = false;
      for (std::string_view e : ends) is_end = is_end || (name.type == Tok::Name && name.text == e);
      if (is_end) {
        next();
        break;
      }
      body.push_back(parse_statement());
    } else {
      error("unexpected token");
    }
  }
  --depth_;
  return body;
}

NodePtr Parser::parse_statement() {
  next();  // BlockBegin
  const int line = peek().line;
  const std::string tag = expect_name();
  NodePtr n;
  if (tag == "if") {
    n = parse_if();
  } else if (tag == "for") {
    n = parse_for();
  } else if (tag == "set") {
    n = parse_set();
  } else if (tag == "macro") {
    n = parse_macro();
  } else if (tag == "call") {
    n = parse_call_block();
  } else if (tag == "filter") {
    n = parse_filter_block();
  } else if (tag == "break" || tag == "continue") {
    expect_block_end();
    n = std::make_unique<Node>();
    n->kind = tag == "break" ? NodeKind::Break : NodeKind::Continue;
  } else if (tag == "generation") {
    expect_block_end();
    n = std::make_unique<Node>();
    n->kind = NodeKind::Scope;
    n->body = parse_body({"endgeneration"});
    next();
    expect_block_end();
  } else {
    for (std::string_view u : kUnsupported) {
      if (tag == u) fail(ErrorKind::Syntax, "the '" + tag + "' tag is not supported (line " + std::to_string(line) + ")");
    }
    fail(ErrorKind::Syntax, "unknown tag '" + tag + "' (line " + std::to_string(line) + ")");
  }
  n->line = line;
  return n;
}

NodePtr Parser::parse_if() {
  auto n = std::make_unique<Node>();
  n->kind = NodeKind::If;
  ExprPtr cond = parse_expression();
  expect_block_end();
  Body body = parse_body({"elif", "else", "endif"});
  n->branches.emplace_back(std::move(cond), std::move(body));
  while (true) {
    const std::string tag = next().text;
    if (tag == "elif") {
      cond = parse_expression();
      expect_block_end();
      body = parse_body({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
    } else if (tag == "else") {
      expect_block_end();
      n->else_body = parse_body({"endif"});
      next();
      expect_block_end();
      return n;
    } else {
      expect_block_end();
      return n;
    }
  }
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> targets;
  const bool paren = skip_op("(");
  do {
    targets.push_back(expect_name());
  } while (skip_op(","));
  if (paren) expect_op(")");
  return targets;
}

NodePtr Parser::parse_for() {
  auto n = std::make_unique<Node>();
  n->kind = NodeKind::For;
  n->targets = parse_targets();
  if (!skip_name("in")) error("expected 'in'");
  n->expr = parse_expression(false);
  if (skip_name("if")) n->cond = parse_expression(false);
  n->recursive = skip_name("recursive");
  expect_block_end();
  n->body = parse_body({"endfor", "else"});
  if (next().text == "else") {
    expect_block_end();
    n->else_body = parse_body({"endfor"});
    next();
  }
  expect_block_end();
  return n;
}

NodePtr Parser::parse_set() {
  auto n = std::make_unique<Node>();
  n->kind = NodeKind::Set;
  n->targets.push_back(expect_name());
  if (skip_op(".")) {
    n->attr = expect_name();
  } else {
    while (skip_op(",")) n->targets.push_back(expect_name());
  }
  if (skip_op("=")) {
    n->expr = parse_tuple_or_expression();
    expect_block_end();
    return n;
  }
  if (n->targets.size() != 1 || !n->attr.empty()) error("expected '='");
  n->kind = NodeKind::SetBlock;
  if (at_op("|")) {  // {% set x | filter %}...{% endset %}: the filters apply to the body's text
    ExprPtr placeholder = make(ExprKind::Literal);
    n->expr = parse_filters_and_tests(std::move(placeholder));
  }
  expect_block_end();
  n->body = parse_body({"endset"});
  next();
  expect_block_end();
  return n;
}

void Parser::parse_params(std::vector<MacroParam>* params) {
  expect_op("(");
  while (!at_op(")")) {
    MacroParam p;
    p.name = expect_name();
    if (skip_op("=")) p.default_value = parse_expression();
    params->push_back(std::move(p));
    if (!skip_op(",")) break;
  }
  expect_op(")");
}

NodePtr Parser::parse_macro() {
  auto n = std::make_unique<Node>();
  n->kind = NodeKind::Macro;
  n->text = expect_name();
  parse_params(&n->params);
  expect_block_end();
  n->body = parse_body({"endmacro"});
  next();
  expect_block_end();
  return n;
}

NodePtr Parser::parse_call_block() {
  auto n = std::make_unique<Node>();
  n->kind = NodeKind::CallBlock;
  if (at_op("(")) parse_params(&n->params);
  n->expr = parse_expression();
  if (n->expr->kind != ExprKind::Call) error("expected a macro call");
  expect_block_end();
  n->body = parse_body({"endcall"});
  next();
  expect_block_end();
  return n;
}

NodePtr Parser::parse_filter_block() {
  auto n = std::make_unique<Node>();
  n->kind = NodeKind::FilterBlock;
  // Parsed as `placeholder | name(args) | ...`, the placeholder standing for the body's text.
  pos_ = pos_ > 0 ? pos_ - 1 : 0;  // let the filter chain see a leading '|'
  toks_[pos_] = Token{Tok::Op, "|", 0, 0.0, toks_[pos_].line};
  n->expr = parse_filters_and_tests(make(ExprKind::Literal));
  expect_block_end();
  n->body = parse_body({"endfilter"});
  next();
  expect_block_end();
  return n;
}

}  // namespace preface::chat::jinja
