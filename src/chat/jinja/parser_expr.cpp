// Jinja expressions, precedence as jinja2's parser.py (see parser.h).
#include <array>

#include "chat/jinja/parser.h"

namespace preface::chat::jinja {
namespace {

constexpr int kMaxDepth = 128;  // nesting of expressions and statements

struct DepthGuard {
  DepthGuard(int* d, const Parser*) : depth(d) { ++*depth; }
  ~DepthGuard() { --*depth; }
  int* depth;
};

}  // namespace

const Token& Parser::peek(size_t ahead) const {
  return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
}
const Token& Parser::next() {
  const Token& t = peek();
  if (pos_ < toks_.size() - 1) ++pos_;
  return t;
}
bool Parser::at_op(std::string_view op) const { return peek().type == Tok::Op && peek().text == op; }
bool Parser::at_name(std::string_view name) const { return peek().type == Tok::Name && peek().text == name; }
bool Parser::skip_op(std::string_view op) {
  if (!at_op(op)) return false;
  next();
  return true;
}
bool Parser::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  next();
  return true;
}
void Parser::expect_op(std::string_view op) {
  if (!skip_op(op)) error("expected '" + std::string(op) + "'");
}
std::string Parser::expect_name() {
  if (peek().type != Tok::Name) error("expected a name");
  return next().text;
}
void Parser::expect_block_end() {
  if (peek().type != Tok::BlockEnd) error("expected the end of the statement ('%}')");
  next();
}
void Parser::error(const std::string& what) const {
  const Token& t = peek();
  std::string got;
  switch (t.type) {
    case Tok::Eof: got = "end of template"; break;
    case Tok::BlockEnd: got = "'%}'"; break;
    case Tok::VarEnd: got = "'}}'"; break;
    case Tok::Text: got = "text"; break;
    default: got = "'" + t.text + "'";
  }
  fail(ErrorKind::Syntax, what + ", got " + got + " (line " + std::to_string(t.line) + ")");
}
ExprPtr Parser::make(ExprKind kind) const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = peek().line;
  return e;
}

ExprPtr Parser::parse_expression(bool allow_cond) {
  DepthGuard guard(&depth_, this);
  if (depth_ > kMaxDepth) error("expression nested too deeply");
  ExprPtr expr = parse_or();
  while (allow_cond && skip_name("if")) {
    ExprPtr cond = make(ExprKind::Cond);
    cond->args.push_back(parse_or());
    cond->args.push_back(std::move(expr));
    cond->args.push_back(skip_name("else") ? parse_expression() : nullptr);
    expr = std::move(cond);
  }
  return expr;
}

ExprPtr Parser::parse_tuple_or_expression() {
  ExprPtr first = parse_expression();
  if (!at_op(",")) return first;
  ExprPtr list = make(ExprKind::List);
  list->args.push_back(std::move(first));
  while (skip_op(",")) {
    if (peek().type == Tok::BlockEnd || peek().type == Tok::VarEnd) break;
    list->args.push_back(parse_expression());
  }
  return list;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (skip_name("or")) {
    ExprPtr e = make(ExprKind::Or);
    e->args.push_back(std::move(left));
    e->args.push_back(parse_and());
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (skip_name("and")) {
    ExprPtr e = make(ExprKind::And);
    e->args.push_back(std::move(left));
    e->args.push_back(parse_not());
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (at_name("not")) {
    DepthGuard guard(&depth_, this);
    if (depth_ > kMaxDepth) error("expression nested too deeply");
    ExprPtr e = make(ExprKind::Not);
    next();
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  static constexpr std::array<std::string_view, 6> kOps = {"==", "!=", "<", "<=", ">", ">="};
  while (true) {
    std::string op;
    for (std::string_view o : kOps) {
      if (at_op(o)) op = o;
    }
    if (!op.empty()) {
      next();
    } else if (skip_name("in")) {
      op = "in";
    } else if (at_name("not") && peek(1).type == Tok::Name && peek(1).text == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(ExprKind::Compare);
      cmp->args.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

namespace {
ExprPtr binary(ExprPtr left, std::string op, ExprPtr right, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::Binary;
  e->line = line;
  e->name = std::move(op);
  e->args.push_back(std::move(left));
  e->args.push_back(std::move(right));
  return e;
}
}  // namespace

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    const std::string op = next().text;
    left = binary(std::move(left), op, parse_concat(), peek().line);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (skip_op("~")) left = binary(std::move(left), "~", parse_math2(), peek().line);
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const std::string op = next().text;
    left = binary(std::move(left), op, parse_pow(), peek().line);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (skip_op("**")) left = binary(std::move(left), "**", parse_unary(true), peek().line);
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(&depth_, this);
  if (depth_ > kMaxDepth) error("expression nested too deeply");
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    node = make(at_op("-") ? ExprKind::Neg : ExprKind::Pos);
    next();
    node->args.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  return with_filter ? parse_filters_and_tests(std::move(node)) : std::move(node);
}

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  ExprPtr e;
  switch (t.type) {
    case Tok::Name: {
      e = make(ExprKind::Literal);
      const std::string name = next().text;
      if (name == "true" || name == "True") {
        e->literal = Value::boolean(true);
      } else if (name == "false" || name == "False") {
        e->literal = Value::boolean(false);
      } else if (name == "none" || name == "None") {
        e->literal = Value::none();
      } else {
        e->kind = ExprKind::Name;
        e->name = name;
      }
      return e;
    }
    case Tok::String: {
      e = make(ExprKind::Literal);
      std::string s;
      while (peek().type == Tok::String) s += next().text;  // adjacent literals concatenate
      e->literal = Value::string(std::move(s));
      return e;
    }
    case Tok::Int:
      e = make(ExprKind::Literal);
      e->literal = Value::integer(next().ival);
      return e;
    case Tok::Float:
      e = make(ExprKind::Literal);
      e->literal = Value::number(next().fval);
      return e;
    default: break;
  }
  if (skip_op("(")) {
    if (skip_op(")")) return make(ExprKind::List);  // ()
    ExprPtr first = parse_expression();
    if (skip_op(")")) return first;
    e = make(ExprKind::List);
    e->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (at_op(")")) break;
      e->args.push_back(parse_expression());
    }
    expect_op(")");
    return e;
  }
  if (skip_op("[")) {
    e = make(ExprKind::List);
    while (!at_op("]")) {
      e->args.push_back(parse_expression());
      if (!skip_op(",")) break;
    }
    expect_op("]");
    return e;
  }
  if (skip_op("{")) {
    e = make(ExprKind::Dict);
    while (!at_op("}")) {
      e->args.push_back(parse_expression());
      expect_op(":");
      e->args.push_back(parse_expression());
      if (!skip_op(",")) break;
    }
    expect_op("}");
    return e;
  }
  error("expected an expression");
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (skip_op(".")) {
      if (peek().type == Tok::Int) {  // x.0 -> x[0]
        ExprPtr item = make(ExprKind::Item);
        ExprPtr index = make(ExprKind::Literal);
        index->literal = Value::integer(next().ival);
        item->args.push_back(std::move(node));
        item->args.push_back(std::move(index));
        node = std::move(item);
        continue;
      }
      ExprPtr attr = make(ExprKind::Attr);
      attr->name = expect_name();
      attr->args.push_back(std::move(node));
      node = std::move(attr);
    } else if (skip_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      ExprPtr call = make(ExprKind::Call);
      call->args.push_back(std::move(node));
      parse_call_args(call.get());
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  ExprPtr start, stop, step;
  bool is_slice = false;
  if (!at_op(":")) start = parse_expression();
  if (skip_op(":")) {
    is_slice = true;
    if (!at_op("]") && !at_op(":")) stop = parse_expression();
    if (skip_op(":") && !at_op("]")) step = parse_expression();
  }
  expect_op("]");
  ExprPtr e = make(is_slice ? ExprKind::Slice : ExprKind::Item);
  e->args.push_back(std::move(node));
  e->args.push_back(std::move(start));
  if (is_slice) {
    e->args.push_back(std::move(stop));
    e->args.push_back(std::move(step));
  }
  return e;
}

void Parser::parse_call_args(Expr* call) {
  expect_op("(");
  while (!at_op(")")) {
    if (at_op("*") || at_op("**")) error("*args and **kwargs are not supported");
    if (peek().type == Tok::Name && peek(1).type == Tok::Op && peek(1).text == "=") {
      std::string key = next().text;
      next();
      call->kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!call->kwargs.empty()) error("positional argument after keyword argument");
      call->args.push_back(parse_expression());
    }
    if (!skip_op(",")) break;
  }
  expect_op(")");
}

ExprPtr Parser::parse_filters_and_tests(ExprPtr node) {
  while (true) {
    if (skip_op("|")) {
      ExprPtr f = make(ExprKind::Filter);
      f->name = expect_name();
      while (skip_op(".")) f->name.append(".").append(expect_name());
      f->args.push_back(std::move(node));
      if (at_op("(")) parse_call_args(f.get());
      node = std::move(f);
    } else if (skip_name("is")) {
      ExprPtr t = make(ExprKind::Test);
      t->negate = skip_name("not");
      t->name = expect_name();
      while (skip_op(".")) t->name.append(".").append(expect_name());
      t->args.push_back(std::move(node));
      const Token& p = peek();
      if (at_op("(")) {
        parse_call_args(t.get());
      } else if ((p.type == Tok::Name || p.type == Tok::String || p.type == Tok::Int || p.type == Tok::Float ||
                  at_op("[") || at_op("{")) &&
                 !(p.type == Tok::Name && (p.text == "else" || p.text == "or" || p.text == "and"))) {
        // `x is divisibleby 3`: one argument without parentheses
        t->args.push_back(parse_postfix(parse_primary()));
      }
      node = std::move(t);
    } else if (at_op("(")) {
      ExprPtr call = make(ExprKind::Call);
      call->args.push_back(std::move(node));
      parse_call_args(call.get());
      node = std::move(call);
    } else {
      return node;
    }
  }
}

}  // namespace preface::chat::jinja
